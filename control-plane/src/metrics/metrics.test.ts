// The egress client as the metrics time it: every RPC the control plane sends a proxy, by method
// and outcome (ok or the error's code), so an outage of any of them shows on the dashboard.
import { describe, expect, it } from "vitest";
import type { EgressClient } from "../egress/egress-client.ts";
import { createControlPlaneMetrics } from "./metrics.ts";

/** A client whose every RPC answers at once, or fails with `code` when `fails` names it. */
function egressAnswering(fails: ReadonlySet<string>): EgressClient {
  const rpc = (name: string) => async () => {
    if (fails.has(name)) throw Object.assign(new Error(`${name} failed`), { code: "egress_unavailable" });
    return {};
  };
  return {
    execute: rpc("execute"),
    resolve: rpc("resolve"),
    fetchDocument: rpc("fetchDocument"),
    sendPush: rpc("sendPush"),
    getInfo: rpc("getInfo"),
    fence: rpc("fence"),
    rewrap: rpc("rewrap"),
    isHealthy: async () => true,
    replicaStates: () => ["serving"],
    close: async () => {},
  } as unknown as EgressClient;
}

/** The count of one series of latch_egress_rpc_duration_seconds, 0 when absent. */
function timedCount(text: string, method: string, outcome: string): number {
  const line = `latch_egress_rpc_duration_seconds_count{method="${method}",outcome="${outcome}"}`;
  const found = text.split("\n").find((l) => l.startsWith(`${line} `));
  return found ? Number(found.slice(line.length + 1)) : 0;
}

describe("instrumentEgress", () => {
  it("times every RPC by method and outcome", async () => {
    const metrics = createControlPlaneMetrics();
    const ticket = {} as never;
    const client = metrics.instrumentEgress(egressAnswering(new Set(["fetchDocument", "sendPush"])));
    await client.execute(ticket, 1000);
    await client.resolve(ticket);
    await client.getInfo();
    await client.fence(ticket);
    await client.rewrap(ticket);
    await expect(client.fetchDocument(ticket, 1000)).rejects.toMatchObject({ code: "egress_unavailable" });
    await expect(client.sendPush(ticket, 1000)).rejects.toMatchObject({ code: "egress_unavailable" });

    const text = await metrics.render();
    for (const method of ["execute", "resolve", "get_info", "fence", "rewrap"]) {
      expect(timedCount(text, method, "ok"), method).toBe(1);
    }
    for (const method of ["fetch_document", "send_push"]) {
      expect(timedCount(text, method, "egress_unavailable"), method).toBe(1);
    }
    expect(text).toContain('latch_egress_replicas{state="serving"} 1');
  });
});
