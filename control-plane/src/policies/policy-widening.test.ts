// isWiderPolicy, table-tested: the edits that can only narrow what is allowed, and the ones that
// may widen it (and so need a second member under the two-person rule).
import { describe, expect, it } from "vitest";
import { compilePolicy, decide, strictestDecision } from "./policy-match.ts";
import { type PolicyRule, parsePolicyRules } from "./policy-rules.ts";
import { isWiderPolicy } from "./policy-widening.ts";

const rules = (raw: unknown[]): PolicyRule[] => parsePolicyRules(raw);

const allowGet = { id: "reads", name: "Reads", effect: "allow", match: { methods: ["GET"] } };
const allowApi = { id: "api", effect: "allow", match: { hosts: ["api.example.com"] } };
const denyAdmin = { id: "no-admin", effect: "deny", match: { paths: ["/admin/**"] } };
const askPost = { id: "ask-post", effect: "ask", match: { methods: ["POST"] } };
const SAVED = [denyAdmin, allowGet, askPost, allowApi];
const allowSpotify = { id: "spotify", effect: "allow", match: { items: ["SPOTIFY"] } };
const askAccount = { id: "account", effect: "ask", match: { items: ["SPOTIFY_REFRESH"] } };

describe("isWiderPolicy", () => {
  it.each<[string, unknown[], unknown[]]>([
    ["the same list", SAVED, SAVED],
    ["nothing to nothing", [], []],
    ["a deny rule inserted first", SAVED, [{ id: "x", effect: "deny" }, ...SAVED]],
    [
      "an ask rule inserted between allow rules",
      SAVED,
      [denyAdmin, allowGet, { id: "y", effect: "ask" }, askPost, allowApi],
    ],
    ["an allow rule removed", SAVED, [denyAdmin, askPost, allowApi]],
    ["every allow rule removed", SAVED, [denyAdmin, askPost]],
    ["an allow rule disabled", SAVED, [denyAdmin, { ...allowGet, enabled: false }, askPost, allowApi]],
    ["a name changed", SAVED, [denyAdmin, { ...allowGet, name: "Other name" }, askPost, allowApi]],
    [
      "an id changed on an unlimited rule",
      SAVED,
      [denyAdmin, { ...allowGet, id: "renamed" }, askPost, allowApi],
    ],
    [
      "a rule below every allow rule changed",
      [...SAVED, { id: "tail", effect: "ask" }],
      [...SAVED, { id: "tail", effect: "deny", match: { methods: ["GET"] } }],
    ],
    [
      "a disabled allow rule edited while disabled",
      [...SAVED, { id: "off", effect: "allow", enabled: false }],
      [...SAVED, { id: "off", effect: "allow", enabled: false, match: { hosts: ["a.example"] } }],
    ],
    [
      "an ask rule below every deny rule inserted",
      [denyAdmin, allowGet],
      [denyAdmin, { id: "ask-all", effect: "ask" }, allowGet],
    ],
    ["an ask rule below every allow rule removed", [...SAVED, { id: "tail", effect: "ask" }], SAVED],
    [
      // Each path is a view of the located credential, and an allow holds only on every one of them.
      "an ask rule on a path removed below an allow rule on another path",
      [
        { id: "tracks", effect: "allow", match: { paths: ["/v1/me/tracks"] } },
        { id: "ask-items", effect: "ask", match: { paths: ["/v1/me/library"] } },
      ],
      [{ id: "tracks", effect: "allow", match: { paths: ["/v1/me/tracks"] } }],
    ],
    [
      "an allow rule removed and a deny rule inserted where it was",
      SAVED,
      [denyAdmin, { id: "z", effect: "deny" }, askPost, allowApi],
    ],
    [
      "methods written in lower case (parsed alike)",
      SAVED,
      [denyAdmin, { ...allowGet, match: { methods: ["get"] } }, askPost, allowApi],
    ],
  ])("%s is not wider", (_, saved, next) => {
    expect(isWiderPolicy(rules(saved), rules(next))).toBe(false);
  });

  it.each<[string, unknown[], unknown[]]>([
    ["an allow rule added to nothing", [], [{ effect: "allow" }]],
    ["an allow rule added at the end", SAVED, [...SAVED, { id: "all", effect: "allow" }]],
    ["an allow rule moved above a deny rule", [denyAdmin, allowGet], [allowGet, denyAdmin]],
    ["a deny rule above an allow rule removed", SAVED, [allowGet, askPost, allowApi]],
    ["an ask rule above an allow rule removed", SAVED, [denyAdmin, allowGet, allowApi]],
    [
      "a deny rule above an allow rule disabled",
      SAVED,
      [{ ...denyAdmin, enabled: false }, allowGet, askPost, allowApi],
    ],
    [
      "a deny rule above an allow rule made an ask rule",
      SAVED,
      [{ ...denyAdmin, effect: "ask" }, allowGet, askPost, allowApi],
    ],
    [
      "a deny rule's match narrowed",
      SAVED,
      [{ ...denyAdmin, match: { paths: ["/admin/x"] } }, allowGet, askPost, allowApi],
    ],
    [
      "an allow rule's match widened",
      SAVED,
      [denyAdmin, { ...allowGet, match: { methods: ["GET", "POST"] } }, askPost, allowApi],
    ],
    ["an allow rule's match dropped", SAVED, [denyAdmin, { ...allowGet, match: {} }, askPost, allowApi]],
    [
      "a disabled allow rule enabled",
      [{ id: "off", effect: "allow", enabled: false }],
      [{ id: "off", effect: "allow" }],
    ],
    ["a deny rule made an allow rule", [denyAdmin], [{ ...denyAdmin, effect: "allow" }]],
    ["an ask rule made an allow rule", [askPost], [{ ...askPost, effect: "allow" }]],
    [
      "two allow rules swapped around an ask rule",
      [allowGet, askPost, allowApi],
      [allowApi, askPost, allowGet],
    ],
    [
      "a rate limit loosened",
      [{ id: "rl", effect: "allow", rate_limit: { calls: 5, per: "hour" } }],
      [{ id: "rl", effect: "allow", rate_limit: { calls: 500, per: "hour" } }],
    ],
    [
      "a rate limit dropped",
      [{ id: "rl", effect: "allow", rate_limit: { calls: 5, per: "hour" } }],
      [{ id: "rl", effect: "allow" }],
    ],
    [
      "a rate-limited allow rule given a new id (its count starts again)",
      [{ id: "rl", effect: "allow", rate_limit: { calls: 5, per: "hour" } }],
      [{ id: "rl-2", effect: "allow", rate_limit: { calls: 5, per: "hour" } }],
    ],
    [
      "a rate-limited allow rule removed above a wider allow rule",
      [
        { id: "rl", effect: "allow", match: { methods: ["GET"] }, rate_limit: { calls: 5, per: "hour" } },
        allowApi,
      ],
      [allowApi],
    ],
    ["a deny rule below every allow rule removed", [...SAVED, { id: "tail", effect: "deny" }], SAVED],
    ["a deny rule removed from a list with no allow rule", [denyAdmin, askPost], [askPost]],
    [
      "an ask rule inserted above a deny rule (the denied calls go to the approvals)",
      [denyAdmin, allowGet],
      [{ id: "x", effect: "ask", match: { paths: ["/admin/**"] } }, denyAdmin, allowGet],
    ],
    ["an ask rule matching everything inserted first", SAVED, [{ id: "x", effect: "ask" }, ...SAVED]],
    [
      "an ask rule inserted above a rate-limited rule",
      [{ id: "rl", effect: "ask", rate_limit: { calls: 5, per: "hour" } }],
      [
        { id: "x", effect: "ask" },
        { id: "rl", effect: "ask", rate_limit: { calls: 5, per: "hour" } },
      ],
    ],
    [
      "the last rate-limited allow rule removed (its refusals over the limit go to the approvals)",
      [{ id: "rl", effect: "allow", rate_limit: { calls: 5, per: "hour" } }],
      [],
    ],
    [
      "an ask rule above an allow rule disabled",
      SAVED,
      [denyAdmin, allowGet, { ...askPost, enabled: false }, allowApi],
    ],
    [
      "an ask rule on a sibling credential removed below an allow rule on the credential",
      [allowSpotify, askAccount],
      [allowSpotify],
    ],
    [
      "an ask rule on a sibling credential's path removed below an allow rule on the credential",
      [{ id: "spotify-me", effect: "allow", match: { items: ["SPOTIFY"], paths: ["/v1/me"] } }, askAccount],
      [{ id: "spotify-me", effect: "allow", match: { items: ["SPOTIFY"], paths: ["/v1/me"] } }],
    ],
  ])("%s is wider", (_, saved, next) => {
    expect(isWiderPolicy(rules(saved), rules(next))).toBe(true);
  });

  it("counts as wider a removal that lets a call judged in several views go with no approval", () => {
    // As tools/http-request.tool.ts judges a call naming SPOTIFY whose plan also uses the user's
    // account: one view per credential, the strictest answer holding.
    const decisionOf = (list: PolicyRule[]) => {
      const policy = compilePolicy(list);
      const call = {
        agentId: "cli_agent",
        host: "api.spotify.com",
        method: "GET",
        path: "/v1/me",
        environment: "production",
      };
      return strictestDecision(
        ["SPOTIFY", "SPOTIFY_REFRESH"].map((item) => ({
          decision: decide(policy, { ...call, item }),
          isLocated: item === "SPOTIFY",
        })),
      )?.effect;
    };
    const saved = rules([allowSpotify, askAccount]);
    const next = rules([allowSpotify]);
    expect(decisionOf(saved)).toBe("ask");
    expect(decisionOf(next)).toBe("allow");
    expect(isWiderPolicy(saved, next)).toBe(true);
  });

  it("answers for 500 rules against 500 at once", () => {
    const many = Array.from({ length: 500 }, (_, i) => ({
      id: `r${i}`,
      effect: i % 2 ? "allow" : "deny",
      match: { paths: [`/p${i}`] },
    }));
    const started = performance.now();
    expect(
      isWiderPolicy(rules(many), rules(many.filter((r) => r.effect === "deny" || r.id !== "r499"))),
    ).toBe(false);
    expect(isWiderPolicy(rules(many), rules([...many.slice(1), many[0]!]))).toBe(true);
    expect(performance.now() - started).toBeLessThan(1_000);
  });
});
