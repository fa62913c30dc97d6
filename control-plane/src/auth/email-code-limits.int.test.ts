// POST /api/auth/otp/send beyond the 5 per email (spec 8): at most 30 codes per 15 minutes asked
// for from one client address, whatever the emails (no mail bombing from one caller), answered as
// every per-address limit is (429 rate_limited, retry_after, Retry-After) and the same for known
// and unknown emails; and the rows the sends leave pruned once a day old, by the rounds timer.
import { randomBytes } from "node:crypto";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Browser, type HostedHarness, signUpOperator, startHosted, uniqueEmail } from "../../test/hosted.ts";
import { createPrunes, startPruneSchedule } from "../prune-rounds.ts";
import { EMAIL_CODE_SENDS_PER_IP } from "./email-code.service.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
}, 60_000);
afterAll(async () => {
  await h?.close();
});

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;

/** An address of this run's own (TEST-NET-2), so no other test file's sends count with it. */
const newAddress = () => {
  const [a, b] = randomBytes(2);
  return `198.51.${a}.${1 + (b! % 254)}`;
};

describe("POST /api/auth/otp/send from one client address", () => {
  it("sends 30 codes per 15 minutes, then 429 alike for known and unknown emails", async () => {
    const { email: known } = await signUpOperator(h, { label: "known" });
    const address = newAddress();
    const caller = new Browser(h.app, undefined, address);
    for (let i = 0; i < EMAIL_CODE_SENDS_PER_IP.limit; i++) {
      const sent = await caller.request("POST", "/api/auth/otp/send", { email: uniqueEmail("bomb") });
      expect(sent.statusCode, sent.body).toBe(200);
    }
    const unknown = uniqueEmail("unknown");
    const mailsBefore = h.inbox.mails.length;
    const toUnknown = await caller.request("POST", "/api/auth/otp/send", { email: unknown });
    const toKnown = await caller.request("POST", "/api/auth/otp/send", { email: known });
    expect(toUnknown.statusCode).toBe(429);
    expect(toUnknown.json().error).toMatchObject({ code: "rate_limited" });
    expect(toUnknown.json().error.message).toBe(
      "too many email codes asked for from one address: at most 30 per 15 minutes",
    );
    expect(toUnknown.json().error.retry_after).toBeGreaterThan(0);
    expect(toUnknown.headers["retry-after"]).toBe(String(toUnknown.json().error.retry_after));
    // Nothing tells a known email from an unknown one.
    expect(toKnown.statusCode).toBe(toUnknown.statusCode);
    expect(toKnown.json()).toEqual(toUnknown.json());
    expect(toKnown.headers["retry-after"]).toBe(toUnknown.headers["retry-after"]);
    expect(h.inbox.mails.length).toBe(mailsBefore);

    // Another address is another caller; however this one spells itself, it is the same one.
    const other = new Browser(h.app, undefined, newAddress());
    expect((await other.request("POST", "/api/auth/otp/send", { email: unknown })).statusCode).toBe(200);
    const mapped = new Browser(h.app, undefined, `::ffff:${address}`);
    expect((await mapped.request("POST", "/api/auth/otp/send", { email: uniqueEmail() })).statusCode).toBe(
      429,
    );

    h.clock.advance(15 * MINUTE + 1000);
    expect((await caller.request("POST", "/api/auth/otp/send", { email: known })).statusCode).toBe(200);
  });
});

describe("pruning the email-code rows", () => {
  /** The rows left of `email`'s sends and challenge, and of the sends counted for `address`. */
  async function rowsOf(email: string, address: string) {
    const db = h.plane.database.db;
    const sends = await db.selectFrom("email_sends").select("id").where("email", "=", email).execute();
    const challenges = await db
      .selectFrom("email_challenges")
      .select("email")
      .where("email", "=", email)
      .execute();
    const hits = await db
      .selectFrom("rate_limit_hits")
      .select("at")
      .where("bucket", "=", `${EMAIL_CODE_SENDS_PER_IP.name}:${address}`)
      .execute();
    return { sends: sends.length, challenges: challenges.length, hits: hits.length };
  }

  it("deletes sends, challenges and counted client sends a day old from the rounds timer, and keeps live ones", async () => {
    const old = { email: uniqueEmail("old"), address: newAddress() };
    const live = { email: uniqueEmail("live"), address: newAddress() };
    // A send of a day and 11 minutes ago, its code expired a day ago (the clock moved back, so that
    // on a shared PostgreSQL database no other file's live rows are older than the prune's line).
    h.clock.advance(-(DAY + 11 * MINUTE));
    await new Browser(h.app, undefined, old.address).request("POST", "/api/auth/otp/send", old);
    h.clock.advance(DAY + 11 * MINUTE);
    // An expired code of a minute ago still gets its own sentence: kept too.
    h.clock.advance(-11 * MINUTE);
    await new Browser(h.app, undefined, live.address).request("POST", "/api/auth/otp/send", live);
    h.clock.advance(11 * MINUTE);
    expect(await rowsOf(old.email, old.address)).toEqual({ sends: 1, challenges: 1, hits: 1 });
    expect(await rowsOf(live.email, live.address)).toEqual({ sends: 1, challenges: 1, hits: 1 });

    const stop = startPruneSchedule(
      createPrunes(h.plane.database.db, () => h.clock.now, h.plane.services.emailCodes),
      pino({ level: "silent" }),
      20,
    );
    try {
      await expect
        .poll(() => rowsOf(old.email, old.address), { timeout: 10_000 })
        .toEqual({ sends: 0, challenges: 0, hits: 0 });
    } finally {
      stop();
    }
    expect(await rowsOf(live.email, live.address)).toEqual({ sends: 1, challenges: 1, hits: 1 });
    const expired = await new Browser(h.app).request("POST", "/api/auth/otp/verify", {
      email: live.email,
      otp: "00000000",
    });
    expect(expired.json().error.message).toContain("expired");
  });
});

describe("POST /api/auth/otp/send when the mail relay refuses", () => {
  it("answers 503 mail_unavailable, not a 500, quoting nothing of the relay, and sends once it is back", async () => {
    const caller = new Browser(h.app, undefined, newAddress());
    const email = uniqueEmail("relay-down");
    h.inbox.isRefusing = true;
    try {
      const refused = await caller.request("POST", "/api/auth/otp/send", { email });
      expect(refused.statusCode, refused.body).toBe(503);
      expect(refused.json().error.code).toBe("mail_unavailable");
      expect(refused.body).not.toMatch(/mailbox unavailable|550|code is/);
    } finally {
      h.inbox.isRefusing = false;
    }
    const sent = await caller.request("POST", "/api/auth/otp/send", { email });
    expect(sent.statusCode, sent.body).toBe(200);
    expect(h.inbox.mails.some((mail) => mail.to === email)).toBe(true);
  });
});
