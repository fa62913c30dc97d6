import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readPrivateJson } from "./files.ts";

describe("readPrivateJson", () => {
  it("reads a JSON file", () => {
    const path = join(mkdtempSync(join(tmpdir(), "latch-json-")), "keys.json");
    writeFileSync(path, '{"keys":[]}');
    expect(readPrivateJson(path)).toEqual({ keys: [] });
  });

  it("refuses a broken key file naming the file, never quoting what it holds", () => {
    const path = join(mkdtempSync(join(tmpdir(), "latch-json-")), "keys.json");
    // A quote lost near the private key: JSON.parse's own message would quote the key around it.
    writeFileSync(path, '{"keys":[{"keyId":"sk_1","privateKey":ABCDEFGHIJKLMNOPQRSTUVWXYZ012345}]}');
    expect(() => JSON.parse('{"privateKey":ABCDEFGHIJKLMNOPQRSTUVWXYZ012345}')).toThrow(/ABCDEFGHIJ/);
    expect(() => readPrivateJson(path)).toThrow(`${path} is not valid JSON`);
    try {
      readPrivateJson(path);
    } catch (error) {
      expect(String((error as Error).message)).not.toMatch(/ABCDEFGH|privateKey/);
      expect((error as Error).cause).toBeUndefined();
    }
  });
});
