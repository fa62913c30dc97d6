// A push is a notice, never a step of the request that caused it: whichever part fails mid-way
// (the database before or after the push service took it, the egress proxy), pushApprovalRequest
// answers what became of each device and never throws, and a device is deleted only on the push
// service's own 404 or 410.
import { createECDH, randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import webpush from "web-push";
import type { PushRepo, PushSubscriptionRow } from "./push.repo.ts";
import { createPushService, MAX_PUSHES_IN_FLIGHT, type PushServiceDeps } from "./push.service.ts";

const HOST = "fcm.googleapis.com";

function subscription(id: string): PushSubscriptionRow {
  const ecdh = createECDH("prime256v1");
  ecdh.generateKeys();
  return {
    id,
    operator_id: "op_1",
    endpoint: `https://${HOST}/fcm/send/${id}`,
    p256dh: ecdh.getPublicKey().toString("base64url"),
    auth: randomBytes(16).toString("base64url"),
    created_at: new Date(0),
    last_pushed_at: null,
    session_id: null,
  };
}

const payload = {
  grant_id: "gr_1",
  agent: "agent",
  item: "API_KEY",
  method: "POST",
  host: "api.example.com",
  path: "/v1/x",
  url: "https://latch.example/console#inbox?grant=gr_1",
};

function harness(options: {
  rows: PushSubscriptionRow[];
  statusOf?: (id: string) => number | Error;
  repo?: Partial<PushRepo>;
  findApprovers?: PushServiceDeps["findApprovers"];
  sendPush?: PushServiceDeps["egress"]["sendPush"];
}) {
  const deleted: string[] = [];
  const warnings: unknown[] = [];
  const repo: PushRepo = {
    upsertSubscription: async (row) => row,
    findSubscriptionsOf: async () => options.rows,
    deleteOwnSubscription: async () => true,
    deleteSubscription: async (id) => void deleted.push(id),
    deleteOldestBeyond: async () => {},
    updatePushed: async () => {},
    ...options.repo,
  };
  const service = createPushService({
    repo,
    keys: webpush.generateVAPIDKeys(),
    subject: "mailto:ops@latch.example",
    allowedHosts: [HOST],
    egress: {
      sendPush:
        options.sendPush ??
        (async (ticket) => {
          const id = (ticket as unknown as { id: string }).id;
          const status = options.statusOf?.(id) ?? 201;
          if (status instanceof Error) throw status;
          return {
            reachedOrigin: true,
            originStatus: status,
            error: undefined,
            durationMs: 1,
            retryAfterS: 0,
          };
        }),
    },
    // The ticket is the row's id here: what the fake proxy needs to answer per device.
    minter: { mintPushTicket: (spec) => ({ id: spec.path.split("/").at(-1) }) as never },
    findApprovers: options.findApprovers ?? (async () => ["op_1"]),
    logger: { info: () => {}, warn: (fields: unknown) => void warnings.push(fields) },
    now: () => new Date(),
  });
  return { service, deleted, warnings };
}

describe("pushApprovalRequest when a part fails", () => {
  it("the database gone before the push: no push, no throw, a warning", async () => {
    const { service, warnings } = harness({
      rows: [subscription("a")],
      findApprovers: async () => {
        throw new Error("connection terminated");
      },
    });
    await expect(service.pushApprovalRequest("org_1", payload)).resolves.toEqual([]);
    expect(warnings).toHaveLength(1);
  });

  it("the egress proxy gone for one device: that one failed, the other sent, nothing deleted", async () => {
    const { service, deleted } = harness({
      rows: [subscription("a"), subscription("b")],
      statusOf: (id) => (id === "a" ? new Error("14 UNAVAILABLE: No connection established") : 201),
    });
    await expect(service.pushApprovalRequest("org_1", payload)).resolves.toEqual(["failed", "sent"]);
    expect(deleted).toEqual([]);
  });

  it("the database gone after the push service took it: failed, no throw, the device kept", async () => {
    const { service, deleted, warnings } = harness({
      rows: [subscription("a")],
      repo: {
        updatePushed: async () => {
          throw new Error("connection terminated");
        },
      },
    });
    await expect(service.pushApprovalRequest("org_1", payload)).resolves.toEqual(["failed"]);
    expect(deleted).toEqual([]);
    expect(warnings).toHaveLength(1);
  });

  it("the database gone while deleting a 410 device: failed, no throw", async () => {
    const { service } = harness({
      rows: [subscription("a")],
      statusOf: () => 410,
      repo: {
        deleteSubscription: async () => {
          throw new Error("connection terminated");
        },
      },
    });
    await expect(service.pushApprovalRequest("org_1", payload)).resolves.toEqual(["failed"]);
  });

  it("only 404 and 410 delete a device; 429 and 500 keep it", async () => {
    const statuses: Record<string, number> = { a: 404, b: 410, c: 429, d: 500, e: 201 };
    const { service, deleted } = harness({
      rows: Object.keys(statuses).map(subscription),
      statusOf: (id) => statuses[id]!,
    });
    await expect(service.pushApprovalRequest("org_1", payload)).resolves.toEqual([
      "gone",
      "gone",
      "failed",
      "failed",
      "sent",
    ]);
    expect(deleted).toEqual(["a", "b"]);
  });
});

describe("pushApprovalRequest against a push service that hangs", () => {
  /** A proxy whose pushes answer only when the test lets them, counting those in flight. */
  function hangingProxy() {
    const held: (() => void)[] = [];
    const counts = { inFlight: 0, most: 0, sent: 0 };
    const sendPush: PushServiceDeps["egress"]["sendPush"] = async () => {
      counts.inFlight++;
      counts.most = Math.max(counts.most, counts.inFlight);
      await new Promise<void>((resolve) => held.push(resolve));
      counts.inFlight--;
      counts.sent++;
      return { reachedOrigin: true, originStatus: 201, error: undefined, durationMs: 1, retryAfterS: 0 };
    };
    /** Lets every push in flight answer, and waits for those that took their places to start. */
    const answerAll = async () => {
      for (const answer of held.splice(0)) answer();
      await new Promise((resolve) => setImmediate(resolve));
    };
    return { sendPush, counts, answerAll };
  }

  it("takes at most MAX_PUSHES_IN_FLIGHT of the organisation's egress places, across its requests, and sends every push in turn", async () => {
    const proxy = hangingProxy();
    const rows = Array.from({ length: 30 }, (_, i) => subscription(`d${i}`));
    const { service } = harness({ rows, sendPush: proxy.sendPush });
    // Two requests of one organisation at once: 60 devices to reach, 8 at a time.
    const first = service.pushApprovalRequest("org_1", payload);
    const second = service.pushApprovalRequest("org_1", payload);
    await new Promise((resolve) => setImmediate(resolve));
    expect(proxy.counts.inFlight).toBe(MAX_PUSHES_IN_FLIGHT);
    while (proxy.counts.sent < 60) {
      await proxy.answerAll();
      expect(proxy.counts.inFlight).toBeLessThanOrEqual(MAX_PUSHES_IN_FLIGHT);
    }
    expect(proxy.counts.most).toBe(MAX_PUSHES_IN_FLIGHT);
    expect(await first).toEqual(rows.map(() => "sent"));
    expect(await second).toEqual(rows.map(() => "sent"));
  });

  it("does not hold another organisation's pushes behind one organisation's", async () => {
    const proxy = hangingProxy();
    const rows = Array.from({ length: 20 }, (_, i) => subscription(`e${i}`));
    const { service } = harness({ rows, sendPush: proxy.sendPush });
    const busy = service.pushApprovalRequest("org_busy", payload);
    const other = service.pushApprovalRequest("org_other", payload);
    await new Promise((resolve) => setImmediate(resolve));
    expect(proxy.counts.inFlight).toBe(2 * MAX_PUSHES_IN_FLIGHT);
    while (proxy.counts.sent < 40) await proxy.answerAll();
    expect(await busy).toHaveLength(20);
    expect(await other).toHaveLength(20);
  });

  it("a push that fails gives its place to the next", async () => {
    const rows = Array.from({ length: 3 * MAX_PUSHES_IN_FLIGHT }, (_, i) => subscription(`f${i}`));
    const { service } = harness({ rows, statusOf: () => new Error("14 UNAVAILABLE") });
    await expect(service.pushApprovalRequest("org_1", payload)).resolves.toEqual(rows.map(() => "failed"));
  });
});
