// A policy preview is the heaviest read a member can ask for (up to 100 000 ledger rows replayed
// through two lists): one runs at a time per organisation and a few per process; the others are
// told to retry, and a preview that failed frees its place.
import { AppError } from "@latch/shared/errors";
import { describe, expect, it } from "vitest";
import type { AuditedCall } from "../audit/audit.repo.ts";
import type { PoliciesRepo } from "./policies.repo.ts";
import { createPoliciesService, MAX_PREVIEWS_AT_ONCE } from "./policies.service.ts";

function service() {
  const gates: { release: () => void; fail: (e: Error) => void }[] = [];
  const repo = {
    findPolicyIfChanged: async () => ({ version: 0, rules: [] }),
  } as unknown as PoliciesRepo;
  const policies = createPoliciesService({
    repo,
    inTransaction: async () => {
      throw new Error("not used");
    },
    recordEvent: async () => {},
    rateLimiter: { take: async () => {}, check: async () => {} },
    // Each ledger read waits until the test lets it go: a preview held in flight.
    findCallsBefore: () =>
      new Promise<AuditedCall[]>((resolve, reject) => {
        gates.push({ release: () => resolve([]), fail: reject });
      }),
    now: () => new Date("2026-11-26T06:00:00Z"),
  });
  const flush = () => new Promise((resolve) => setImmediate(resolve));
  return { policies, gates, flush };
}

const rules = [{ id: "r", effect: "ask" }];

async function refusalOf(promise: Promise<unknown>): Promise<AppError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AppError);
  return error as AppError;
}

describe("previewPolicies at once", () => {
  it("a second preview of the same organisation while one runs is 429 with retry_after", async () => {
    const { policies, gates, flush } = service();
    const first = policies.previewPolicies("org_1", rules);
    await flush();
    const second = await refusalOf(policies.previewPolicies("org_1", rules));
    expect(second.code).toBe("rate_limited");
    expect(second.extra.retry_after).toBe(5);
    // Another organisation is not held up by it.
    const other = policies.previewPolicies("org_2", rules);
    await flush();
    for (const gate of gates) gate.release();
    await expect(first).resolves.toMatchObject({ calls: 0 });
    await expect(other).resolves.toMatchObject({ calls: 0 });
    // Done: the organisation may preview again.
    const again = policies.previewPolicies("org_1", rules);
    await flush();
    gates.at(-1)!.release();
    await expect(again).resolves.toMatchObject({ calls: 0 });
  });

  it("a preview whose ledger read fails frees its place", async () => {
    const { policies, gates, flush } = service();
    const failing = policies.previewPolicies("org_1", rules);
    await flush();
    gates[0]!.fail(new Error("connection terminated"));
    await expect(failing).rejects.toThrow("connection terminated");
    const next = policies.previewPolicies("org_1", rules);
    await flush();
    gates[1]!.release();
    await expect(next).resolves.toMatchObject({ calls: 0 });
  });

  it(`at most ${MAX_PREVIEWS_AT_ONCE} organisations preview at once in one process`, async () => {
    const { policies, gates, flush } = service();
    const running = Array.from({ length: MAX_PREVIEWS_AT_ONCE }, (_, i) =>
      policies.previewPolicies(`org_${i}`, rules),
    );
    await flush();
    expect((await refusalOf(policies.previewPolicies("org_late", rules))).code).toBe("rate_limited");
    for (const gate of gates) gate.release();
    await Promise.all(running);
  });

  it("a bad list is refused before it takes a place", async () => {
    const { policies, gates, flush } = service();
    expect((await refusalOf(policies.previewPolicies("org_1", [{ effect: "nope" }]))).code).toBe(
      "invalid_policy",
    );
    const next = policies.previewPolicies("org_1", rules);
    await flush();
    gates[0]!.release();
    await expect(next).resolves.toMatchObject({ calls: 0 });
  });
});

describe("decideCall with the version the call already read", () => {
  it("reads nothing while the version matches its cache, and the list again once it moved", async () => {
    const saved = { version: 1, rules: [{ id: "no-admin", name: "No admin", effect: "deny", match: {} }] };
    let reads = 0;
    const repo = {
      findPolicyIfChanged: async (_org: string, known?: number) => {
        reads += 1;
        return known === saved.version ? { version: saved.version } : saved;
      },
    } as unknown as PoliciesRepo;
    const policies = createPoliciesService({
      repo,
      inTransaction: async () => {
        throw new Error("not used");
      },
      recordEvent: async () => {},
      rateLimiter: { take: async () => {}, check: async () => {} },
      findCallsBefore: async () => [],
      now: () => new Date("2026-11-26T06:00:00Z"),
    });
    const call = {
      agentId: "cli_a",
      agentName: "a",
      item: "K",
      host: "h.test",
      method: "GET",
      path: "/",
      environment: "e",
    };
    expect((await policies.decideCall("org_1", call, 1))?.effect).toBe("deny");
    expect(reads).toBe(1);
    expect((await policies.decideCall("org_1", call, 1))?.effect).toBe("deny");
    expect(reads).toBe(1);
    // Saved elsewhere: the version the call read differs, so the rules are read again.
    saved.version = 2;
    saved.rules = [];
    expect(await policies.decideCall("org_1", call, 2)).toBeUndefined();
    expect(reads).toBe(2);
    // Without a version (the local vault, a cache-backed read): the version is asked each time.
    await policies.decideCall("org_1", call);
    expect(reads).toBe(3);
  });
});
