// OpenTelemetry across both tiers, as a collector sees it: one agent call over MCP is one trace,
// from the control plane's tool call (with its coverage decision) through the Execute call to the
// proxy (W3C traceparent in the gRPC metadata) and the proxy's DNS, connect and origin-answer
// spans, with the audit row exported as a log record in that trace and its trace id stored on the
// row. The canary is nowhere in the export.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { telemetry as egressTelemetry } from "../../egress-proxy/src/telemetry.ts";
import { telemetry } from "../src/telemetry.ts";
import { connectAgent, type HostedHarness, listenHosted, operatorWithClient, toolAnswer } from "./hosted.ts";
import { type OtlpReceiver, startOtlpReceiver } from "./otlp-receiver.ts";

const CANARY = "cnry_otel_7a6b5c4d3e2f1a0b9c8d";

let otlp: OtlpReceiver;
let h: HostedHarness;
let url: string;

beforeAll(async () => {
  otlp = await startOtlpReceiver();
  ({ h, url } = await listenHosted(
    (req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ echoed: req.headers.authorization ?? null }));
    },
    { otlpEndpoint: otlp.url },
  ));
}, 60_000);

afterAll(async () => {
  await h.close();
  await otlp.close();
});

describe("OpenTelemetry", () => {
  it("makes one agent call one trace across both tiers, with the audit row as a log record in it", async () => {
    const { op, token } = await operatorWithClient(h, {
      secret: CANARY,
      items: [{ name: "OTEL_KEY" }],
      clientName: "traced agent",
    });
    const agent = await connectAgent(url, token, "traced-agent");
    const call = { method: "GET", path: "/v1/traced?page=2", item_name: "OTEL_KEY" };
    const pending = toolAnswer(await agent.callTool({ name: "http_request", arguments: call }));
    expect(pending.status).toBe("pending");
    await op.request("POST", `/api/grants/${pending.grant_id}/approve`, { policy: "prompt" });
    const answered = toolAnswer(await agent.callTool({ name: "http_request", arguments: call }));
    expect(answered.origin_status).toBe(200);
    await agent.close();
    await Promise.all([telemetry().flush(), egressTelemetry().flush()]);

    const spans = otlp.spans();
    const execute = spans.find((s) => s.service === "latch-egress-proxy" && s.name.includes("Execute"));
    expect(execute, "the proxy's Execute span").toBeDefined();
    const trace = spans.filter((s) => s.traceId === execute!.traceId);
    const tool = trace.find((s) => s.service === "latch-control-plane" && s.name.includes("http_request"));
    expect(tool, "the control plane's tool call span in the same trace").toBeDefined();
    expect(tool!.attributes).toMatchObject({ "latch.coverage": "covered", "latch.grant.policy": "prompt" });
    // The proxy span is the child of the control plane's Execute client span, which is the tool's.
    const client = trace.find((s) => s.service === "latch-control-plane" && s.name.includes("Execute"));
    expect(client!.parentSpanId).toBe(tool!.spanId);
    expect(execute!.parentSpanId).toBe(client!.spanId);
    const proxySpans = trace.filter((s) => s.service === "latch-egress-proxy");
    for (const name of ["DNS", "connect", "origin answer"]) {
      expect(
        proxySpans.map((s) => s.name),
        `a ${name} span in the trace`,
      ).toContain(name);
    }
    expect(proxySpans.find((s) => s.name === "origin answer")!.attributes).toMatchObject({
      "http.response.status_code": 200,
      "server.address": "api.latch.test",
    });

    // The audit row: a log record in the trace, body its action, its fields as attributes.
    const records = otlp.logRecords().filter((r) => r.body === "http_request");
    const record = records.find((r) => r.traceId === execute!.traceId);
    expect(record, "the audit log record in the trace").toBeDefined();
    expect(record!.service).toBe("latch-control-plane");
    expect(record!.attributes).toMatchObject({
      action: "http_request",
      item_name: "OTEL_KEY",
      trace_id: execute!.traceId,
    });
    const row = await h.plane.database.db
      .selectFrom("audit_events")
      .select(["trace_id", "seq", "item_name"])
      .where("action", "=", "http_request")
      // The trace id is this run's alone; a database that ran the suite before holds other
      // OTEL_KEY rows of other organisations.
      .where("trace_id", "=", execute!.traceId)
      .executeTakeFirstOrThrow();
    expect(row.item_name).toBe("OTEL_KEY");
    expect(Number(record!.attributes.seq)).toBe(Number(row.seq));

    // The first call (approval needed) was a trace of its own, its decision on its span.
    const asked = spans.find(
      (s) => s.name.includes("http_request") && s.attributes["latch.coverage"] === "approval_needed",
    );
    expect(asked?.traceId).not.toBe(execute!.traceId);

    const exported = otlp.raw.join("\n");
    for (const form of [CANARY, Buffer.from(CANARY).toString("base64"), CANARY.slice(5, 21), token]) {
      expect(exported.includes(form), `the export contains ${form}`).toBe(false);
    }
    expect(exported).not.toContain("page=2");
  });
});
