// The shape of control-plane/src kept true by a test: no feature folder imports a folder that
// imports it back (directly or around a loop), and only repos, db/ and migrations run Kysely.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SRC = fileURLToPath(new URL("../src/", import.meta.url));

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith(".ts") && !entry.name.includes(".test.") ? [path] : [];
  });
}

/** The top folder of a file under src/ ("." for the files at the top). */
const folderOf = (file: string) => {
  const parts = relative(SRC, file).split("/");
  return parts.length > 1 ? parts[0]! : ".";
};

function folderGraph(): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  for (const file of sourceFiles(SRC)) {
    const from = folderOf(file);
    for (const [, specifier] of readFileSync(file, "utf8").matchAll(/from "(\.[^"]+)"/g)) {
      const to = folderOf(resolve(dirname(file), specifier!));
      if (to === from || to === ".") continue;
      graph.set(from, (graph.get(from) ?? new Set()).add(to));
    }
  }
  return graph;
}

/** Every folder loop, as the folders on it sorted (so each loop is listed once). */
function folderLoops(graph: Map<string, Set<string>>): string[] {
  const loops = new Set<string>();
  for (const start of graph.keys()) {
    const stack: string[][] = [[start]];
    while (stack.length > 0) {
      const path = stack.pop()!;
      for (const next of graph.get(path.at(-1)!) ?? []) {
        if (next === start) loops.add([...path].sort().join(" -> "));
        else if (!path.includes(next)) stack.push([...path, next]);
      }
    }
  }
  return [...loops].sort();
}

describe("control-plane/src folders", () => {
  it("import each other in one direction only: no loops", () => {
    expect(folderLoops(folderGraph())).toEqual([]);
  });

  it("finds a loop when there is one (the check itself can fail)", () => {
    const graph = new Map([
      ["grants", new Set(["tools"])],
      ["tools", new Set(["needs"])],
      ["needs", new Set(["grants"])],
    ]);
    expect(folderLoops(graph)).toEqual(["grants -> needs -> tools"]);
  });

  it("run Kysely only in repos, db/ and migrations", () => {
    const offenders = sourceFiles(SRC)
      .filter((file) => !file.endsWith(".repo.ts") && folderOf(file) !== "db")
      .filter((file) =>
        /\.(selectFrom|insertInto|updateTable|deleteFrom)\(|\.transaction\(\)|\bsql`/.test(
          readFileSync(file, "utf8"),
        ),
      )
      .map((file) => relative(SRC, file));
    expect(offenders).toEqual([]);
  });
});
