// The control plane's Prometheus metrics (prom-client), served on their own listener
// (METRICS_LISTEN), never on the public port. Labels are route templates, tool names, outcome and
// error codes: never a path as sent, a host, a name or a value.
import { createServer, type Server } from "node:http";
import type { FastifyInstance } from "fastify";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";
import type { AuditEvent } from "../audit/audit.repo.ts";
import type { EgressClient } from "../egress/egress-client.ts";

export interface ControlPlaneMetrics {
  registry: Registry;
  /** One HTTP request answered: its route template (`unmatched` when none), method, status. */
  observeRequest(route: string, method: string, status: number, seconds: number): void;
  /** One MCP tool call answered: the tool and its outcome (a status or an error code). */
  countToolCall(tool: string, outcome: string): void;
  /** Every audit row written; approvals are counted from their decisions. */
  countAuditEvent(event: Pick<AuditEvent, "action"> & { detail?: Record<string, unknown> }): void;
  /** The egress client, timed per RPC and outcome; its replicas counted by state. */
  instrumentEgress(client: EgressClient): EgressClient;
  render(): Promise<string>;
}

/** The audit actions that are approval decisions, and the outcome each one counts as. */
const APPROVAL_OUTCOMES: Record<string, string> = {
  grant_requested: "requested",
  grant_approved: "approved",
  auto_approved: "auto_approved",
  grant_revoked: "revoked",
  grant_denied: "denied",
};

/** A label value from a code-like string: anything else becomes `other` (no free text in labels). */
function codeLabel(value: unknown): string {
  return typeof value === "string" && /^[a-z0-9_]{1,40}$/.test(value) ? value : "other";
}

export function createControlPlaneMetrics(): ControlPlaneMetrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: "latch_control_plane_" });
  const requests = new Counter({
    name: "latch_http_requests_total",
    help: "HTTP requests answered, by route template, method and status.",
    labelNames: ["route", "method", "status"] as const,
    registers: [registry],
  });
  const requestSeconds = new Histogram({
    name: "latch_http_request_duration_seconds",
    help: "Time to answer an HTTP request, by route template.",
    labelNames: ["route", "method"] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const toolCalls = new Counter({
    name: "latch_mcp_tool_calls_total",
    help: "MCP tool calls, by tool and outcome (the answer's status or error code).",
    labelNames: ["tool", "outcome"] as const,
    registers: [registry],
  });
  const approvals = new Counter({
    name: "latch_approvals_total",
    help: "Approval decisions: requested, approved (by policy), auto_approved, denied, revoked.",
    labelNames: ["outcome", "policy"] as const,
    registers: [registry],
  });
  const unanswered = new Counter({
    name: "latch_unanswered_calls_total",
    help: "http_request calls whose proxy never answered, by outcome: call_not_sent (fenced, or refused unspent by a proxy started after the ticket was issued: the approval given back) or call_outcome_unknown (a proxy took the ticket; the approval stays spent).",
    labelNames: ["outcome"] as const,
    registers: [registry],
  });
  const egressSeconds = new Histogram({
    name: "latch_egress_rpc_duration_seconds",
    help: "Time of one gRPC call to the egress proxy, by method and outcome (ok or the error code).",
    labelNames: ["method", "outcome"] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });

  // Read when scraped: the balancer's view of every replica the service name resolves to.
  let replicaSource: EgressClient | undefined;
  new Gauge({
    name: "latch_egress_replicas",
    help: "Egress proxy replicas by state as this control plane sees them: serving (taking calls), not_serving (draining or failing its health check), unreachable.",
    labelNames: ["state"] as const,
    registers: [registry],
    collect() {
      const counts = { serving: 0, not_serving: 0, unreachable: 0 };
      for (const state of replicaSource?.replicaStates() ?? []) counts[state] += 1;
      for (const [state, count] of Object.entries(counts)) this.set({ state }, count);
    },
  });

  async function timed<T>(method: string, run: () => Promise<T>): Promise<T> {
    const end = egressSeconds.startTimer({ method });
    try {
      const result = await run();
      end({ outcome: "ok" });
      return result;
    } catch (error) {
      end({ outcome: codeLabel((error as { code?: unknown }).code) });
      throw error;
    }
  }

  return {
    registry,
    observeRequest(route, method, status, seconds) {
      requests.inc({ route, method, status: String(status) });
      requestSeconds.observe({ route, method }, seconds);
    },
    countToolCall: (tool, outcome) => toolCalls.inc({ tool: codeLabel(tool), outcome: codeLabel(outcome) }),
    countAuditEvent(event) {
      if (event.action === "call_not_sent" || event.action === "call_outcome_unknown") {
        unanswered.inc({ outcome: event.action });
      }
      const outcome = APPROVAL_OUTCOMES[event.action];
      if (!outcome) return;
      approvals.inc({ outcome, policy: event.detail?.policy ? codeLabel(event.detail.policy) : "" });
    },
    instrumentEgress(client) {
      replicaSource = client;
      return {
        ...client,
        execute: (ticket, deadlineMs, context) =>
          timed("execute", () => client.execute(ticket, deadlineMs, context)),
        resolve: (ticket, context) => timed("resolve", () => client.resolve(ticket, context)),
        // A single sign-on's discovery and keys, the DNS proof of its domains and a client metadata
        // document all go out as FetchDocument: an outage there shows here, as the calls' does.
        fetchDocument: (ticket, deadlineMs) =>
          timed("fetch_document", () => client.fetchDocument(ticket, deadlineMs)),
        sendPush: (ticket, deadlineMs) => timed("send_push", () => client.sendPush(ticket, deadlineMs)),
        getInfo: () => timed("get_info", () => client.getInfo()),
        fence: (ticket) => timed("fence", () => client.fence(ticket)),
        rewrap: (ticket) => timed("rewrap", () => client.rewrap(ticket)),
      };
    },
    render: () => registry.metrics(),
  };
}

/** Serves GET /metrics on `host:port`; resolves once listening. */
export async function serveMetrics(metrics: ControlPlaneMetrics, listen: string): Promise<Server> {
  const at = listen.lastIndexOf(":");
  const server = createServer((req, res) => {
    if (req.url !== "/metrics") return res.writeHead(404).end();
    metrics.render().then(
      (text) => res.writeHead(200, { "content-type": metrics.registry.contentType }).end(text),
      () => res.writeHead(500).end(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(Number(listen.slice(at + 1)), listen.slice(0, at).replace(/^\[|\]$/g, ""), resolve);
  });
  return server;
}

/** Counts every answered HTTP request by its route template (never the path as sent). */
export function registerHttpMetrics(
  app: FastifyInstance,
  metrics: Pick<ControlPlaneMetrics, "observeRequest">,
): void {
  app.addHook("onResponse", async (request, reply) => {
    const route = request.routeOptions.url ?? "unmatched";
    metrics.observeRequest(route, request.method, reply.statusCode, reply.elapsedTime / 1000);
  });
}

/** The outcome label of a tool answer: its error code, else its status, else ok/error. */
export function toolOutcome(payload: Record<string, unknown>, isError: boolean | undefined): string {
  const error = payload.error as { code?: unknown } | undefined;
  if (typeof error?.code === "string") return error.code;
  if (typeof payload.status === "string") return payload.status;
  return isError ? "error" : "ok";
}

/** The tools' `onToolAnswer` for these metrics (none without metrics). */
export function observeToolAnswer(
  metrics: Pick<ControlPlaneMetrics, "countToolCall"> | undefined,
): ((tool: string, payload: Record<string, unknown>, isError: boolean | undefined) => void) | undefined {
  if (!metrics) return undefined;
  return (tool, payload, isError) => metrics.countToolCall(tool, toolOutcome(payload, isError));
}
