// The floor for bench:hosted: the cheapest control plane this stack can build for one agent call,
// run as its own process so that its CPU is read like the control plane's. A bare Fastify route
// (POST /mcp) parses the same JSON-RPC body, makes the same database round trips through the
// same pool (the control plane's own repository calls over openDatabase: Kysely on one pg.Pool
// of 10: the bearer's client once, then per call the call's one read and the audit row), signs a
// call ticket with the control plane's minter, calls Execute on the same proxies with a bare
// grpc-js client (same mTLS files, same dns:/// name, round robin) and answers the JSON-RPC result.
//
// It does NOT check the bearer's shape, the route's principals, CSRF or the Origin wall, run MCP's
// method table or the tool's argument schema, validate the path or host, judge which grant
// covers the call, plan provider tokens, balance by health, fence, record metrics or log. Never
// a real control plane: loopback and benchmarks only.
//
//   node loadtest/lib/hosted-floor.ts   (environment: see `env` below; prints FLOOR_READY port=N)
import { readFileSync } from "node:fs";
import { credentials, Metadata, type ServiceError } from "@grpc/grpc-js";
import { type CallSpec, EgressProxyClient, type ExecuteResponse } from "@latch/proto/egress";
import { sha256Hex } from "@latch/shared/crypto/hash";
import Fastify from "fastify";
import { createLedgerRepo } from "../../control-plane/src/audit/ledger.repo.ts";
import { createCallContextRepo } from "../../control-plane/src/calls/call-context.repo.ts";
import { createClientsRepo } from "../../control-plane/src/clients/clients.repo.ts";
import { openDatabase } from "../../control-plane/src/db/database.ts";
import { loadOrCreateTicketKey } from "../../control-plane/src/egress/ticket-key.ts";
import { createTicketMinter } from "../../control-plane/src/egress/tickets.ts";
import { HTTP_REQUEST_TOOL } from "../../control-plane/src/grants/grant-scope.ts";

const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`hosted-floor: ${name} is not set`);
  return value;
};

const database = await openDatabase({
  databaseUrl: env("DATABASE_URL"),
  dataDir: "/nonexistent",
  migrate: false,
});
const clients = createClientsRepo(database.db);
const callContext = createCallContextRepo(database.db);
const ledger = createLedgerRepo(database.db);
/** Bearers found live, as the control plane remembers them (the call's read confirms them). */
const known = new Map<string, Awaited<ReturnType<typeof clients.findLiveClientByTokenHash>>>();
const minter = createTicketMinter({
  key: loadOrCreateTicketKey(env("DATA_DIR"), env("TICKET_SIGNING_KEY_FILE")),
  issuer: "http://localhost:8787",
  audience: process.env.EGRESS_AUDIENCE ?? "latch-egress",
});
const egress = new EgressProxyClient(
  env("EGRESS_URL"),
  credentials.createSsl(
    readFileSync(env("EGRESS_CLIENT_TLS_CA")),
    readFileSync(env("EGRESS_CLIENT_TLS_KEY")),
    readFileSync(env("EGRESS_CLIENT_TLS_CERT")),
  ),
  { "grpc.service_config": JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] }) },
);

function execute(organisationId: string, spec: CallSpec): Promise<ExecuteResponse> {
  const ticket = minter.mintCallTicket(spec, { organisationId, ttlMs: spec.timeoutMs + 1_500 });
  return new Promise((resolve, reject) =>
    egress.execute(
      { ticket },
      new Metadata(),
      { deadline: Date.now() + spec.timeoutMs + 1_500 },
      (error, answer) => (error ? reject(error as ServiceError) : resolve(answer!)),
    ),
  );
}

interface Frame {
  id?: unknown;
  method?: string;
  params?: { name?: string; arguments?: { method?: string; path?: string; item_name?: string } };
}

const app = Fastify();
app.post("/mcp", async (request, reply) => {
  const frame = request.body as Frame;
  const token = /^Bearer (.+)$/.exec(request.headers.authorization ?? "")?.[1] ?? "";
  const bearerHash = sha256Hex(token);
  const client = known.get(bearerHash) ?? (await clients.findLiveClientByTokenHash(bearerHash));
  if (!client) return reply.status(401).send({ error: { code: "unauthorized", message: "no" } });
  known.set(bearerHash, client);
  if (frame.method === "initialize") {
    return { jsonrpc: "2.0", id: frame.id, result: { protocolVersion: "2024-11-05", capabilities: {} } };
  }
  const args = frame.params?.arguments ?? {};
  // The control plane's one read: the client under its bearer, the item, its usable grants.
  const context = await callContext.findCallContext({
    organisationId: client.organisation_id,
    environment: client.environment,
    itemName: args.item_name ?? "",
    agentId: client.id,
    toolId: HTTP_REQUEST_TOOL,
    bearerHash,
    now: new Date(),
  });
  const item = context.items[0];
  if (!context.clientLive || !item)
    return reply.status(404).send({ error: { code: "not_found", message: "no" } });
  if (context.grantsOf(item.id).length === 0)
    return reply.status(403).send({ error: { code: "forbidden", message: "no grant" } });
  const host = item.allowedHosts[0]!;
  const answer = await execute(client.organisation_id, {
    credential: {
      itemName: item.name,
      keyId: item.sealingKeyId,
      sealedValue: Buffer.from(item.sealedValue),
      username: "",
    },
    inject: item.inject,
    host,
    allowedHosts: [...item.allowedHosts],
    method: args.method ?? "GET",
    path: args.path ?? "/",
    body: Buffer.alloc(0),
    contentType: "",
    timeoutMs: 10_000,
    headers: [],
    redact: [],
  });
  await ledger.appendEvent({
    organisationId: client.organisation_id,
    environment: client.environment,
    actor: `agent:${client.id}`,
    action: "http_request",
    itemName: item.name,
    host,
    detail: { method: args.method, path: args.path, origin_status: answer.originStatus },
  });
  const headers: Record<string, string> = {};
  for (const h of answer.headers) headers[h.name] = h.value;
  const text = JSON.stringify({
    origin_status: answer.originStatus,
    status: answer.originStatus,
    body: Buffer.from(answer.body).toString("utf8"),
    origin_headers: headers,
  });
  return { jsonrpc: "2.0", id: frame.id, result: { content: [{ type: "text", text }] } };
});
await app.listen({ host: "127.0.0.1", port: 0 });
process.stdout.write(`FLOOR_READY port=${(app.server.address() as { port: number }).port}\n`);
process.once("SIGTERM", () => {
  void app.close().then(() => database.close().then(() => process.exit(0)));
});
