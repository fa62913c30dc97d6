// Regenerates proto/gen from the .proto files with buf and ts-proto. CI runs it and fails
// when the committed code differs.
import { execFileSync } from "node:child_process";
import { rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const protoDir = dirname(fileURLToPath(import.meta.url));
const buf = join(protoDir, "..", "node_modules", ".bin", "buf");

rmSync(join(protoDir, "gen"), { recursive: true, force: true });
execFileSync(buf, ["lint"], { cwd: protoDir, stdio: "inherit" });
execFileSync(buf, ["generate"], { cwd: protoDir, stdio: "inherit" });
console.log("proto: generated proto/gen");
