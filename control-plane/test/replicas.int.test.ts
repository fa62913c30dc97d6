// Limits hold across two control-plane instances on one PostgreSQL (run when DATABASE_URL is set):
// email code sends, wrong-code voiding and the authenticator lockout are counted in the database.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Browser, type HostedHarness, lastCodeFor, startHosted, uniqueEmail } from "./hosted.ts";

describe.skipIf(!process.env.DATABASE_URL)("two replicas on one PostgreSQL", () => {
  let a: HostedHarness;
  let b: HostedHarness;
  beforeAll(async () => {
    a = await startHosted();
    b = await startHosted({ replicaOf: a });
  }, 60_000);
  afterAll(async () => {
    await b?.close();
    await a?.close();
  });

  it("counts five sends per email across both, and a code sent by one verifies on the other", async () => {
    const email = uniqueEmail("replica");
    const onA = new Browser(a.app);
    const onB = new Browser(b.app);
    const sends = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        (i % 2 ? onA : onB).request("POST", "/api/auth/otp/send", { email }),
      ),
    );
    expect(sends.filter((r) => r.statusCode === 200)).toHaveLength(5);
    expect(sends.filter((r) => r.statusCode === 429)).toHaveLength(3);
    const verified = await onA.request("POST", "/api/auth/otp/verify", {
      email,
      otp: lastCodeFor(a.inbox, email),
    });
    expect(verified.statusCode).toBe(200);
    // Single use across replicas.
    expect(
      (await onB.request("POST", "/api/auth/otp/verify", { email, otp: lastCodeFor(a.inbox, email) }))
        .statusCode,
    ).toBe(401);
  });

  it("voids a code after five wrong attempts spread over both", async () => {
    const email = uniqueEmail("replica-wrong");
    const onA = new Browser(a.app);
    const onB = new Browser(b.app);
    await onA.request("POST", "/api/auth/otp/send", { email });
    const good = lastCodeFor(a.inbox, email);
    const wrong = good === "00000000" ? "11111111" : "00000000";
    const answers = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        (i % 2 ? onA : onB).request("POST", "/api/auth/otp/verify", { email, otp: wrong }),
      ),
    );
    expect(answers.map((r) => r.json().error.attempts_remaining).sort()).toEqual([0, 1, 2, 3, 4]);
    expect((await onB.request("POST", "/api/auth/otp/verify", { email, otp: good })).statusCode).toBe(401);
  });
});
