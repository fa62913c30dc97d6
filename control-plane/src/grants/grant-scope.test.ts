import { describe, expect, it } from "vitest";
import { isCovering } from "./grant-coverage.ts";

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

describe("an approval bound to the call it was asked for (DECISIONS Approvals)", () => {
  const asked = {
    scope_host: null,
    scope_method: null,
    scope_path: null,
    call_method: "POST",
    call_host: "api.example.com",
    call_path: "/v1/repos/latch/issues?draft=1",
    call_body_sha256: "ab".repeat(32),
  };
  const exact = {
    host: "api.example.com",
    method: "POST",
    path: "/v1/repos/latch/issues?draft=1",
    bodySha256: "ab".repeat(32),
  };
  it.each([
    ["prompt: the exact call", "prompt", exact, true],
    ["prompt: another body", "prompt", { ...exact, bodySha256: "cd".repeat(32) }, false],
    ["prompt: no body", "prompt", { ...exact, bodySha256: null }, false],
    ["prompt: another query", "prompt", { ...exact, path: "/v1/repos/latch/issues?draft=0" }, false],
    ["prompt: no query", "prompt", { ...exact, path: "/v1/repos/latch/issues" }, false],
    ["prompt: another method", "prompt", { ...exact, method: "DELETE" }, false],
    ["prompt: another host", "prompt", { ...exact, host: "uploads.example.com" }, false],
    ["prompt: an unknown call", "prompt", undefined, false],
    [
      "session: same prefix, any query and body",
      "session",
      { ...exact, path: "/v1/repos/latch/labels", bodySha256: null },
      true,
    ],
    ["session: the prefix itself", "session", { ...exact, path: "/v1/repos/latch/" }, true],
    ["session: above the prefix", "session", { ...exact, path: "/v1/repos/latch" }, false],
    [
      "session: a sibling that shares letters",
      "session",
      { ...exact, path: "/v1/repos/latchx/issues" },
      false,
    ],
    ["session: another method", "session", { ...exact, method: "GET" }, false],
    [
      "item_standing: the operator's scope only",
      "item_standing",
      { ...exact, method: "DELETE", path: "/x" },
      true,
    ],
  ] as const)("%s", (_label, policy, target, expected) => {
    expect(isCovering({ ...asked, policy }, target)).toBe(expected);
  });

  it("a grant asked without a call covers any call, as before", () => {
    expect(
      isCovering({ ...asked, call_method: null, call_host: null, call_path: null, policy: "prompt" }, exact),
    ).toBe(true);
  });
});

describe("an approval asked outside a standing scope (its request carries the exact path as scope)", () => {
  const outside = {
    scope_host: "api.example.com",
    scope_method: "GET",
    scope_path: "/v1/users/me",
    call_method: "GET",
    call_host: "api.example.com",
    call_path: "/v1/users/me",
    call_body_sha256: null,
  };
  it("an 8-hour approval covers the host and method under the path's prefix, as the inbox says", () => {
    const later = { host: "api.example.com", method: "GET", path: "/v1/users/other" };
    expect(isCovering({ ...outside, policy: "session" }, later)).toBe(true);
    expect(isCovering({ ...outside, policy: "session" }, { ...later, path: "/v1/repos/x" })).toBe(false);
    expect(isCovering({ ...outside, policy: "session" }, { ...later, method: "DELETE" })).toBe(false);
  });
  it("a one-call approval covers that call alone", () => {
    const exact = { host: "api.example.com", method: "GET", path: "/v1/users/me" };
    expect(isCovering({ ...outside, policy: "prompt" }, exact)).toBe(true);
    expect(isCovering({ ...outside, policy: "prompt" }, { ...exact, path: "/v1/users/other" })).toBe(false);
  });
  it("a standing approval keeps the scope it was given", () => {
    const other = { host: "api.example.com", method: "GET", path: "/v1/users/other" };
    expect(isCovering({ ...outside, policy: "item_standing" }, other)).toBe(false);
  });
});
