// `vault oauth-rotate-keys` (DECISIONS "OAuth authorization server"): a new RS256 key goes first in
// DATA_DIR/oauth/jwks.json (new access tokens are signed with it once the control plane restarts);
// the previous key stays listed, so tokens it signed before the rotation keep verifying until they
// expire, and no replica trusts it longer than that (each reads the file again within seconds): a
// token it signs after the rotation, by a leaked copy or a replica not yet rolled, is refused at once.
import { resolve } from "node:path";
import { loadConfig } from "../config.ts";
import { oauthKeysPath, rotateOAuthKeys } from "../oauth/oauth-keys.ts";

export async function runOAuthRotateKeys(
  env: NodeJS.ProcessEnv,
  progress: (line: string) => void,
): Promise<number> {
  const config = loadConfig(env);
  const dataDir = resolve(config.DATA_DIR);
  progress(`rotating the OAuth signing keys in ${oauthKeysPath(dataDir, config.OAUTH_JWKS_FILE)}`);
  // One rotation at a time (rotateOAuthKeys holds the key file's lock).
  const result = await rotateOAuthKeys(dataDir, Date.now(), config.OAUTH_JWKS_FILE);
  progress(`new signing key ${result.newKid}`);
  for (const kid of result.retiredKids) {
    progress(
      `retired: ${kid} (tokens it signed before now are trusted for 11 minutes more, none it signs from now on)`,
    );
  }
  for (const kid of result.droppedKids) progress(`dropped (its tokens have expired): ${kid}`);
  progress(
    "a control plane reading this file signs with the new key within 5 seconds; one given a copy (a Secret) signs with the retired key, whose tokens /mcp refuses, until that copy is replaced or it is rolled: do that now",
  );
  return 0;
}
