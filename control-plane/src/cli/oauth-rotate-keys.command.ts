// `vault oauth-rotate-keys` (DECISIONS "OAuth authorization server"): a new RS256 key goes first in
// DATA_DIR/oauth/jwks.json (new access tokens are signed with it once the control plane restarts);
// the previous key stays listed, so tokens it signed keep verifying until they expire, and a key
// retired longer than an access token lives is dropped. Replicas that have not restarted yet still
// verify tokens of the new key: an unknown key id re-reads the file.
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
  for (const kid of result.retiredKids) progress(`retired (still listed for 11 minutes): ${kid}`);
  for (const kid of result.droppedKids) progress(`dropped (its tokens have expired): ${kid}`);
  progress("restart or roll the control plane so that it signs with the new key");
  return 0;
}
