// The local agent id from an MCP client's name (spec 4.4): one name, one id, so that no client
// shares the approvals the operator gave another name.
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { agentIdFromClientName } from "./mcp-sessions.ts";

const sha12 = (text: string) => createHash("sha256").update(text, "utf8").digest("hex").slice(0, 12);

describe("agentIdFromClientName", () => {
  it("keeps a name that is already clean as its id, so existing approvals still match", () => {
    for (const name of ["my-agent", "Claude Code", "cursor-vscode", "a.b_c@d:e/f", "x".repeat(64)]) {
      expect(agentIdFromClientName(name)).toBe(name);
    }
  });

  it("calls a client with no name unnamed-agent", () => {
    expect(agentIdFromClientName(undefined)).toBe("unnamed-agent");
    expect(agentIdFromClientName("")).toBe("unnamed-agent");
  });

  it("gives names that used to clean to one id distinct ids", () => {
    const merged = [
      ["助手", ""],
      ["my-agent!", "my-agent"],
      ["my-agent", " my-agent "],
      [`${"a".repeat(64)}1`, `${"a".repeat(64)}2`],
      ["助手", "helper"],
      ["助手", "ヘルパー"],
    ] as const;
    for (const [one, other] of merged) {
      expect(agentIdFromClientName(one)).not.toBe(agentIdFromClientName(other));
    }
    expect(agentIdFromClientName("助手")).not.toBe("unnamed-agent");
  });

  it("folds a name into its clean part, ~ and 12 hex of the SHA-256 of its UTF-8", () => {
    expect(agentIdFromClientName("my-agent!")).toBe(`my-agent~${sha12("my-agent!")}`);
    expect(agentIdFromClientName("助手")).toBe(`agent~${sha12("助手")}`);
    expect(agentIdFromClientName(" my-agent ")).toBe(`my-agent~${sha12(" my-agent ")}`);
    expect(agentIdFromClientName("   ")).toBe(`agent~${sha12("   ")}`);
    const long = `${"a".repeat(64)}1`;
    expect(agentIdFromClientName(long)).toBe(`${"a".repeat(51)}~${sha12(long)}`);
  });

  it("answers the same id for the same name every time", () => {
    for (const name of ["my-agent!", "助手", "a\ud800b", "x".repeat(500)]) {
      expect(agentIdFromClientName(name)).toBe(agentIdFromClientName(name));
    }
  });

  it("never lets a plain name equal another name's folded id", () => {
    const folded = agentIdFromClientName("my-agent!");
    expect(folded).toContain("~");
    // A client that names itself with the folded id is folded again: `~` is not kept as is.
    expect(agentIdFromClientName(folded)).not.toBe(folded);
  });

  it("never throws on a lone surrogate or NUL, and keeps both out of the id", () => {
    const names = ["a\ud800b", "a\udfffb", "\ud800", "a\u0000b", "\u0000", "a\ud800\u0000b"];
    const ids = names.map((name) => agentIdFromClientName(name));
    for (const id of ids) {
      expect(id.isWellFormed()).toBe(true);
      expect(id).toMatch(/^[A-Za-z0-9 ._@:/-]+~[0-9a-f]{12}$/);
    }
    expect(new Set(ids).size).toBe(names.length);
    // Two different lone surrogates, and a lone surrogate against the U+FFFD Node would write for it.
    expect(agentIdFromClientName("a\ud800b")).not.toBe(agentIdFromClientName("a\ud801b"));
    expect(agentIdFromClientName("a\ud800b")).not.toBe(agentIdFromClientName("a\ufffdb"));
  });

  it("stays printable and at most 64 characters for any name", () => {
    const names = [
      "x".repeat(65),
      "x".repeat(10_000),
      `${"a".repeat(50)} ${"b".repeat(20)}`,
      "😀".repeat(100),
      "tab\there",
      "line\nbreak",
      "\u001b[31mred",
    ];
    for (const name of names) {
      const id = agentIdFromClientName(name);
      expect(id.length).toBeLessThanOrEqual(64);
      expect(id).toMatch(/^[A-Za-z0-9 ._@:/~-]+$/);
      expect(id).not.toMatch(/^\s|\s$|\s~/);
    }
  });
});
