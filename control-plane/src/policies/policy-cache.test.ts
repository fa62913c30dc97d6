// The compiled lists a process keeps are bounded by their stored size as well as by count: lists
// of a few organisations, however large, cannot fill a replica's heap, and a list that had to go is
// read and compiled again, deciding as before.
import { describe, expect, it } from "vitest";
import type { PoliciesRepo } from "./policies.repo.ts";
import { createPoliciesService } from "./policies.service.ts";
import { createPolicyCache } from "./policy-cache.ts";
import { compilePolicy, type PolicyCall } from "./policy-match.ts";

const compiled = compilePolicy([]);

describe("the policy cache", () => {
  it("lets the least recently used lists go until a new one fits its stored-size budget", () => {
    const cache = createPolicyCache({ lists: 100, json: 1_000 });
    cache.remember("org_a", { version: 1, compiled, size: 400 });
    cache.remember("org_b", { version: 1, compiled, size: 400 });
    // Read lately: org_b is now the oldest.
    expect(cache.find("org_a")?.version).toBe(1);
    cache.remember("org_c", { version: 1, compiled, size: 400 });
    expect(cache.usage()).toEqual({ lists: 2, json: 800 });
    expect(cache.find("org_b")).toBeUndefined();
    expect(cache.find("org_a")).toBeDefined();
    // A new version replaces the organisation's old one in the count and the size.
    cache.remember("org_a", { version: 2, compiled, size: 100 });
    expect(cache.usage()).toEqual({ lists: 2, json: 500 });
  });

  it("never keeps a list over the whole budget, and forgets that organisation's older one", () => {
    const cache = createPolicyCache({ lists: 100, json: 1_000 });
    cache.remember("org_a", { version: 1, compiled, size: 10 });
    cache.remember("org_b", { version: 1, compiled, size: 10 });
    cache.remember("org_a", { version: 2, compiled, size: 1_001 });
    expect(cache.find("org_a")).toBeUndefined();
    expect(cache.usage()).toEqual({ lists: 1, json: 10 });
  });

  it("still holds at most its count of lists", () => {
    const cache = createPolicyCache({ lists: 3, json: 1_000_000 });
    for (let i = 0; i < 10; i++) cache.remember(`org_${i}`, { version: 1, compiled, size: 1 });
    expect(cache.usage()).toEqual({ lists: 3, json: 3 });
    expect(cache.find("org_9")).toBeDefined();
  });
});

describe("the service's cache of lists in force", () => {
  /** A deny rule naming 100 agents: about 2 KiB of JSON per organisation. */
  const listOf = (organisationId: string) => [
    {
      id: "named",
      effect: "deny",
      match: { agents: Array.from({ length: 100 }, (_, i) => `${organisationId}-agent-${i}`) },
    },
  ];
  const call = (organisationId: string, agent: string): PolicyCall => ({
    agentId: "cli_0123456789abcdef",
    agentName: `${organisationId}-${agent}`,
    item: "K",
    host: "h.test",
    method: "GET",
    path: "/",
    environment: "e",
  });

  it("holds at most its budget of stored JSON however many organisations call, and decides as before", async () => {
    let reads = 0;
    const repo = {
      findPolicyIfChanged: async (organisationId: string) => {
        reads += 1;
        return { version: 1, rules: listOf(organisationId) };
      },
    } as unknown as PoliciesRepo;
    const budget = { lists: 10_000, json: 10_000 };
    const policies = createPoliciesService({
      repo,
      inTransaction: async () => {
        throw new Error("not used");
      },
      recordEvent: async () => {},
      rateLimiter: { take: async () => {}, check: async () => {} },
      findCallsBefore: async () => [],
      now: () => new Date("2026-11-26T06:00:00Z"),
      cacheBudget: budget,
    });
    for (let org = 0; org < 50; org++) {
      const id = `org_${org}`;
      expect((await policies.decideCall(id, call(id, "agent-7"), 1))?.rule.id).toBe("named");
      expect(await policies.decideCall(id, call(id, "agent-700"), 1)).toBeUndefined();
      const usage = policies.cacheUsage();
      expect(usage.json).toBeLessThanOrEqual(budget.json);
      expect(usage.lists).toBeGreaterThan(0);
    }
    expect(policies.cacheUsage().lists).toBeLessThan(10);
    // The most recent organisations are answered from memory; one that had to go is read again.
    const readsBefore = reads;
    await policies.decideCall("org_49", call("org_49", "agent-1"), 1);
    expect(reads).toBe(readsBefore);
    expect((await policies.decideCall("org_0", call("org_0", "agent-1"), 1))?.rule.id).toBe("named");
    expect(reads).toBe(readsBefore + 1);
  });
});
