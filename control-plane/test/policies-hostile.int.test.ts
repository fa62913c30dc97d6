// Organisation policies under pressure (DECISIONS "Policies"): two operators saving at once, and
// lists written to break the parser or the database (NUL, unpaired surrogates, regular-expression
// syntax, repeated ids, oversized bodies). Every one is a 400 or a 409 naming what is wrong, never a
// 500, and the saved list and its audit rows are exactly what one winning save left.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Browser,
  connectAgent,
  type HostedHarness,
  listenHosted,
  operatorWithClient,
  toolAnswer,
} from "./hosted.ts";

const SECRET = "sk_live_policies_hostile_canary_19be";
let h: HostedHarness;
let url: string;

beforeAll(async () => {
  ({ h, url } = await listenHosted((req, res) => {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ path: req.url }));
  }));
}, 60_000);
afterAll(async () => {
  await h.close();
});

async function setUp() {
  const { op, token } = await operatorWithClient(h, {
    secret: SECRET,
    items: [{ name: "API_KEY" }],
    clientName: "hostile agent",
  });
  return { op, token };
}

async function changesOf(op: Browser) {
  const events = (await op.request("GET", "/api/audit")).json().events as {
    action: string;
    detail: Record<string, unknown>;
  }[];
  return events.filter((e) => e.action === "policies_changed");
}

describe("saving at once", () => {
  it("two saves of the same version: one wins, the other is 409 stale_version, one audit row", async () => {
    const { op } = await setUp();
    const save = (id: string, version: string) =>
      op.request("PUT", "/api/policies", { rules: [{ id, effect: "deny" }] }, { "if-match": version });

    // The first save of a list (no row yet) and a later one (a row to update) race differently.
    for (const [version, next] of [
      ['"0"', 1],
      ['"1"', 2],
    ] as const) {
      const answers = await Promise.all(Array.from({ length: 4 }, (_, i) => save(`writer-${i}`, version)));
      const won = answers.filter((a) => a.statusCode === 200);
      const lost = answers.filter((a) => a.statusCode !== 200);
      expect(won, answers.map((a) => a.body).join("\n")).toHaveLength(1);
      for (const answer of lost) {
        expect(answer.statusCode, answer.body).toBe(409);
        expect(answer.json().error).toMatchObject({ code: "stale_version", version: next });
      }
      const saved = (await op.request("GET", "/api/policies")).json();
      expect(saved.version).toBe(next);
      expect(saved.rules.map((r: { id: string }) => r.id)).toEqual([won[0]!.json().rules[0].id]);
    }
    expect((await changesOf(op)).map((e) => e.detail.version)).toEqual([2, 1]);
  });

  it("saves under If-Match * at once each move the version by one", async () => {
    const { op } = await setUp();
    const answers = await Promise.all(
      Array.from({ length: 4 }, (_, i) =>
        op.request(
          "PUT",
          "/api/policies",
          { rules: [{ id: `any-${i}`, effect: "ask" }] },
          { "if-match": "*" },
        ),
      ),
    );
    expect(answers.map((a) => a.statusCode)).toEqual([200, 200, 200, 200]);
    expect(answers.map((a) => a.json().version).sort()).toEqual([1, 2, 3, 4]);
    expect((await op.request("GET", "/api/policies")).json().version).toBe(4);
  });

  it("refuses an If-Match that is not one version", async () => {
    const { op } = await setUp();
    for (const tag of ['"1", "2"', 'W/"0"', '"-1"', '"1e3"', '"99999999999"']) {
      const answer = await op.request("PUT", "/api/policies", { rules: [] }, { "if-match": tag });
      expect(answer.statusCode, tag).toBe(400);
      expect(answer.json().error.code).toBe("invalid_request");
    }
    expect((await op.request("GET", "/api/policies")).json().version).toBe(0);
  });
});

describe("calls at once", () => {
  it("six calls at once under a limit of 3 a minute: three sent, three rate_limited", async () => {
    const { op, token } = await setUp();
    const saved = await op.request(
      "PUT",
      "/api/policies",
      { rules: [{ id: "three", effect: "allow", rate_limit: { calls: 3, per: "minute" } }] },
      { "if-match": "*" },
    );
    expect(saved.statusCode, saved.body).toBe(200);
    const agents = await Promise.all(Array.from({ length: 6 }, () => connectAgent(url, token)));
    const before = h.egress.origin.requests.filter((r) => r.url.startsWith("/v1/burst")).length;
    const answers = await Promise.all(
      agents.map((agent, i) =>
        agent
          .callTool({
            name: "http_request",
            arguments: { item_name: "API_KEY", method: "GET", path: `/v1/burst/${i}` },
          })
          .then(toolAnswer),
      ),
    );
    expect(answers.filter((a) => a.origin_status === 200)).toHaveLength(3);
    expect(answers.filter((a) => a.status === "rate_limited")).toHaveLength(3);
    expect(h.egress.origin.requests.filter((r) => r.url.startsWith("/v1/burst")).length - before).toBe(3);
    await Promise.all(agents.map((agent) => agent.close()));
  });
});

describe("hostile lists", () => {
  const nul = "\u0000";
  // What PostgreSQL cannot store is refused at the edge for every route (http/json-body.ts),
  // naming the field; the rest by the policy parser, naming the rule and the field.
  const unstorable: [string, unknown, RegExp][] = [
    ["a NUL in a name", [{ id: "n", name: `a${nul}b`, effect: "deny" }], /name.*NUL/],
    [
      "a NUL in a host",
      [{ id: "n", effect: "deny", match: { hosts: [`api${nul}.example.com`] } }],
      /hosts.*NUL/,
    ],
    ["a NUL in a path glob", [{ id: "n", effect: "deny", match: { paths: [`/a${nul}`] } }], /paths.*NUL/],
    [
      "a NUL in an environment",
      [{ id: "n", effect: "deny", match: { environments: [`prod${nul}`] } }],
      /environments.*NUL/,
    ],
    ["an unpaired surrogate in a name", [{ id: "s", name: "a\ud800b", effect: "deny" }], /name.*surrogate/],
    [
      "an unpaired surrogate in an agent",
      [{ id: "s", effect: "deny", match: { agents: ["\udfff"] } }],
      /agents.*surrogate/,
    ],
    ["a NUL in a field name", [{ id: "k", effect: "deny", [`x${nul}`]: 1 }], /field name.*NUL/],
  ];

  it.each(unstorable)(
    "%s: 400 invalid_request naming the field, nothing saved",
    async (_label, rules, message) => {
      const { op } = await setUp();
      for (const answer of [
        await op.request("PUT", "/api/policies", { rules }, { "if-match": "*" }),
        await op.request("POST", "/api/policies/preview", { rules }),
      ]) {
        expect(answer.statusCode, answer.body).toBe(400);
        expect(answer.json().error.code).toBe("invalid_request");
        expect(answer.json().error.message).toMatch(message);
        expect(answer.body).not.toContain(nul);
      }
      expect((await op.request("GET", "/api/policies")).json().version).toBe(0);
      expect(await changesOf(op)).toEqual([]);
    },
  );

  const cases: [string, unknown, RegExp][] = [
    [
      "a regular expression as a glob",
      [{ id: "r", effect: "deny", match: { paths: ["/v1/.*"] } }],
      /whole segments/,
    ],
    [
      "a character class as a glob",
      [{ id: "r", effect: "deny", match: { paths: ["/v1/[a-z]+"] } }],
      /URL path characters/,
    ],
    [
      "an alternation as a glob",
      [{ id: "r", effect: "deny", match: { paths: ["/v1/(admin|users)"] } }],
      /URL path characters/,
    ],
    [
      "a regular expression as a host",
      [{ id: "r", effect: "deny", match: { hosts: [".*\\.example\\.com"] } }],
      /hosts\[0\]/,
    ],
    [
      "a repeated id",
      [
        { id: "dup", effect: "allow" },
        { id: "dup", effect: "deny" },
      ],
      /^rule 2 \(dup\): id: another rule has this id/,
    ],
    [
      "a name of 10 000 characters",
      [{ id: "long", name: "x".repeat(10_000), effect: "ask" }],
      /^rule 1 \(long\): name: /,
    ],
    [
      "101 hosts in one rule",
      [
        {
          id: "many",
          effect: "deny",
          match: { hosts: Array.from({ length: 101 }, (_, i) => `h${i}.example.com`) },
        },
      ],
      /match\.hosts/,
    ],
    ["a rule that is a string", ["deny everything"], /^rule 1: /],
    ["a rule that is null", [null], /^rule 1: /],
  ];

  it.each(cases)("%s: 400 invalid_policy, nothing saved", async (_label, rules, message) => {
    const { op } = await setUp();
    const answer = await op.request("PUT", "/api/policies", { rules }, { "if-match": "*" });
    expect(answer.statusCode, answer.body).toBe(400);
    expect(answer.json().error.code).toBe("invalid_policy");
    expect(answer.json().error.message).toMatch(message);
    expect(answer.body).not.toContain(nul);
    const preview = await op.request("POST", "/api/policies/preview", { rules });
    expect(preview.statusCode, preview.body).toBe(400);
    expect((await op.request("GET", "/api/policies")).json().version).toBe(0);
    expect(await changesOf(op)).toEqual([]);
  });

  it("a __proto__ key is refused as JSON, never merged into a rule", async () => {
    const { op } = await setUp();
    const body = '{"rules":[{"id":"p","effect":"deny","__proto__":{"enabled":false}}]}';
    const answer = await op.request("PUT", "/api/policies", JSON.parse(body), { "if-match": "*" });
    expect(answer.statusCode, answer.body).toBe(400);
    expect(answer.json().error.code).toBe("invalid_json");
    expect((await op.request("GET", "/api/policies")).json().version).toBe(0);
  });

  it("a body over 1 MiB is refused before it is parsed", async () => {
    const { op } = await setUp();
    const huge = Array.from({ length: 500 }, (_, i) => ({
      id: `r-${i}`,
      effect: "deny",
      match: { paths: Array.from({ length: 100 }, (_, j) => `/p${j}/${"a".repeat(20)}`) },
    }));
    const answer = await op.request("PUT", "/api/policies", { rules: huge }, { "if-match": "*" });
    expect(answer.statusCode).toBe(413);
    expect((await op.request("GET", "/api/policies")).json().version).toBe(0);
  });

  it("odd but valid text is stored and answered exactly, and a literal glob matches only itself", async () => {
    const { op, token } = await setUp();
    const name = "Ünïcode 🚫 <b>rule</b> \"quoted\" 'single' \\back";
    const rules = [
      { id: "odd", name, effect: "deny", match: { paths: ["/v1/a+b/$(x)"] } },
      { id: "rest", effect: "allow" },
    ];
    const saved = await op.request("PUT", "/api/policies", { rules }, { "if-match": "*" });
    expect(saved.statusCode, saved.body).toBe(200);
    expect((await op.request("GET", "/api/policies")).json().rules[0]).toMatchObject({ id: "odd", name });
    const agent = await connectAgent(url, token);
    const call = (path: string) =>
      agent
        .callTool({ name: "http_request", arguments: { item_name: "API_KEY", method: "GET", path } })
        .then(toolAnswer);
    // `+` and `$( )` are literal characters of a segment, not pattern syntax.
    expect((await call("/v1/a+b/$(x)")).status).toBe("policy_denied");
    expect((await call("/v1/aab/x")).origin_status).toBe(200);
    expect((await call("/v1/ab/$(x)")).origin_status).toBe(200);
    await agent.close();
  });
});

// A review found that 79 deny rules, each with 100 copies of the valid glob `/**/a/…(62 × a)/b`
// (a body just under 1 MiB), held a replica's event loop for 11 s on every call with an 8 KiB
// path, and a preview for many minutes. Such a list is now refused at the edge, naming the limit.
describe("a list whose matching would hold the event loop", () => {
  const glob = `/**/${Array.from({ length: 62 }, () => "a").join("/")}/b`;
  const hostile = Array.from({ length: 79 }, (_, i) => ({
    id: `r${i}`,
    effect: "deny",
    match: { paths: Array.from({ length: 100 }, () => glob) },
  }));

  it("the reviewer's list: 400 invalid_policy naming the limit, for a save and a preview", async () => {
    const { op } = await setUp();
    expect(JSON.stringify({ rules: hostile }).length).toBeLessThan(1024 * 1024);
    for (const answer of [
      await op.request("PUT", "/api/policies", { rules: hostile }, { "if-match": "*" }),
      await op.request("POST", "/api/policies/preview", { rules: hostile }),
    ]) {
      expect(answer.statusCode, answer.body).toBe(400);
      expect(answer.json().error).toMatchObject({
        code: "invalid_policy",
        field: expect.stringMatching(/^match\.paths\[\d+\]$/),
      });
      expect(answer.json().error.message).toMatch(/path globs hold at most 10000 segments in all/);
    }
    // 61 + 61 + 7 segments between two `**`: each is searched for along the whole path.
    const run = `/**/${Array.from({ length: 60 }, () => "a").join("/")}/b/**`;
    const runs = [{ id: "runs", effect: "deny", match: { paths: [run, run, "/**/c/d/e/f/g/h/i/**"] } }];
    const refused = await op.request("PUT", "/api/policies", { rules: runs }, { "if-match": "*" });
    expect(refused.statusCode, refused.body).toBe(400);
    expect(refused.json().error.message).toMatch(
      /^rule 1 \(runs\): match\.paths\[2\]: .*at most 128 segments between two \*\*/,
    );
    expect((await op.request("GET", "/api/policies")).json().version).toBe(0);
    expect(await changesOf(op)).toEqual([]);
  });
});
