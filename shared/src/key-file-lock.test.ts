// The key file's lock: a live holder refuses a second change, a holder that is gone is taken
// over, and a writer killed mid-write leaves the old file as it was.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { KeyFileBusyError, keyFileLockPath, withKeyFileLock } from "./key-file-lock.ts";

const keyFile = () => join(mkdtempSync(join(tmpdir(), "latch-lock-")), "keys.json");
const filesModule = new URL("./files.ts", import.meta.url).pathname;

describe("withKeyFileLock", () => {
  it("refuses while another live process holds the lock, and changes nothing", async () => {
    const file = keyFile();
    const holder = spawn(process.execPath, ["-e", "setTimeout(() => {}, 30000)"]);
    try {
      writeFileSync(keyFileLockPath(file), `${holder.pid} ${hostname()}\n`);
      let ran = false;
      expect(() =>
        withKeyFileLock(
          file,
          () => {
            ran = true;
          },
          { waitMs: 100 },
        ),
      ).toThrow(KeyFileBusyError);
      expect(ran).toBe(false);
      try {
        withKeyFileLock(file, () => undefined, { waitMs: 50 });
      } catch (error) {
        expect((error as Error).message).toContain(`process ${holder.pid}`);
        expect((error as Error).message).toContain(keyFileLockPath(file));
      }
    } finally {
      holder.kill("SIGKILL");
    }
  });

  it("takes over a lock whose process is gone, and releases its own", () => {
    const file = keyFile();
    const gone = spawnSync(process.execPath, ["-e", "0"]).pid;
    writeFileSync(keyFileLockPath(file), `${gone} ${hostname()}\n`);
    expect(withKeyFileLock(file, () => 42)).toBe(42);
    expect(existsSync(keyFileLockPath(file))).toBe(false);
  });

  it("holds the lock until a change that awaits has settled", async () => {
    const file = keyFile();
    let release!: () => void;
    const first = withKeyFileLock(file, () => new Promise<void>((resolve) => (release = resolve)));
    expect(readFileSync(keyFileLockPath(file), "utf8")).toBe(`${process.pid} ${hostname()}\n`);
    release();
    await first;
    expect(existsSync(keyFileLockPath(file))).toBe(false);
  });

  it("leaves the old file whole when its writer is killed before or while writing the new one", () => {
    for (const killAt of ["writeFileSync", "fsyncSync"]) {
      const file = keyFile();
      writeFileSync(file, '{"keys":["old"]}\n');
      // The writer dies (SIGKILL, nothing runs after it) in the middle of its write, or once the
      // new content is in the temporary file and before the rename.
      const script = `
        import fs from "node:fs";
        import { syncBuiltinESMExports } from "node:module";
        const original = fs.${killAt};
        fs.${killAt} = (target, data, ...rest) => {
          if (${JSON.stringify(killAt)} === "writeFileSync" && typeof target === "number") {
            fs.writeSync(target, String(data).slice(0, 7));
          }
          process.kill(process.pid, "SIGKILL");
          return original(target, data, ...rest);
        };
        syncBuiltinESMExports();
        const { writePrivateFileAtomic } = await import(${JSON.stringify(filesModule)});
        writePrivateFileAtomic(${JSON.stringify(file)}, JSON.stringify({ keys: ["old", "new"] }) + "\\n");
      `;
      const run = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
      expect(run.signal, `${killAt}: ${run.stderr}`).toBe("SIGKILL");
      expect(readFileSync(file, "utf8"), killAt).toBe('{"keys":["old"]}\n');
    }
  });
});
