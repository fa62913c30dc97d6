// An OTLP/HTTP receiver in the test process: what both tiers export (JSON, as the OTLP/HTTP
// exporters send it), kept as raw text for leak searches and parsed into spans and log records.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { gunzipSync } from "node:zlib";

export interface ReceivedSpan {
  service: string;
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  attributes: Record<string, unknown>;
}

export interface ReceivedLogRecord {
  service: string;
  body: unknown;
  traceId: string;
  attributes: Record<string, unknown>;
}

export interface OtlpReceiver {
  /** The base URL to give as OTEL_EXPORTER_OTLP_ENDPOINT. */
  url: string;
  /** Every request body received, as text. */
  raw: string[];
  spans(): ReceivedSpan[];
  logRecords(): ReceivedLogRecord[];
  close(): Promise<void>;
}

interface KeyValue {
  key: string;
  value: Record<string, unknown>;
}

const anyValue = (value: Record<string, unknown> | undefined): unknown =>
  value === undefined ? undefined : (Object.values(value)[0] as unknown);

const attributesOf = (list: KeyValue[] | undefined) =>
  Object.fromEntries((list ?? []).map((a) => [a.key, anyValue(a.value)]));

const serviceOf = (resource: { attributes?: KeyValue[] } | undefined) =>
  String(attributesOf(resource?.attributes)["service.name"] ?? "");

/** OTLP/JSON ids are hex; some exporters send base64 (the protobuf JSON mapping). */
const hexId = (id: unknown) =>
  typeof id === "string" && /^[0-9a-f]*$/.test(id)
    ? id
    : Buffer.from(String(id ?? ""), "base64").toString("hex");

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const raw: string[] = [];
  const traces: unknown[] = [];
  const logs: unknown[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      let body = Buffer.concat(chunks);
      if (req.headers["content-encoding"] === "gzip") body = gunzipSync(body);
      const text = body.toString("utf8");
      raw.push(text);
      try {
        if (req.url === "/v1/traces") traces.push(JSON.parse(text));
        if (req.url === "/v1/logs") logs.push(JSON.parse(text));
      } catch {
        // Kept in `raw` all the same; a protobuf body would be searched as bytes.
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    raw,
    spans: () =>
      traces.flatMap((t) =>
        ((t as { resourceSpans?: unknown[] }).resourceSpans ?? []).flatMap((rs) => {
          const { resource, scopeSpans } = rs as {
            resource?: { attributes?: KeyValue[] };
            scopeSpans?: unknown[];
          };
          return (scopeSpans ?? []).flatMap((ss) =>
            ((ss as { spans?: Record<string, unknown>[] }).spans ?? []).map((span) => ({
              service: serviceOf(resource),
              name: String(span.name),
              traceId: hexId(span.traceId),
              spanId: hexId(span.spanId),
              parentSpanId: hexId(span.parentSpanId),
              attributes: attributesOf(span.attributes as KeyValue[]),
            })),
          );
        }),
      ),
    logRecords: () =>
      logs.flatMap((l) =>
        ((l as { resourceLogs?: unknown[] }).resourceLogs ?? []).flatMap((rl) => {
          const { resource, scopeLogs } = rl as {
            resource?: { attributes?: KeyValue[] };
            scopeLogs?: unknown[];
          };
          return (scopeLogs ?? []).flatMap((sl) =>
            ((sl as { logRecords?: Record<string, unknown>[] }).logRecords ?? []).map((record) => ({
              service: serviceOf(resource),
              body: anyValue(record.body as Record<string, unknown>),
              traceId: hexId(record.traceId),
              attributes: attributesOf(record.attributes as KeyValue[]),
            })),
          );
        }),
      ),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
