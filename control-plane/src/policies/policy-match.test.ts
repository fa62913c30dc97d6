import { describe, expect, it } from "vitest";
import { compilePolicy, decide, limitingDecisions, type PolicyCall } from "./policy-match.ts";
import { MAX_LIST_FLOATING_SEGMENTS, MAX_LIST_GLOB_SEGMENTS } from "./policy-patterns.ts";
import { MAX_RULES, type PolicyRule, parsePolicyRules } from "./policy-rules.ts";

const call: PolicyCall = {
  agentId: "cli_abc123",
  agentName: "Claude Code",
  item: "GITHUB_TOKEN",
  host: "api.github.com",
  method: "GET",
  path: "/repos/latch/app/issues?state=open",
  environment: "production",
};

/** The effect of a one-rule list on `target`, or "none" when the rule does not match. */
function effectOf(rule: Record<string, unknown>, target: Partial<PolicyCall> = {}): string {
  const rules = parsePolicyRules([{ id: "r", ...rule }]);
  return decide(compilePolicy(rules), { ...call, ...target })?.effect ?? "none";
}

describe("first match decides", () => {
  const allowReads = { id: "reads", effect: "allow", match: { methods: ["GET"] } };
  const denyGithub = { id: "no-github", effect: "deny", match: { hosts: ["api.github.com"] } };
  it.each([
    ["allow before deny", [allowReads, denyGithub], "reads"],
    ["deny before allow", [denyGithub, allowReads], "no-github"],
  ])("%s", (_label, rules, expected) => {
    expect(decide(compilePolicy(parsePolicyRules(rules)), call)?.rule.id).toBe(expected);
  });

  it("no rule matching leaves the call to today's approvals", () => {
    expect(decide(compilePolicy(parsePolicyRules([denyGithub])), { ...call, host: "api.stripe.com" })).toBe(
      undefined,
    );
    expect(decide(compilePolicy([]), call)).toBe(undefined);
  });

  it("a disabled rule is skipped, and the next one decides", () => {
    const rules = parsePolicyRules([{ ...denyGithub, enabled: false }, allowReads]);
    const decision = decide(compilePolicy(rules), call);
    expect(decision?.rule.id).toBe("reads");
    expect(decision?.index).toBe(1);
  });

  it("a rule without conditions matches every call", () => {
    expect(effectOf({ effect: "ask" })).toBe("ask");
  });
});

describe("each condition", () => {
  it.each<[string, Record<string, unknown>, Partial<PolicyCall>, string]>([
    // hosts: exact, or *.suffix (never the suffix itself, never a lookalike)
    ["an exact host", { hosts: ["api.github.com"] }, {}, "deny"],
    ["an exact host in another case", { hosts: ["API.GitHub.com."] }, {}, "deny"],
    ["a call host in another case", { hosts: ["api.github.com"] }, { host: "API.GITHUB.COM" }, "deny"],
    ["another host", { hosts: ["api.github.com"] }, { host: "uploads.github.com" }, "none"],
    ["a suffix", { hosts: ["*.github.com"] }, { host: "uploads.github.com" }, "deny"],
    ["a suffix, deeper", { hosts: ["*.github.com"] }, { host: "a.b.github.com" }, "deny"],
    ["a suffix does not match itself", { hosts: ["*.github.com"] }, { host: "github.com" }, "none"],
    ["a suffix is a label boundary", { hosts: ["*.github.com"] }, { host: "evilgithub.com" }, "none"],
    ["a suffix is not a prefix", { hosts: ["*.github.com"] }, { host: "github.com.evil.io" }, "none"],
    // methods
    ["a method", { methods: ["GET"] }, {}, "deny"],
    ["a method written in lowercase", { methods: ["get"] }, {}, "deny"],
    ["another method", { methods: ["DELETE"] }, {}, "none"],
    // items and environments, exactly
    ["an item", { items: ["GITHUB_TOKEN"] }, {}, "deny"],
    ["another item", { items: ["STRIPE_KEY"] }, {}, "none"],
    ["an environment", { environments: ["production"] }, {}, "deny"],
    ["another environment", { environments: ["staging"] }, {}, "none"],
    // agents: by id, or by name without regard to case or compatibility forms
    ["an agent by id", { agents: ["cli_abc123"] }, {}, "deny"],
    ["an agent id is exact", { agents: ["CLI_ABC123"] }, { agentName: "other" }, "none"],
    ["an agent by name", { agents: ["Claude Code"] }, {}, "deny"],
    ["an agent by name in another case", { agents: ["claude code"] }, {}, "deny"],
    [
      "an agent renamed in fullwidth letters",
      { agents: ["claude code"] },
      { agentName: "Ｃｌａｕｄｅ Code" },
      "deny",
    ],
    ["another agent", { agents: ["Cursor"] }, {}, "none"],
    [
      "a client id names that client alone, not a client that registered it as its name",
      { agents: ["cli_0123456789abcdef"] },
      { agentId: "cli_zzzzzzzzzzzzzzzz", agentName: "CLI_0123456789ABCDEF" },
      "none",
    ],
    [
      "a client by its id",
      { agents: ["cli_0123456789abcdef"] },
      { agentId: "cli_0123456789abcdef", agentName: "Claude Code" },
      "deny",
    ],
    // A client id is stored as made (lowercase, no spaces), so that one written otherwise still
    // names its client rather than being saved and never matching.
    [
      "a client id written in capitals",
      { agents: ["CLI_0123456789ABCDEF"] },
      { agentId: "cli_0123456789abcdef", agentName: "Claude Code" },
      "deny",
    ],
    [
      "a client id with spaces around it",
      { agents: [" cli_0123456789abcdef "] },
      { agentId: "cli_0123456789abcdef", agentName: "Claude Code" },
      "deny",
    ],
    [
      "a local agent by its id (its client name)",
      { agents: ["claude-code"] },
      { agentId: "claude-code", agentName: undefined },
      "deny",
    ],
    // all conditions together
    [
      "every field matching",
      { hosts: ["*.github.com"], methods: ["GET"], paths: ["/repos/**"], items: ["GITHUB_TOKEN"] },
      {},
      "deny",
    ],
    [
      "one field not matching",
      { hosts: ["*.github.com"], methods: ["POST"], paths: ["/repos/**"] },
      {},
      "none",
    ],
  ])("%s", (_label, match, target, expected) => {
    expect(effectOf({ effect: "deny", match }, target)).toBe(expected);
  });
});

describe("path globs", () => {
  it.each<[string, string, string, boolean]>([
    ["** matches every path", "/**", "/anything/at/all", true],
    ["** matches the root", "/**", "/", true],
    ["/ matches the root only", "/", "/", true],
    ["/ does not match a path", "/", "/v1", false],
    ["an exact path", "/user", "/user", true],
    ["an exact path, query ignored", "/user", "/user?token=x", true],
    ["an exact path is not a prefix", "/user", "/user/repos", false],
    ["* is one segment", "/repos/*/issues", "/repos/latch/issues", true],
    ["* is not two segments", "/repos/*/issues", "/repos/latch/app/issues", false],
    ["* is not zero segments", "/repos/*/issues", "/repos/issues", false],
    ["** is zero segments", "/repos/**/issues", "/repos/issues", true],
    ["** is several segments", "/repos/**/issues", "/repos/a/b/c/issues", true],
    ["** in the middle backtracks", "/a/**/b/c", "/a/b/x/b/c", true],
    ["** at the end takes the rest", "/repos/**", "/repos/latch/app/pulls/1", true],
    ["** at the end takes nothing", "/repos/**", "/repos", true],
    ["a percent-encoded letter is the letter", "/admin/**", "/%61dmin/users", true],
    ["an encoded glob literal is its letter", "/caf%C3%A9", "/café".replace("é", "%c3%a9"), true],
  ])("%s: %s against %s", (_label, glob, path, expected) => {
    expect(effectOf({ effect: "allow", match: { paths: [glob] } }, { path })).toBe(
      expected ? "allow" : "none",
    );
  });

  // A deny or ask rule reads the path the way a lenient origin might: case, compatibility forms
  // and empty segments cannot step around it. An allow rule reads it exactly.
  it.each<[string, string, string, boolean, boolean]>([
    ["upper case", "/admin/**", "/ADMIN/users", true, false],
    ["an encoded upper-case letter", "/admin/**", "/%41dmin/users", true, false],
    ["a doubled slash", "/admin/users", "/admin//users", true, false],
    ["a trailing slash", "/admin/users", "/admin/users/", true, false],
    ["a fullwidth letter (NFKC)", "/admin", "/%EF%BD%81dmin", true, false],
    ["the exact spelling", "/admin/users", "/admin/users", true, true],
  ])("%s", (_label, glob, path, isDenied, isAllowed) => {
    expect(effectOf({ effect: "deny", match: { paths: [glob] } }, { path })).toBe(isDenied ? "deny" : "none");
    expect(effectOf({ effect: "ask", match: { paths: [glob] } }, { path })).toBe(isDenied ? "ask" : "none");
    expect(effectOf({ effect: "allow", match: { paths: [glob] } }, { path })).toBe(
      isAllowed ? "allow" : "none",
    );
  });

  it("an empty segment is never taken by *, only by **", () => {
    expect(effectOf({ effect: "allow", match: { paths: ["/a/*/b"] } }, { path: "/a//b" })).toBe("none");
    expect(effectOf({ effect: "allow", match: { paths: ["/a/**/b"] } }, { path: "/a//b" })).toBe("allow");
  });

  it("a glob of many ** stays linear on a long path", () => {
    const glob = `/${Array.from({ length: 30 }, (_, i) => `**/s${i}`).join("/")}/never`;
    const path = `/${Array.from({ length: 2000 }, () => "s0").join("/")}`;
    expect(effectOf({ effect: "deny", match: { paths: [glob] } }, { path })).toBe("none");
  });
});

describe("a rule's list entries are alternatives", () => {
  it("any host, any method of the lists", () => {
    const match = { hosts: ["api.stripe.com", "*.github.com"], methods: ["POST", "GET"] };
    expect(effectOf({ effect: "ask", match })).toBe("ask");
  });
});

describe("the decision carries the rule", () => {
  it("its id, name and place", () => {
    const rules: PolicyRule[] = parsePolicyRules([
      { id: "first", effect: "deny", match: { hosts: ["api.stripe.com"] } },
      { id: "reads", name: "GitHub reads", effect: "allow", match: { methods: ["GET"] } },
    ]);
    expect(decide(compilePolicy(rules), call)).toMatchObject({
      effect: "allow",
      index: 1,
      rule: { id: "reads", name: "GitHub reads" },
    });
  });
});

// Finding of a review: spellings an origin reads as the same path must not step around a deny or
// ask rule (Tomcat, Spring and Jetty drop `;params`; Windows and IIS drop trailing dots and spaces;
// an origin that decodes twice reads `%2561` as `a`), while an allow rule stays exact.
describe("the loose reading of deny and ask rules", () => {
  const list = (effect: string) =>
    compilePolicy(
      parsePolicyRules([
        { id: "admin", effect, match: { hosts: ["api.example.com"], paths: ["/admin/**"] } },
        { id: "rest", effect: "allow", match: { hosts: ["api.example.com"] } },
      ]),
    );
  const at = (path: string) => ({ ...call, host: "api.example.com", path });

  it.each([
    "/admin/users",
    "/ADMIN/users",
    "/%61dmin/users",
    "/admin;x/users",
    "/admin;/users",
    "/admin./users",
    "/admin%20/users",
    "/admin.%20./users",
    "/admin%C2%A0/users",
    "/%2561dmin/users",
    "/%252561dmin/users",
    "/admin/users;jsessionid=1",
  ])("%s is the admin path to a deny and an ask rule", (path) => {
    expect(decide(list("deny"), at(path))?.rule.id).toBe("admin");
    expect(decide(list("ask"), at(path))?.rule.id).toBe("admin");
  });

  it.each(["/admin;x/users", "/admin./users", "/admin%20/users", "/%2561dmin/users"])(
    "%s is not the admin path to an allow rule (never widened)",
    (path) => {
      expect(effectOf({ effect: "allow", match: { paths: ["/admin/**"] } }, { path })).toBe("none");
      expect(effectOf({ effect: "allow", match: { paths: ["/admin/**"] } }, { path: "/admin/users" })).toBe(
        "allow",
      );
    },
  );

  it.each([
    ["a segment that reads as a dot segment once its trailing space is dropped", "/public/..%20/x"],
    ["a dot segment encoded three times", "/public/%25252e%25252e/x"],
    ["a slash encoded three times", "/public%25252fx"],
    ["an escape that keeps decoding", `/${"%25".repeat(6)}61dmin`],
    ["an encoded control character, encoded three times", "/x%25252500"],
  ])("a path that is not one path read loosely matches every deny glob: %s", (_label, path) => {
    expect(decide(list("deny"), at(path))?.rule.id).toBe("admin");
    // An allow rule reads it exactly, and the path holds no admin segment.
    expect(effectOf({ effect: "allow", match: { paths: ["/admin/**"] } }, { path })).toBe("none");
  });

  it("an unrelated path is still not the admin path", () => {
    for (const path of ["/administrators", "/admins;x", "/v1/admin", "/adm%69n%2561"])
      expect(decide(list("deny"), at(path))?.rule.id, path).toBe("rest");
  });

  it("a glob is read the same way: its ;params, trailing dots and deeper escapes", () => {
    for (const glob of ["/admin;v=1/**", "/admin./**", "/%2561dmin/**"])
      expect(effectOf({ effect: "deny", match: { paths: [glob] } }, { path: "/admin/users" }), glob).toBe(
        "deny",
      );
  });
});

// Finding of a review: a list of 79 rules × 100 copies of `/**/a/…(62 × a)/b` held the event loop
// for 11 s on one 8 KiB path. Now such a list is refused, and what a list may hold is bounded work.
describe("the matcher's work is bounded", () => {
  const run = (length: number) => Array.from({ length }, () => "a").join("/");
  const longPath = `/${run(4000)}`;
  const at = (path: string) => ({ ...call, host: "api.example.com", path });

  it("the reviewer's list is refused, naming the limit", () => {
    const hostile = Array.from({ length: 79 }, (_, i) => ({
      id: `r${i}`,
      effect: "deny",
      match: { paths: Array.from({ length: 100 }, () => `/**/${run(62)}/b`) },
    }));
    expect(() => parsePolicyRules(hostile)).toThrow(
      `a policy's path globs hold at most ${MAX_LIST_GLOB_SEGMENTS} segments in all`,
    );
  });

  it("runs between two ** are capped in all, naming the limit", () => {
    const rules = [
      {
        id: "f",
        effect: "deny",
        match: { paths: [`/**/${run(62)}/**`, `/**/${run(62)}/**`, `/**/${run(5)}/**`] },
      },
    ];
    expect(() => parsePolicyRules(rules)).toThrow(/at most 128 segments between two \*\* in all/);
  });

  it("the reviewer's globs, as many as a list may hold, cost their own length, not the path's", () => {
    const copies = Math.floor(MAX_LIST_GLOB_SEGMENTS / 64);
    const rules = parsePolicyRules([
      {
        id: "suffixes",
        effect: "deny",
        match: { hosts: ["api.example.com"], paths: Array.from({ length: 100 }, () => `/**/${run(62)}/b`) },
      },
      ...Array.from({ length: Math.ceil(copies / 100) - 1 }, (_, i) => ({
        id: `more-${i}`,
        effect: "deny",
        match: { hosts: ["api.example.com"], paths: Array.from({ length: 50 }, () => `/**/${run(62)}/b`) },
      })),
      { id: "rest", effect: "allow" },
    ]);
    const meter = { steps: 0 };
    expect(decide(compilePolicy(rules), at(longPath), meter)?.rule.id).toBe("rest");
    // One step per glob segment compared and per rule judged: never a step per path segment.
    expect(meter.steps).toBeLessThanOrEqual(MAX_LIST_GLOB_SEGMENTS + MAX_RULES);
    // And the same glob still matches where it should.
    expect(decide(compilePolicy(rules), at(`${longPath}/b`))?.rule.id).toBe("suffixes");
  });

  it("the costliest list a save accepts stays within (path segments × 128) + its segments", () => {
    const rules = parsePolicyRules([
      // Runs between two ** that nearly match everywhere, on a path of a's: searched for at each place.
      {
        id: "floating",
        effect: "deny",
        match: {
          hosts: ["api.example.com"],
          paths: [`/**/${run(61)}/b/**`, `/**/${run(61)}/b/**`, `/**/${run(1)}/b/**`],
        },
      },
      // Empty segments read strictly (allow rules): a path of 8 192 slashes is 8 192 segments.
      {
        id: "empty",
        effect: "allow",
        match: { hosts: ["api.example.com"], paths: ["/**//b/**"] },
      },
      ...Array.from({ length: 150 }, (_, i) => ({
        id: `s${i}`,
        effect: "deny",
        match: { hosts: ["api.example.com"], paths: [`/**/${run(62)}/b`] },
      })),
      { id: "rest", effect: "ask" },
    ]);
    const policy = compilePolicy(rules);
    for (const path of [longPath, "/".repeat(8192)]) {
      const meter = { steps: 0 };
      expect(decide(policy, at(path), meter)?.rule.id).toBe("rest");
      const segments = path.split("/").length;
      expect(meter.steps).toBeLessThanOrEqual(
        segments * MAX_LIST_FLOATING_SEGMENTS + MAX_LIST_GLOB_SEGMENTS + MAX_RULES,
      );
    }
  });

  it("leftmost placement of runs between ** still finds every match", () => {
    const cases: [string, string, boolean][] = [
      ["/**/a/b/**/b/c", "/a/b/b/c", true],
      ["/**/a/b/**/b/c", "/a/b/c", false],
      ["/x/**/a/*/**/a/**", "/x/a/q/a", true],
      ["/x/**/a/*/**/a/**", "/x/a/q", false],
      ["/**/a/**/a/**/a", "/a/a/a", true],
      ["/**/a/**/a/**/a", "/a/a", false],
      ["/a/**/a", "/a", false],
    ];
    for (const [glob, path, expected] of cases)
      expect(effectOf({ effect: "allow", match: { paths: [glob] } }, { path }), `${glob} ${path}`).toBe(
        expected ? "allow" : "none",
      );
  });
});

describe("a respelling of a rate-limited allow rule's path", () => {
  const search = {
    id: "search",
    effect: "allow",
    match: { paths: ["/v1/search"] },
    rate_limit: { calls: 10, per: "hour" },
  };
  const rest = { id: "rest", effect: "allow", match: { hosts: ["api.github.com"] } };
  const deny = { id: "no-admin", effect: "deny", match: { paths: ["/admin/**"] } };
  /** The deciding rule, its effect, and the rules whose limits count the call. */
  function judge(rules: unknown[], path: string) {
    const decision = decide(compilePolicy(parsePolicyRules(rules)), { ...call, path });
    return {
      rule: decision?.rule.id,
      effect: decision?.effect,
      limited: limitingDecisions([{ decision, isLocated: true }]).map((d) => d.rule.id),
    };
  }

  it.each(["/v1/search/", "/V1/Search", "/v1//search", "/v1/search;x", "/v1/search.", "/v1/%53earch"])(
    "%s falls to the broader allow rule below, and still counts against the limit",
    (path) => {
      expect(judge([search, rest], path)).toEqual({ rule: "rest", effect: "allow", limited: ["search"] });
    },
  );

  it("that no rule below decides goes to the approvals as an ask of the limited rule, counted", () => {
    expect(judge([search], "/v1/search/")).toEqual({ rule: "search", effect: "ask", limited: ["search"] });
  });

  it("the exact spelling is the rule's, as before; a rule above it still decides alone", () => {
    expect(judge([search, rest], "/v1/search")).toEqual({
      rule: "search",
      effect: "allow",
      limited: ["search"],
    });
    expect(judge([rest, search], "/v1/search/")).toEqual({ rule: "rest", effect: "allow", limited: [] });
    expect(judge([search, rest], "/v1/other")).toEqual({ rule: "rest", effect: "allow", limited: [] });
  });

  it("a deny rule below still refuses it", () => {
    expect(judge([search, { ...deny, match: {} }], "/v1/search/")).toMatchObject({
      rule: "no-admin",
      effect: "deny",
    });
  });
});
