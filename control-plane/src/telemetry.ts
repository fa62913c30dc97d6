// OpenTelemetry for the control plane (DECISIONS "Ledger and telemetry"), set up once from config.
// Off unless OTEL_EXPORTER_OTLP_ENDPOINT is set: then no SDK module is even loaded, and every
// function below is one check of a variable. On: spans and log records go out over OTLP/HTTP
// (JSON) as service.name `latch-control-plane`.
//
// What may be an attribute: names, hosts, methods, codes, counts, decisions, ids. Never a
// credential, a token, a bearer, a body or a query string (the canary tests search the exporter's
// output for them).

import type { LedgerRow } from "@latch/shared/ledger/ledger-format";
import type { Attributes, Context, Logger as OtelLogger, Span, SpanKind, Tracer } from "@opentelemetry/api";

export const CONTROL_PLANE_SERVICE = "latch-control-plane";

export interface Telemetry {
  readonly enabled: boolean;
  /** Runs `fn` in a span, a child of the active one (or the root of a new trace). */
  inSpan<T>(
    name: string,
    attributes: Attributes,
    fn: () => Promise<T>,
    options?: { kind?: "client" },
  ): Promise<T>;
  /** Adds attributes to the active span (the coverage decision of a tool call). */
  annotate(attributes: Attributes): void;
  /** The active trace id (32 hex), stored on the audit row. */
  traceId(): string | undefined;
  /** The W3C traceparent of the active span, for the gRPC metadata of a call to the proxy. */
  traceparent(): string | undefined;
  /** The audit row as a log record in the active trace: body the action, attributes its fields. */
  emitAuditRow(row: LedgerRow): void;
  /** Sends what is buffered (tests; shutdown). */
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

const OFF: Telemetry = {
  enabled: false,
  inSpan: (_name, _attributes, fn) => fn(),
  annotate: () => {},
  traceId: () => undefined,
  traceparent: () => undefined,
  emitAuditRow: () => {},
  flush: async () => {},
  shutdown: async () => {},
};

let active: Telemetry = OFF;

/** The tier's telemetry: what startTelemetry set up, else the one that does nothing. */
export function telemetry(): Telemetry {
  return active;
}

/**
 * Sets up the SDK when `endpoint` is set (OTEL_EXPORTER_OTLP_ENDPOINT, the base URL: /v1/traces
 * and /v1/logs are appended as the OTLP specification says). The exporters also read the
 * standard OTEL_EXPORTER_OTLP_HEADERS and timeout variables.
 */
export async function startTelemetry(options: {
  endpoint: string | undefined;
  serviceName?: string;
}): Promise<Telemetry> {
  if (!options.endpoint) return OFF;
  const base = options.endpoint.replace(/\/+$/, "");
  const [api, traceSdk, logsSdk, traceExporter, logsExporter, resources, contextHooks, core] =
    await Promise.all([
      import("@opentelemetry/api"),
      import("@opentelemetry/sdk-trace"),
      import("@opentelemetry/sdk-logs"),
      import("@opentelemetry/exporter-trace-otlp-http"),
      import("@opentelemetry/exporter-logs-otlp-http"),
      import("@opentelemetry/resources"),
      import("@opentelemetry/context-async-hooks"),
      import("@opentelemetry/core"),
    ]);
  // The context manager is process-wide (an AsyncLocalStorage); the providers are this tier's
  // own, never the global ones, so two tiers in one process (tests) keep their service names.
  api.context.setGlobalContextManager(new contextHooks.AsyncLocalStorageContextManager().enable());
  const resource = resources.resourceFromAttributes({
    "service.name": options.serviceName ?? CONTROL_PLANE_SERVICE,
  });
  const tracerProvider = new traceSdk.TracerProvider({
    resource,
    spanProcessors: [
      new traceSdk.BatchSpanProcessor({
        exporter: new traceExporter.OTLPTraceExporter({ url: `${base}/v1/traces` }),
        scheduledDelayMillis: 1000,
      }),
    ],
  });
  const loggerProvider = new logsSdk.LoggerProvider({
    resource,
    processors: [
      new logsSdk.BatchLogRecordProcessor({
        exporter: new logsExporter.OTLPLogExporter({ url: `${base}/v1/logs` }),
        scheduledDelayMillis: 1000,
      }),
    ],
  });
  const tracer: Tracer = tracerProvider.getTracer("latch");
  const auditLogger: OtelLogger = loggerProvider.getLogger("latch.audit");
  const propagator = new core.W3CTraceContextPropagator();
  const activeSpan = (): Span | undefined => api.trace.getSpan(api.context.active());

  const enabled: Telemetry = {
    enabled: true,
    inSpan(name, attributes, fn, spanOptions) {
      const kind: SpanKind = spanOptions?.kind === "client" ? api.SpanKind.CLIENT : api.SpanKind.INTERNAL;
      return tracer.startActiveSpan(name, { attributes, kind }, async (span) => {
        try {
          return await fn();
        } catch (error) {
          // The code only: a message may quote what the caller sent.
          span.setStatus({ code: api.SpanStatusCode.ERROR, message: errorCode(error) });
          throw error;
        } finally {
          span.end();
        }
      });
    },
    annotate(attributes) {
      activeSpan()?.setAttributes(attributes);
    },
    traceId() {
      const context = activeSpan()?.spanContext();
      return context && api.isSpanContextValid(context) ? context.traceId : undefined;
    },
    traceparent() {
      const carrier: Record<string, string> = {};
      propagator.inject(api.context.active(), carrier, api.defaultTextMapSetter);
      return carrier.traceparent;
    },
    emitAuditRow(row) {
      const attributes: Attributes = {};
      for (const [key, value] of Object.entries(row)) {
        if (value === null || value === undefined) continue;
        attributes[key] = typeof value === "object" ? JSON.stringify(value) : (value as string | number);
      }
      auditLogger.emit({
        severityNumber: api.SeverityNumber.INFO,
        severityText: "INFO",
        body: row.action,
        attributes,
        context: api.context.active() as Context,
      });
    },
    async flush() {
      await Promise.all([tracerProvider.forceFlush(), loggerProvider.forceFlush()]);
    },
    async shutdown() {
      if (active === enabled) active = OFF;
      await Promise.all([tracerProvider.shutdown(), loggerProvider.shutdown()]);
    },
  };
  active = enabled;
  return enabled;
}

/** An error's code for a span's status: our AppError's, a database error's SQLSTATE, else "internal". */
function errorCode(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[A-Za-z0-9_.-]{1,64}$/.test(code) ? code : "internal";
}
