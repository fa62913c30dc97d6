// OpenTelemetry for the egress proxy (DECISIONS "Ledger and telemetry"), set up once from config.
// Off unless OTEL_EXPORTER_OTLP_ENDPOINT is set: then no SDK module is loaded and each function
// below is one check of a variable (`bench:egress` measures the call path). On: spans go out over
// OTLP/HTTP (JSON) as service.name `latch-egress-proxy`, each Execute a child of the control
// plane's span through the W3C traceparent in the gRPC metadata.
//
// Attributes are names, hosts, addresses, methods, statuses and codes. Never the opened
// credential, a minted token, a header value or a body: this process holds plaintext, and the
// canary tests search the exporter's output for it.
import type { Attributes, Span, Tracer } from "@opentelemetry/api";

export const EGRESS_PROXY_SERVICE = "latch-egress-proxy";

/** A span begun where its end is somewhere else (a socket's connect callback). */
export interface OpenSpan {
  end(failure?: string): void;
}

export interface Telemetry {
  readonly enabled: boolean;
  /** Runs `fn` in a span, a child of the active one. */
  inSpan<T>(name: string, attributes: Attributes, fn: () => Promise<T>): Promise<T>;
  /** Runs `fn` in a server span whose parent is the caller's `traceparent` (or a new trace). */
  inCallerSpan<T>(
    name: string,
    traceparent: string | undefined,
    attributes: Attributes,
    fn: () => Promise<T>,
  ): Promise<T>;
  /** Begins a child of the active span, ended by the caller. */
  startSpan(name: string, attributes: Attributes): OpenSpan;
  /** Adds attributes to the active span. */
  annotate(attributes: Attributes): void;
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

const NO_SPAN: OpenSpan = { end: () => {} };

const OFF: Telemetry = {
  enabled: false,
  inSpan: (_name, _attributes, fn) => fn(),
  inCallerSpan: (_name, _traceparent, _attributes, fn) => fn(),
  startSpan: () => NO_SPAN,
  annotate: () => {},
  flush: async () => {},
  shutdown: async () => {},
};

let active: Telemetry = OFF;

/** The tier's telemetry: what startTelemetry set up, else the one that does nothing. */
export function telemetry(): Telemetry {
  return active;
}

/** Sets up the SDK when `endpoint` (OTEL_EXPORTER_OTLP_ENDPOINT, a base URL) is set. */
export async function startTelemetry(options: { endpoint: string | undefined }): Promise<Telemetry> {
  if (!options.endpoint) return OFF;
  const base = options.endpoint.replace(/\/+$/, "");
  const [api, traceSdk, traceExporter, resources, contextHooks, core] = await Promise.all([
    import("@opentelemetry/api"),
    import("@opentelemetry/sdk-trace"),
    import("@opentelemetry/exporter-trace-otlp-http"),
    import("@opentelemetry/resources"),
    import("@opentelemetry/context-async-hooks"),
    import("@opentelemetry/core"),
  ]);
  // Process-wide context (AsyncLocalStorage); this tier's own provider, never the global one.
  api.context.setGlobalContextManager(new contextHooks.AsyncLocalStorageContextManager().enable());
  const provider = new traceSdk.TracerProvider({
    resource: resources.resourceFromAttributes({ "service.name": EGRESS_PROXY_SERVICE }),
    spanProcessors: [
      new traceSdk.BatchSpanProcessor({
        exporter: new traceExporter.OTLPTraceExporter({ url: `${base}/v1/traces` }),
        scheduledDelayMillis: 1000,
      }),
    ],
  });
  const tracer: Tracer = provider.getTracer("latch");
  const propagator = new core.W3CTraceContextPropagator();

  const run = <T>(span: Span, fn: () => Promise<T>): Promise<T> =>
    fn().then(
      (value) => {
        span.end();
        return value;
      },
      (error: unknown) => {
        span.setStatus({ code: api.SpanStatusCode.ERROR, message: errorCode(error) });
        span.end();
        throw error;
      },
    );

  const enabled: Telemetry = {
    enabled: true,
    inSpan: (name, attributes, fn) => tracer.startActiveSpan(name, { attributes }, (span) => run(span, fn)),
    inCallerSpan(name, traceparent, attributes, fn) {
      // Only the caller's traceparent, never whatever context this socket happened to start in:
      // the parent of an Execute is the control plane span that sent it.
      const parent = traceparent
        ? propagator.extract(api.ROOT_CONTEXT, { traceparent }, api.defaultTextMapGetter)
        : api.ROOT_CONTEXT;
      return tracer.startActiveSpan(name, { attributes, kind: api.SpanKind.SERVER }, parent, (span) =>
        run(span, fn),
      );
    },
    startSpan(name, attributes) {
      const span = tracer.startSpan(name, { attributes }, api.context.active());
      return {
        end(failure) {
          if (failure) span.setStatus({ code: api.SpanStatusCode.ERROR, message: failure });
          span.end();
        },
      };
    },
    annotate(attributes) {
      api.trace.getSpan(api.context.active())?.setAttributes(attributes);
    },
    flush: () => provider.forceFlush(),
    async shutdown() {
      if (active === enabled) active = OFF;
      await provider.shutdown();
    },
  };
  active = enabled;
  return enabled;
}

/** An error's code for a span's status (our AppError's), never its message. */
function errorCode(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^[A-Za-z0-9_.-]{1,64}$/.test(code) ? code : "internal";
}
