// `vault kek-rotate` against the hosted control plane's database and DATA_DIR (the same
// configuration `npm start` reads). With the embedded database the service must be stopped first:
// one process at a time holds PGlite.
import { keyringPath, stageKeyringKey } from "../auth/kek.ts";
import { refuseKeyringBehind, retireKek, rotateKek } from "../auth/kek-rotate.ts";
import { withKekRotationLock } from "../auth/kek-rotation-lock.repo.ts";
import { createOperatorsRepo } from "../auth/operators.repo.ts";
import { loadConfig } from "../config.ts";
import type { OpenDatabase } from "../db/database.ts";
import { withServiceDatabase } from "./service-database.ts";

export async function runKekRotate(
  env: NodeJS.ProcessEnv,
  progress: (line: string) => void,
  step: "rotate" | "stage" | "retire" = "rotate",
): Promise<number> {
  const config = loadConfig(env);
  // With PostgreSQL the service keeps running, each replica with its own copy of the file: the
  // rotation goes in steps with a roll between them. The embedded service is stopped: one go.
  const isHosted = config.DATABASE_URL !== undefined;
  if (step !== "rotate" && !isHosted) {
    throw new Error(
      `--${step} is a step of a rotation on PostgreSQL; on the embedded database, run vault kek-rotate alone`,
    );
  }
  return withServiceDatabase(config, (database, dataDir) =>
    // One rotation at a time: the embedded database's own lock already keeps a second command out;
    // on PostgreSQL another operator's or job's rotation, with its own copy of the file, would
    // re-wrap the same rows under a key this copy never gets (kek-rotation-lock.repo.ts).
    isHosted
      ? withKekRotationLock(database.db, () => runStep(database, dataDir))
      : runStep(database, dataDir),
  );

  async function runStep(database: OpenDatabase, dataDir: string): Promise<number> {
    const path = config.KEK_KEYRING_FILE ?? keyringPath(dataDir);
    const repo = createOperatorsRepo(database.db);
    // Every step, before it changes anything: a copy of kek.json older than the rows (another
    // rotation moved them since it was taken) is refused, so it never reaches the Secret.
    await refuseKeyringBehind(repo, path);
    if (step === "stage") {
      const id = stageKeyringKey(path);
      progress(
        `staged ${id} in ${path}: put this kek.json in the control plane's Secret and roll it, then run vault kek-rotate`,
      );
      return 0;
    }
    if (step === "retire") {
      const report = await retireKek(repo, path, progress);
      progress(
        `done: ${report.rewrapped} operator(s) moved under ${report.keyId}; put this kek.json in the Secret and roll the control plane`,
      );
      return report.unknownKeyRows > 0 ? 1 : 0;
    }
    progress(`rotating the key-encryption key in ${path}`);
    const report = await rotateKek(repo, path, progress, { isHosted });
    progress(`done: ${report.rewrapped} operator(s) now under ${report.keyId}`);
    return report.unknownKeyRows > 0 ? 1 : 0;
  }
}
