import { describe, expect, it } from "vitest";
import { isCovering } from "./grants.service.ts";

const row = (host: string | null, method: string | null, path: string | null) => ({
  scope_host: host,
  scope_method: method,
  scope_path: path,
});
const call = { host: "api.example.com", method: "GET", path: "/v1/repos/latch/issues?page=2" };

describe("a standing grant's scope", () => {
  it.each([
    ["no scope covers every call", row(null, null, null), call, true],
    ["no scope covers even an unknown call", row(null, null, null), undefined, true],
    ["a scope never covers an unknown call", row("api.example.com", null, null), undefined, false],
    ["the same host", row("api.example.com", null, null), call, true],
    ["another host", row("uploads.example.com", null, null), call, false],
    ["the same method", row(null, "GET", null), call, true],
    ["another method", row(null, "DELETE", null), call, false],
    ["the exact path", row(null, null, "/v1/repos/latch/issues"), call, true],
    ["a parent path", row(null, null, "/v1/repos"), call, true],
    ["a parent path with its slash", row(null, null, "/v1/repos/"), call, true],
    ["a prefix that is not a segment", row(null, null, "/v1/rep"), call, false],
    ["a sibling path", row(null, null, "/v1/users"), call, false],
    ["all three matching", row("api.example.com", "GET", "/v1"), call, true],
    ["two of three matching", row("api.example.com", "POST", "/v1"), call, false],
  ])("%s", (_label, grant, target, expected) => {
    expect(isCovering(grant, target)).toBe(expected);
  });
});
