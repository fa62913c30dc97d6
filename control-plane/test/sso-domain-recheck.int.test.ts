// A proven single sign-on domain is read again every day (sso/domain-recheck.ts), through the
// egress proxy from a real DNS-over-HTTPS origin (doh-server.ts): it stays proven while its record
// is published; three checks in a row that find no record take it off (audited, the owners mailed
// at each miss), after which it routes no sign-in and is required of nobody (and nothing lapses when
// the lapse's audit row cannot be written); a DNS that cannot be read counts for nothing; a record found again, or the domain proven again, starts the count
// over; two replicas running the round at once read each domain once; what a check read proves
// nothing of a connection made again meanwhile.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LAPSE_AFTER_MISSES, RECHECK_EVERY_MS } from "../src/sso/domain-recheck.ts";
import { createSsoRepo } from "../src/sso/sso.repo.ts";
import { refuseAuditRows } from "./database.ts";
import type { TestDoh } from "./doh-server.ts";
import { type Browser, type HostedHarness, readableMail } from "./hosted.ts";
import { type SsoRig, startSsoRig } from "./sso-rig.ts";

const BASE = "http://localhost:8787";
/** A domain of this run's own: other runs share a PostgreSQL database. */
const DOMAIN = `recheck-${Math.random().toString(16).slice(2, 8)}.latch.test`;
const RECORD_NAME = `_latch-verification.${DOMAIN}`;

let rig: SsoRig | undefined;
let doh: TestDoh;
let h: HostedHarness;
let owner: Browser;
let ownerEmail: string;
let ownerTotp: { generate(options: { timestamp: number }): string };
let organisationId: string;
let recordValue: string;

beforeAll(async () => {
  rig = await startSsoRig({ baseUrl: BASE, label: "recheck-owner", domain: DOMAIN, requireSso: true });
  ({ doh, h, owner, ownerEmail, ownerTotp, organisationId } = rig);
  recordValue = rig.record.value;
}, 120_000);

afterAll(async () => {
  await rig?.close();
});

/** The owner's domain check, after a fresh step-up. */
async function proveDomains(): Promise<void> {
  h.clock.advance(30_000);
  const code = ownerTotp.generate({ timestamp: h.clock.now.getTime() });
  expect((await owner.request("POST", "/api/auth/totp/verify", { code })).statusCode).toBe(200);
  const proven = await owner.request("POST", "/api/orgs/sso/verify-domains", {});
  expect(proven.statusCode, proven.body).toBe(200);
  expect(isProven((await owner.request("GET", "/api/orgs/sso")).json())).toBe(true);
}

function isProven(view: { connection: { domains: { domain: string; verified: boolean }[] } }): boolean {
  return view.connection.domains.find((d) => d.domain === DOMAIN)?.verified === true;
}

/** A day later, this organisation's round (the database may hold other runs' connections). */
async function nextDaysRound() {
  h.clock.advance(RECHECK_EVERY_MS + 60_000);
  return h.plane.services.sso.domainRecheck.recheckDue({ only: [organisationId] });
}

async function storedMisses(): Promise<Record<string, number>> {
  const row = await createSsoRepo(h.plane.database.db).findConnection(organisationId);
  return row?.domain_misses ?? {};
}

const asks = () => doh.asked.filter((name) => name === RECORD_NAME).length;
const mailsToOwner = () => h.inbox.mails.filter((mail) => mail.to === ownerEmail).map(readableMail);

describe("a proven domain, read again every day", () => {
  it("stays proven while its record is published, and is read once a day, by one replica", async () => {
    const before = asks();
    h.clock.advance(RECHECK_EVERY_MS + 60_000);
    const round = () => h.plane.services.sso.domainRecheck.recheckDue({ only: [organisationId] });
    const [first, second] = await Promise.all([round(), round()]);
    // Two rounds at once (two replicas): the domain is read once.
    expect(first.connections + second.connections).toBe(1);
    expect(asks()).toBe(before + 1);
    expect([...first.missing, ...second.missing]).toEqual([]);
    // Read today already: a round an hour later reads nothing.
    h.clock.advance(60 * 60 * 1000);
    const again = await h.plane.services.sso.domainRecheck.recheckDue({ only: [organisationId] });
    expect(again.connections).toBe(0);
    expect(asks()).toBe(before + 1);
    expect(isProven((await owner.request("GET", "/api/orgs/sso")).json())).toBe(true);
  });

  it("counts a DNS that cannot be read for nothing", async () => {
    doh.withdraw(RECORD_NAME);
    doh.breakName(RECORD_NAME, true);
    try {
      for (let day = 0; day < LAPSE_AFTER_MISSES + 1; day++) {
        const round = await nextDaysRound();
        expect(round.connections).toBe(1);
        expect(round.missing).toEqual([]);
      }
      expect(await storedMisses()).toEqual({});
      expect(isProven((await owner.request("GET", "/api/orgs/sso")).json())).toBe(true);
    } finally {
      doh.breakName(RECORD_NAME, false);
      doh.publish(RECORD_NAME, recordValue);
    }
  });

  it("starts the count over when the record is found again", async () => {
    doh.withdraw(RECORD_NAME);
    for (let day = 1; day < LAPSE_AFTER_MISSES; day++) {
      expect((await nextDaysRound()).missing).toEqual([{ organisationId, domain: DOMAIN, misses: day }]);
    }
    expect(await storedMisses()).toEqual({ [DOMAIN]: LAPSE_AFTER_MISSES - 1 });
    // The owner reads it where the domain is listed.
    const listed = (await owner.request("GET", "/api/orgs/sso")).json().connection.domains;
    expect(listed).toEqual([
      expect.objectContaining({ domain: DOMAIN, verified: true, missed_checks: LAPSE_AFTER_MISSES - 1 }),
    ]);
    doh.publish(RECORD_NAME, recordValue);
    expect((await nextDaysRound()).missing).toEqual([]);
    expect(await storedMisses()).toEqual({});
    expect(isProven((await owner.request("GET", "/api/orgs/sso")).json())).toBe(true);
  });

  it("lapses nothing, and mails no lapse, when the lapse's audit row cannot be written", async () => {
    doh.withdraw(RECORD_NAME);
    for (let day = 1; day < LAPSE_AFTER_MISSES; day++) await nextDaysRound();
    const mailsBefore = mailsToOwner().length;
    const restore = await refuseAuditRows(h.plane.database, organisationId, "sso_domain_lapsed");
    try {
      const round = await nextDaysRound();
      expect(round).toMatchObject({ connections: 1, missing: [], lapsed: [] });
    } finally {
      await restore();
    }
    expect(isProven((await owner.request("GET", "/api/orgs/sso")).json())).toBe(true);
    expect(await storedMisses()).toEqual({ [DOMAIN]: LAPSE_AFTER_MISSES - 1 });
    expect(mailsToOwner()).toHaveLength(mailsBefore);
    // Found again: the count starts over for the next test.
    doh.publish(RECORD_NAME, recordValue);
    await nextDaysRound();
    expect(await storedMisses()).toEqual({});
  });

  it(`lapses after ${LAPSE_AFTER_MISSES} checks in a row without its record: audited, the owners told, required of nobody`, async () => {
    const mailsBefore = mailsToOwner().length;
    doh.withdraw(RECORD_NAME);
    for (let day = 1; day < LAPSE_AFTER_MISSES; day++) {
      const round = await nextDaysRound();
      expect(round.lapsed).toEqual([]);
      // Still proven: the discovery routes its addresses here, single sign-on still required.
      const found = await owner.request("POST", "/api/auth/sso/discover", { email: `x@${DOMAIN}` });
      expect(found.statusCode, found.body).toBe(200);
    }
    const warnings = mailsToOwner().slice(mailsBefore);
    expect(warnings).toHaveLength(LAPSE_AFTER_MISSES - 1);
    expect(warnings[0]).toContain(`Subject: Latch: the DNS record proving ${DOMAIN} is missing`);
    expect(warnings[0]).toContain(`(1 of ${LAPSE_AFTER_MISSES} checks)`);
    expect(warnings[0]).toContain(`${RECORD_NAME} TXT "${recordValue}"`);

    const last = await nextDaysRound();
    expect(last.lapsed).toEqual([{ organisationId, domain: DOMAIN }]);
    expect(isProven((await owner.request("GET", "/api/orgs/sso")).json())).toBe(false);
    expect(await storedMisses()).toEqual({});
    const lapsedMail = mailsToOwner().at(-1) ?? "";
    expect(lapsedMail).toContain(`Subject: Latch: ${DOMAIN} no longer counts for single sign-on`);
    const audit = (await owner.request("GET", "/api/audit?action=sso_domain_lapsed")).json().events;
    expect(audit).toEqual([
      expect.objectContaining({
        actor: "system",
        action: "sso_domain_lapsed",
        detail: { domain: DOMAIN, checks_missed: LAPSE_AFTER_MISSES },
      }),
    ]);
    // The domain routes no sign-in here, and no round reads it any more.
    const found = await owner.request("POST", "/api/auth/sso/discover", { email: `x@${DOMAIN}` });
    expect(found.statusCode).toBe(404);
    const before = asks();
    expect((await nextDaysRound()).connections).toBe(0);
    expect(asks()).toBe(before);
  });

  it("counts again once its owner proves it again, from no miss", async () => {
    doh.publish(RECORD_NAME, recordValue);
    await proveDomains();
    doh.withdraw(RECORD_NAME);
    expect((await nextDaysRound()).missing).toEqual([{ organisationId, domain: DOMAIN, misses: 1 }]);
    doh.publish(RECORD_NAME, recordValue);
    expect((await nextDaysRound()).missing).toEqual([]);
  });

  it("keeps nothing a check read for a connection made again, or a domain proven again, meanwhile", async () => {
    const repo = createSsoRepo(h.plane.database.db);
    const row = await repo.findConnection(organisationId);
    const token = row!.domain_token;
    const removed = { token: "the-token-of-a-removed-connection", misses: row!.domain_misses };
    expect(await repo.recordDomainRecheck(organisationId, removed, {}, [DOMAIN])).toBe(false);
    // A check that read two misses, while the owner proved the domain again (no miss now).
    expect(row!.domain_misses).toEqual({});
    const stale = { token, misses: { [DOMAIN]: LAPSE_AFTER_MISSES - 1 } };
    expect(await repo.recordDomainRecheck(organisationId, stale, {}, [DOMAIN])).toBe(false);
    expect(isProven((await owner.request("GET", "/api/orgs/sso")).json())).toBe(true);
  });
});
