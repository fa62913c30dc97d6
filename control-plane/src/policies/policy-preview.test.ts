// A preview replays up to 100 000 recorded calls through two lists (a review found one preview of
// a costly list holding the event loop for minutes): the replay gives the loop its turn after each
// slice of work, stops at a bound of work in all, and reads paths as enforcement does.
import { describe, expect, it } from "vitest";
import type { AuditedCall } from "../audit/audit.repo.ts";
import { compilePolicy } from "./policy-match.ts";
import { type PreviewWork, previewPolicy } from "./policy-preview.ts";
import { parsePolicyRules } from "./policy-rules.ts";

const from = new Date("2026-11-19T06:00:00Z");
const to = new Date("2026-11-26T06:00:00Z");

function row(seq: number, path: string): AuditedCall {
  return {
    seq,
    at: new Date(from.getTime() + seq * 1000),
    environment: "production",
    actor: "agent:cli_abc",
    actor_name: "agent",
    action: "http_request",
    item_name: "API_KEY",
    host: "api.example.com",
    detail: { method: "GET", path },
  };
}

/** Runs a preview whose turns given back to the event loop are counted. */
async function preview(
  rawRules: unknown[],
  calls: AuditedCall[],
  work: Omit<PreviewWork, "pause">,
  judgedItems?: (row: AuditedCall & { item_name: string }) => readonly string[] | undefined,
) {
  const rules = parsePolicyRules(rawRules);
  let pauses = 0;
  const answer = await previewPolicy({
    candidate: { rules, compiled: compilePolicy(rules) },
    saved: compilePolicy([]),
    calls,
    from,
    to,
    truncated: false,
    ...(judgedItems ? { judgedItems } : {}),
    work: {
      ...work,
      pause: async () => {
        pauses++;
      },
    },
  });
  return { answer, pauses };
}

const run = (length: number) => Array.from({ length }, () => "a").join("/");
// The costliest runs a list may hold, on the longest path of a's: each decision is real work.
const costly = [
  {
    id: "floating",
    effect: "deny",
    match: { paths: [`/**/${run(61)}/b/**`, `/**/${run(61)}/b/**`] },
  },
];
const longPath = `/${run(4000)}`;

describe("a preview shares the event loop", () => {
  it("gives the loop its turn after each slice of work, and still counts every call", async () => {
    const calls = Array.from({ length: 20 }, (_, i) => row(i + 1, longPath));
    const { answer, pauses } = await preview(costly, calls, { sliceSteps: 10_000, maxSteps: 1e9 });
    expect(answer).toMatchObject({ calls: 20, truncated: false, totals: { deny: 0, none: 20 } });
    // Each decision on this path is far more than a slice: at least one turn per call.
    expect(pauses).toBeGreaterThanOrEqual(19);
  });

  it("stops at its bound of work and says it is truncated", async () => {
    const calls = Array.from({ length: 50 }, (_, i) => row(i + 1, longPath));
    const { answer } = await preview(costly, calls, { sliceSteps: 10_000, maxSteps: 200_000 });
    expect(answer.truncated).toBe(true);
    expect(answer.calls).toBeLessThan(50);
    expect(answer.calls).toBeGreaterThan(0);
  });

  it("a cheap list over many calls is not cut short by the default bound", async () => {
    const calls = Array.from({ length: 2000 }, (_, i) => row(i + 1, `/v1/items/${i}`));
    const rules = parsePolicyRules([{ id: "reads", effect: "allow", match: { paths: ["/v1/items/*"] } }]);
    const answer = await previewPolicy({
      candidate: { rules, compiled: compilePolicy(rules) },
      saved: compilePolicy([]),
      calls,
      from,
      to,
      truncated: false,
    });
    expect(answer).toMatchObject({ calls: 2000, truncated: false, totals: { allow: 2000 } });
  });
});

describe("a preview reads paths as enforcement does", () => {
  it("a deny glob catches the spellings an origin reads as the same path", async () => {
    const paths = ["/admin;x/users", "/admin./users", "/admin%20/users", "/%2561dmin/users", "/public/x"];
    const { answer } = await preview(
      [{ id: "no-admin", effect: "deny", match: { paths: ["/admin/**"] } }],
      paths.map((path, i) => row(i + 1, path)),
      { sliceSteps: 1e6, maxSteps: 1e9 },
    );
    expect(answer.totals).toMatchObject({ deny: 4, none: 1 });
  });
});

describe("a call sent by another path than it asked for (a provider's rename)", () => {
  const renamed: AuditedCall = {
    ...row(1, "/v1/playlists/abc/items"),
    host: "api.spotify.com",
    detail: { method: "DELETE", path: "/v1/playlists/abc/items", requested_path: "/v1/playlists/abc/tracks" },
  };
  const work = { sliceSteps: 1_000_000, maxSteps: 1_000_000_000 };

  it("is denied by a rule on either path, as enforcement judged it", async () => {
    for (const path of ["/v1/playlists/*/tracks", "/v1/playlists/*/items"]) {
      const { answer } = await preview(
        [{ id: "d", effect: "deny", match: { paths: [path] } }],
        [renamed],
        work,
      );
      expect(answer.totals.deny, path).toBe(1);
    }
  });

  it("is allowed only by a rule on both paths", async () => {
    const one = await preview(
      [{ id: "a", effect: "allow", match: { paths: ["/v1/playlists/*/items"] } }],
      [renamed],
      work,
    );
    expect(one.answer.totals).toMatchObject({ allow: 0, none: 1 });
    const both = await preview(
      [{ id: "a", effect: "allow", match: { paths: ["/v1/playlists/**"] } }],
      [renamed],
      work,
    );
    expect(both.answer.totals).toMatchObject({ allow: 1, none: 0 });
  });
});

describe("a call is judged by every credential its plan uses", () => {
  const named = { ...row(1, "/v1/me"), item_name: "SPOTIFY", host: "api.spotify.com" };
  const siblings = (r: { item_name: string }) =>
    r.item_name === "SPOTIFY" ? ["SPOTIFY", "SPOTIFY_REFRESH", "SPOTIFY_SECRET"] : undefined;
  const work = { sliceSteps: 1_000_000, maxSteps: 1_000_000_000 };

  it("is denied or asked by a rule on a sibling, as enforcement judges it", async () => {
    for (const effect of ["deny", "ask"] as const) {
      const rules = [{ id: "r", effect, match: { items: ["SPOTIFY_REFRESH"] } }];
      expect((await preview(rules, [named], work, siblings)).answer.totals[effect], effect).toBe(1);
      // Without the siblings, the row's credential alone: the rule is not seen.
      expect((await preview(rules, [named], work)).answer.totals.none, effect).toBe(1);
    }
  });

  it("is allowed only by a rule on the credential it named: an allow on a sibling alone sends nothing", async () => {
    const onSibling = [{ id: "a", effect: "allow", match: { items: ["SPOTIFY_REFRESH"] } }];
    expect((await preview(onSibling, [named], work, siblings)).answer.totals).toMatchObject({
      allow: 0,
      none: 1,
    });
    const onNamed = [{ id: "a", effect: "allow", match: { items: ["SPOTIFY"] } }];
    expect((await preview(onNamed, [named], work, siblings)).answer.totals).toMatchObject({
      allow: 1,
      none: 0,
    });
  });
});

describe("a preview counts rate limits as enforcement does", () => {
  it("a limit on the path a rename sends counts calls another allow rule decides by the path asked", async () => {
    const renamed = (seq: number): AuditedCall => ({
      ...row(seq, "/v1/playlists/p1/items"),
      detail: { method: "GET", path: "/v1/playlists/p1/items", requested_path: "/v1/playlists/p1/tracks" },
    });
    const { answer } = await preview(
      [
        { id: "tracks", effect: "allow", match: { paths: ["/v1/playlists/*/tracks"] } },
        {
          id: "items-limited",
          effect: "allow",
          match: { paths: ["/v1/playlists/*/items"] },
          rate_limit: { calls: 1, per: "hour" },
        },
      ],
      [renamed(1), renamed(2)],
      { sliceSteps: 10_000, maxSteps: 1e9 },
    );
    expect(answer.totals).toMatchObject({ allow: 1, rate_limited: 1 });
    expect(answer.rules).toMatchObject([
      { id: "tracks", calls: 1, rate_limited: 0 },
      { id: "items-limited", calls: 1, rate_limited: 1 },
    ]);
  });

  it("a call a narrow limit refuses takes no place of a broad one", async () => {
    const renamed = (seq: number): AuditedCall => ({
      ...row(seq, "/v1/playlists/p1/items"),
      detail: { method: "GET", path: "/v1/playlists/p1/items", requested_path: "/v1/playlists/p1/tracks" },
    });
    const { answer } = await preview(
      [
        {
          id: "tracks",
          effect: "allow",
          match: { paths: ["/v1/playlists/*/tracks"] },
          rate_limit: { calls: 2, per: "hour" },
        },
        {
          id: "items-limited",
          effect: "allow",
          match: { paths: ["/v1/playlists/*/items"] },
          rate_limit: { calls: 1, per: "hour" },
        },
      ],
      // Two renamed calls (the second refused by items-limited), then one only "tracks" decides.
      [renamed(1), renamed(2), row(3, "/v1/playlists/p1/tracks")],
      { sliceSteps: 10_000, maxSteps: 1e9 },
    );
    expect(answer.totals).toMatchObject({ allow: 2, rate_limited: 1 });
  });
});

describe("an ask rule's rate limit counts only calls an approval let through", () => {
  const asked = (seq: number): AuditedCall => ({ ...row(seq, "/v1/items/1"), action: "grant_requested" });
  const limited = [{ id: "ask-limited", effect: "ask", match: {}, rate_limit: { calls: 1, per: "hour" } }];
  const work = { sliceSteps: 1_000_000, maxSteps: 1_000_000_000 };

  it("a request for an approval was never sent: it takes no place and is never rate_limited", async () => {
    const { answer } = await preview(limited, [asked(1), asked(2), row(3, "/v1/items/1")], work);
    // As http-request.tool.ts: an uncovered call waits in the inbox; the covered one takes the place.
    expect(answer.totals).toMatchObject({ ask: 3, rate_limited: 0 });
    expect(answer.rules).toMatchObject([{ id: "ask-limited", calls: 3, rate_limited: 0 }]);
  });

  it("sent calls under the ask rule still count, and an allow rule counts a requested call it would send", async () => {
    const sent = await preview(limited, [row(1, "/v1/items/1"), asked(2), row(3, "/v1/items/1")], work);
    expect(sent.answer.totals).toMatchObject({ ask: 2, rate_limited: 1 });
    const allowed = await preview(
      [{ id: "allow-limited", effect: "allow", match: {}, rate_limit: { calls: 1, per: "hour" } }],
      [asked(1), asked(2)],
      work,
    );
    expect(allowed.answer.totals).toMatchObject({ allow: 1, rate_limited: 1 });
  });
});
