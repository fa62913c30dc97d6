// A policy file as `vault policy set|preview FILE` reads it: the two shapes it takes, and every
// file it refuses with a sentence (never a stack trace, never the whole of a huge file in memory).
import { mkdirSync, mkdtempSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AppError } from "@latch/shared/errors";
import { describe, expect, it } from "vitest";
import { readPolicyFile } from "./policy.command.ts";

const dir = mkdtempSync(join(tmpdir(), "latch-policy-file-"));
function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

function refusalOf(path: string): AppError {
  try {
    readPolicyFile(path);
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    return error as AppError;
  }
  throw new Error("not refused");
}

describe("a policy file", () => {
  it("is a bare list (replacing whatever is saved) or {version, rules}", () => {
    expect(readPolicyFile(file("list.json", '[{"effect":"ask"}]'))).toEqual({
      rules: [{ effect: "ask" }],
      expected: "any",
    });
    expect(readPolicyFile(file("got.json", '{"version":3,"rules":[]}'))).toEqual({ rules: [], expected: 3 });
    expect(readPolicyFile(file("no-version.json", '{"rules":[]}'))).toEqual({ rules: [], expected: "any" });
  });

  it.each([
    ["not JSON", "{rules:", /is not JSON/],
    ["a version that is not a number", '{"version":"3","rules":[]}', /version is the number/],
    ["a negative version", '{"version":-1,"rules":[]}', /version is the number/],
    ["a fractional version", '{"version":1.5,"rules":[]}', /version is the number/],
    ["neither shape", '{"policies":[]}', /write \{"rules"/],
    ["null", "null", /write \{"rules"/],
  ])("%s is refused", (_label, text, message) => {
    const refusal = refusalOf(file(`${_label.replaceAll(" ", "-")}.json`, text));
    expect(refusal.code).toBe("invalid_policy");
    expect(refusal.message).toMatch(message);
  });

  it("over 1 MiB is refused without reading it all", () => {
    const path = file("huge.json", "");
    truncateSync(path, 4 * 1024 * 1024 * 1024);
    expect(refusalOf(path).message).toMatch(/over 1048576 bytes/);
  });

  it("an endless device is refused", () => {
    expect(refusalOf("/dev/zero").message).toMatch(/over 1048576 bytes/);
  });

  it("a missing file or a folder says it cannot be read", () => {
    expect(refusalOf(join(dir, "missing.json"))).toMatchObject({
      code: "invalid_request",
      message: expect.stringMatching(/cannot read .*ENOENT/),
    });
    const folder = join(dir, "folder");
    mkdirSync(folder);
    expect(refusalOf(folder).message).toMatch(/cannot read .*EISDIR/);
  });
});
