// The hidden prompt of `vault set`: one line is the value; a paste of several lines is refused
// whole (and read to its end, so no line of it reaches the shell); Ctrl-D is a cancel.
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { promptHidden } from "./read-secret.ts";

function terminal() {
  const input = new PassThrough();
  const errors = new PassThrough();
  let written = "";
  errors.on("data", (chunk: Buffer) => {
    written += chunk.toString();
  });
  return { input, errors, written: () => written };
}

describe("the hidden prompt", () => {
  it("answers the one line typed, and echoes none of it", async () => {
    const t = terminal();
    const value = promptHidden("Value: ", t.input, t.errors);
    t.input.write("sk_live_typed\n");
    await expect(value).resolves.toBe("sk_live_typed");
    expect(t.written()).toBe("Value: \n");
  });

  it("refuses a paste of several lines whole, reading every line of it", async () => {
    const t = terminal();
    const value = promptHidden("Value: ", t.input, t.errors);
    t.input.write("firstLINEofKEY\nsecondLINEofKEY\nrm -rf ~\n");
    await expect(value).rejects.toThrow(/line break, so nothing was stored/);
    expect(t.input.read()).toBeNull();
    expect(t.written()).not.toContain("LINE");
  });

  it("is cancelled by Ctrl-D before a line", async () => {
    const t = terminal();
    const value = promptHidden("Value: ", t.input, t.errors);
    t.input.end();
    await expect(value).rejects.toThrow("cancelled");
  });
});
