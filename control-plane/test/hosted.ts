// Test harness for the hosted control plane: the real app on the worker's database, a real egress
// proxy, a real SMTP server that keeps every mail, a clock the test moves, and a small cookie jar
// that behaves like one browser.
import { randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { FastifyInstance, InjectOptions } from "fastify";
import * as OTPAuth from "otpauth";
import pino from "pino";
import { SMTPServer } from "smtp-server";
import type { OriginHandler } from "../../egress-proxy/test/origin.ts";
import { EMAIL_CODE_SENDS_PER_IP } from "../src/auth/email-code.service.ts";
import { loadConfig } from "../src/config.ts";
import { buildControlPlane, type ControlPlane } from "../src/control-plane.ts";
import type { OpenDatabase } from "../src/db/database.ts";
import { requestContextFields } from "../src/http/request-context.ts";
import { createMailer } from "../src/mail/mailer.ts";
import type { ControlPlaneMetrics } from "../src/metrics/metrics.ts";
import { testDatabase } from "./database.ts";
import { type EgressHarness, LogCapture, startEgressHarness } from "./egress-harness.ts";

export interface ReceivedMail {
  to: string;
  raw: string;
}

export interface SmtpInbox {
  port: number;
  mails: ReceivedMail[];
  /** While true, every recipient is refused (550), as a relay that is down for us would. */
  isRefusing: boolean;
  close(): Promise<void>;
}

/**
 * A received mail as its reader sees it: header lines unfolded, the quoted-printable body decoded
 * (soft line breaks joined, =XX bytes read as UTF-8).
 */
export function readableMail(mail: ReceivedMail): string {
  const unfolded = mail.raw.replace(/\r?\n(?=[ \t])/g, "");
  const joined = unfolded.replace(/=\r?\n/g, "");
  return joined.replace(/(?:=[0-9A-F]{2})+/g, (run) =>
    Buffer.from(run.replaceAll("=", ""), "hex").toString("utf8"),
  );
}

export async function startSmtpInbox(): Promise<SmtpInbox> {
  const mails: ReceivedMail[] = [];
  const inbox = { isRefusing: false };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ["STARTTLS", "AUTH"],
    logger: false,
    onRcptTo(_address, _session, callback) {
      callback(
        inbox.isRefusing ? Object.assign(new Error("mailbox unavailable"), { responseCode: 550 }) : undefined,
      );
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        const to = session.envelope.rcptTo.map((r) => r.address).join(",");
        mails.push({ to, raw: Buffer.concat(chunks).toString("utf8") });
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  const port = (server.server.address() as AddressInfo).port;
  return Object.assign(inbox, {
    port,
    mails,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  });
}

export interface HostedHarness {
  plane: ControlPlane;
  app: FastifyInstance;
  inbox: SmtpInbox;
  egress: EgressHarness;
  logs: LogCapture;
  clock: { now: Date; advance(ms: number): void };
  close(): Promise<void>;
}

/**
 * A hosted control plane. With `replicaOf`, a second instance sharing the first one's database,
 * DATA_DIR (keys), proxy, mail server and clock: two replicas behind one load balancer.
 */
export async function startHosted(
  options: {
    baseUrl?: string;
    replicaOf?: HostedHarness;
    /** Mail as a developer without SMTP_URL gets it: files in DATA_DIR/outbox, a pointer in the log. */
    isDevOutbox?: boolean;
    /** Prometheus metrics, wired as main.ts wires them (the egress client timed too). */
    metrics?: ControlPlaneMetrics;
    /** A database of the test's own (the multi-host test's PostgreSQL host). */
    database?: OpenDatabase;
    /** Real host names routed to the origin (fake providers; see egress-harness.ts). */
    providerHosts?: readonly string[];
    /** Host names whose connection is refused (see egress-harness.ts). */
    closedHosts?: readonly string[];
    /** More EGRESS_CONNECT_TO entries: TLS origins of the test's own (oidc-idp.ts). */
    connectTo?: readonly string[];
    /** TRUST_PROXY: the load balancers whose X-Forwarded-For names the caller. */
    trustProxy?: string;
    /** OTEL_EXPORTER_OTLP_ENDPOINT of both tiers (otlp-receiver.ts). */
    otlpEndpoint?: string;
    /** PUSH_SERVICE_HOSTS: push services the test's own origin stands in for. */
    pushServiceHosts?: string;
    /** SSO_DNS_URL: the test's DNS-over-HTTPS origin (doh-server.ts; its connect-to in `connectTo`). */
    ssoDnsUrl?: string;
    /** The proxy spends ticket ids in this database's table (EGRESS_REPLAY_DATABASE_URL). */
    replayDatabaseUrl?: string;
  } = {},
): Promise<HostedHarness> {
  const shared = options.replicaOf;
  const egress =
    shared?.egress ??
    (await startEgressHarness({
      ...(options.providerHosts ? { providerHosts: options.providerHosts } : {}),
      ...(options.closedHosts ? { closedHosts: options.closedHosts } : {}),
      ...(options.connectTo ? { connectTo: options.connectTo } : {}),
      ...(options.otlpEndpoint ? { otlpEndpoint: options.otlpEndpoint } : {}),
      ...(options.replayDatabaseUrl ? { replayDatabaseUrl: options.replayDatabaseUrl } : {}),
    }));
  const inbox = shared?.inbox ?? (await startSmtpInbox());
  const logs = new LogCapture();
  // The mixin of main.ts: each line written while serving a request names its request id.
  const logger = pino({ level: "debug", mixin: requestContextFields }, logs);
  const clock = shared?.clock ?? {
    now: new Date(),
    advance(ms: number) {
      clock.now = new Date(clock.now.getTime() + ms);
    },
  };
  const config = loadConfig({
    NODE_ENV: "test",
    BASE_URL: options.baseUrl ?? "http://localhost:8787",
    DATA_DIR: egress.dataDir,
    EGRESS_URL: `127.0.0.1:${egress.proxy.port}`,
    ...(options.trustProxy ? { TRUST_PROXY: options.trustProxy } : {}),
    ...(options.otlpEndpoint ? { OTEL_EXPORTER_OTLP_ENDPOINT: options.otlpEndpoint } : {}),
    ...(options.pushServiceHosts ? { PUSH_SERVICE_HOSTS: options.pushServiceHosts } : {}),
    ...(options.ssoDnsUrl ? { SSO_DNS_URL: options.ssoDnsUrl } : {}),
  });
  const plane = await buildControlPlane({
    config,
    dataDir: egress.dataDir,
    ticketKey: egress.ticketKey,
    egress: {
      client: options.metrics ? options.metrics.instrumentEgress(egress.client) : egress.client,
      sealingKey: async () => egress.proxy.sealingKey,
    },
    ...(options.metrics ? { metrics: options.metrics } : {}),
    logger,
    database: options.database ?? (await testDatabase()),
    mailer: createMailer({
      smtpUrl: options.isDevOutbox ? undefined : `smtp://127.0.0.1:${inbox.port}`,
      dataDir: egress.dataDir,
      logger,
    }),
    now: () => clock.now,
  });
  return {
    plane,
    app: plane.app,
    inbox,
    egress,
    logs,
    clock,
    async close() {
      await plane.close();
      if (shared) return;
      await inbox.close();
      await egress.close();
    },
  };
}

export function uniqueEmail(label = "op"): string {
  return `${label}-${randomBytes(5).toString("hex")}@example.test`;
}

/** The last 8-digit code mailed to `email`. */
export function lastCodeFor(inbox: SmtpInbox, email: string): string {
  const mail = inbox.mails.filter((m) => m.to === email).at(-1);
  const code = mail && /sign-(?:in|up) code is (\d{8})/.exec(mail.raw)?.[1];
  if (!code) throw new Error(`no code mailed to ${email}`);
  return code;
}

/**
 * Forgets the email-code sends counted for the client `address` (30 per 15 minutes per address): a
 * test whose pages really come from 127.0.0.1 (Chromium) starts from zero on a PostgreSQL database
 * that other test files and earlier runs used too.
 */
export async function forgetEmailCodeSends(address: string): Promise<void> {
  const { db } = await testDatabase();
  await db
    .deleteFrom("rate_limit_hits")
    .where("bucket", "=", `${EMAIL_CODE_SENDS_PER_IP.name}:${address}`)
    .execute();
}

/** One browser: keeps the cookies it is given and sends the CSRF header from its cookie. */
export class Browser {
  readonly cookies = new Map<string, string>();
  private readonly app: FastifyInstance;
  private readonly origin: string;
  /**
   * The address requests come from (app.inject's remoteAddress): per-address limits count it. Unless
   * given, a random one of 10.0.0.0/8 for this browser, as oauth-flow.ts's `register` does: the
   * limits of 127.0.0.1 (30 email codes per 15 minutes, say) are then never spent by tests that do
   * not test them (on PostgreSQL every test file, and every earlier run, shares the counts).
   */
  private readonly remoteAddress: string;
  constructor(app: FastifyInstance, origin = "http://localhost:8787", remoteAddress?: string) {
    this.app = app;
    this.origin = origin;
    const [a, b, c] = randomBytes(3);
    this.remoteAddress = remoteAddress ?? `10.${a}.${b}.${1 + (c! % 254)}`;
  }

  async request(
    method: "GET" | "POST" | "DELETE" | "PATCH" | "PUT",
    url: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ) {
    const csrf = this.cookies.get("__Host-latch_csrf") ?? this.cookies.get("latch_csrf");
    const options: InjectOptions = {
      method,
      url,
      headers: {
        origin: this.origin,
        ...(this.cookies.size ? { cookie: [...this.cookies].map(([k, v]) => `${k}=${v}`).join("; ") } : {}),
        ...(csrf && method !== "GET" ? { "x-csrf-token": csrf } : {}),
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...headers,
      },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    };
    const response = await this.app.inject({ ...options, remoteAddress: this.remoteAddress });
    for (const cookie of response.cookies as {
      name: string;
      value: string;
      maxAge?: number;
      expires?: Date;
    }[]) {
      const isCleared = cookie.value === "" || (cookie.expires && cookie.expires.getTime() < Date.now());
      if (isCleared) this.cookies.delete(cookie.name);
      else this.cookies.set(cookie.name, cookie.value);
    }
    return response;
  }
}

/**
 * The first step of a sign-in (or sign-up) by email code in `browser`: the code sent, the mailed
 * code given back. Throws unless it was accepted; the session is then past its first step.
 */
export async function signInWithEmailCode(
  h: Pick<HostedHarness, "inbox">,
  browser: Browser,
  email: string,
): Promise<Browser> {
  await browser.request("POST", "/api/auth/otp/send", { email });
  const verified = await browser.request("POST", "/api/auth/otp/verify", {
    email,
    otp: lastCodeFor(h.inbox, email),
  });
  if (verified.statusCode !== 200)
    throw new Error(`the email code of ${email} was refused: ${verified.body}`);
  return browser;
}

/**
 * A new account signed up through the JSON API with its authenticator enrolled, as the console
 * would: the browser (past the authenticator step), the email and the authenticator, for a test
 * that signs in again elsewhere (Chromium) or needs another code.
 */
export async function signUpOperator(
  h: Pick<HostedHarness, "app" | "inbox" | "clock">,
  options: { label?: string; origin?: string } = {},
): Promise<{ browser: Browser; email: string; totp: OTPAuth.TOTP }> {
  const browser = new Browser(h.app, options.origin);
  const email = uniqueEmail(options.label ?? "op");
  await signInWithEmailCode(h, browser, email);
  const started = (await browser.request("POST", "/api/auth/totp/start", {})).json();
  const totp = OTPAuth.URI.parse(started.otpauth_url) as OTPAuth.TOTP;
  const confirmed = await browser.request("POST", "/api/auth/totp/confirm", {
    code: totp.generate({ timestamp: h.clock.now.getTime() }),
  });
  if (confirmed.statusCode !== 200) throw new Error(`enrolment failed: ${confirmed.body}`);
  return { browser, email, totp };
}

/** A browser signed up through the JSON API and past the authenticator step: a ready operator. */
export async function readyOperator(
  h: Pick<HostedHarness, "app" | "inbox" | "clock">,
  label = "op",
  origin?: string,
): Promise<Browser> {
  return (await signUpOperator(h, { label, ...(origin ? { origin } : {}) })).browser;
}

/** An agent on the hosted MCP endpoint: the official SDK client holding a model token. */
export async function connectAgent(mcpBase: string, token: string, name = "hosted-agent"): Promise<Client> {
  const agent = new Client({ name, version: "1.0.0" });
  await agent.connect(
    new StreamableHTTPClientTransport(new URL(`${mcpBase}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${token}` } },
    }),
  );
  return agent;
}

/** The fields of a tool's answer (spec 2.8, 3.1) that the tests read. */
export interface ToolAnswer {
  status?: string;
  origin_status?: number;
  body?: string;
  grant_id?: string;
  need_id?: string;
  item_name?: string;
  approval_code?: string;
  collect_url?: string;
  notify_failed?: boolean;
  retry_after?: number;
  message?: string;
  next?: { for_model?: string };
  [field: string]: unknown;
}

/** Parses the JSON text a tool answers with. */
export function toolAnswer(result: Awaited<ReturnType<Client["callTool"]>>): ToolAnswer {
  return JSON.parse((result.content as { text: string }[])[0]!.text) as ToolAnswer;
}

/**
 * A signed-in operator with credentials stored (staging, api.latch.test unless an item says
 * otherwise) and a model client issued: a test's usual start. `origin` is the browser's Origin
 * (a test on a real port names its BASE_URL); the email and authenticator are for signing in again.
 */
export async function operatorWithClient(
  h: Pick<HostedHarness, "app" | "inbox" | "clock">,
  options: { secret: string; items: Record<string, unknown>[]; clientName: string; origin?: string },
): Promise<{ op: Browser; clientId: string; token: string; email: string; totp: OTPAuth.TOTP }> {
  const {
    browser: op,
    email,
    totp,
  } = await signUpOperator(h, {
    label: "op",
    ...(options.origin ? { origin: options.origin } : {}),
  });
  for (const item of options.items) {
    const created = await op.request("POST", "/api/items", {
      value: options.secret,
      environment: "staging",
      allowed_hosts: ["api.latch.test"],
      ...item,
    });
    if (created.statusCode !== 201) throw new Error(`storing ${String(item.name)} failed: ${created.body}`);
  }
  const issued = await op.request("POST", "/api/clients/model", {
    name: options.clientName,
    environment: "staging",
  });
  if (issued.statusCode !== 201) throw new Error(`issuing a model client failed: ${issued.body}`);
  const client = issued.json();
  return { op, clientId: client.client_id as string, token: client.token as string, email, totp };
}

/** The hosted plane listening on a loopback port (for MCP clients), its test origin answering with `handler`. */
export async function listenHosted(
  handler: OriginHandler,
  options: Parameters<typeof startHosted>[0] = {},
): Promise<{ h: HostedHarness; url: string }> {
  const h = await startHosted(options);
  const url = await h.app.listen({ host: "127.0.0.1", port: 0 });
  h.egress.setHandler(handler);
  return { h, url };
}

/**
 * A pending approval of API_KEY on api.latch.test asked by the model client `token` for a POST of
 * `path` (POST /api/grants/request, as an agent asks): its grant id.
 */
export async function askGrantAs(h: HostedHarness, token: string, path: string): Promise<string> {
  const answer = await h.app.inject({
    method: "POST",
    url: "/api/grants/request",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    payload: JSON.stringify({ item_name: "API_KEY", host: "api.latch.test", method: "POST", path }),
  });
  if (answer.statusCode !== 201)
    throw new Error(`asking a grant answered ${answer.statusCode}: ${answer.body}`);
  return answer.json().grant.grant_id as string;
}

/** The status of grant `id` as the operator `op` lists it (GET /api/grants), or undefined. */
export async function grantStatusOf(op: Browser, id: string): Promise<string | undefined> {
  const grants = (await op.request("GET", "/api/grants")).json().grants as {
    grant_id: string;
    status: string;
  }[];
  return grants.find((g) => g.grant_id === id)?.status;
}
