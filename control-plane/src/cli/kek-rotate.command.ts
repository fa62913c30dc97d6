// `vault kek-rotate` against the hosted control plane's database and DATA_DIR (the same
// configuration `npm start` reads). With the embedded database the service must be stopped first:
// one process at a time holds PGlite.
import { keyringPath } from "../auth/kek.ts";
import { rotateKek } from "../auth/kek-rotate.ts";
import { createOperatorsRepo } from "../auth/operators.repo.ts";
import { loadConfig } from "../config.ts";
import { withServiceDatabase } from "./service-database.ts";

export async function runKekRotate(
  env: NodeJS.ProcessEnv,
  progress: (line: string) => void,
): Promise<number> {
  const config = loadConfig(env);
  return withServiceDatabase(config, async (database, dataDir) => {
    const path = config.KEK_KEYRING_FILE ?? keyringPath(dataDir);
    progress(`rotating the key-encryption key in ${path}`);
    const report = await rotateKek(createOperatorsRepo(database.db), path, progress);
    progress(`done: ${report.rewrapped} operator(s) now under ${report.keyId}`);
    return report.unknownKeyRows > 0 ? 1 : 0;
  });
}
