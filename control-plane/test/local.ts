// The rig of the `vault serve` tests: a local vault in its own organisation on the test database,
// its loopback app on a free port, the official MCP SDK client as the agent, and the operator API.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { FastifyInstance } from "fastify";
import pino from "pino";
import { buildLocalApp } from "../src/local/local-app.ts";
import { createLocalMcpSessions } from "../src/local/local-mcp-sessions.ts";
import type { LocalTokens } from "../src/local/local-tokens.ts";
import { type LocalVault, openLocalVault } from "../src/local/local-vault.ts";
import { newTestOrganisation, testDatabase } from "./database.ts";
import { type EgressHarness, LogCapture } from "./egress-harness.ts";

export const LOCAL_TOKENS: LocalTokens = {
  operator: "lvo_test_operator_token",
  model: "lvm_test_model_token",
};

export interface LocalRig {
  vault: LocalVault;
  app: FastifyInstance;
  url: string;
}

/**
 * A local vault listening on a free loopback port; `sessionClock` drives MCP session idling, `now`
 * the vault's own clock (grants, limits).
 */
export async function startLocalVault(
  harness: EgressHarness,
  options: { logs?: LogCapture; sessionClock?: () => number; now?: () => Date } = {},
): Promise<LocalRig> {
  const database = await testDatabase();
  const logger = pino({ level: "debug" }, options.logs ?? new LogCapture());
  const vault = await openLocalVault({
    dataDir: harness.dataDir,
    logger,
    database,
    egress: { client: harness.client, sealingKey: async () => harness.proxy.sealingKey },
    organisationId: await newTestOrganisation(database),
    ...(options.now ? { now: options.now } : {}),
  });
  const sessions = createLocalMcpSessions(options.sessionClock ?? (() => Date.now()));
  const app = buildLocalApp({ vault, tokens: LOCAL_TOKENS, sessions, logger });
  const url = await app.listen({ host: "127.0.0.1", port: 0 });
  return { vault, app, url };
}

/** An MCP client with the model token; `name` becomes the agent id at initialize. */
export async function connectLocalAgent(url: string, name = "test-agent"): Promise<Client> {
  const client = new Client({ name, version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${LOCAL_TOKENS.model}` } },
    }),
  );
  return client;
}

/** The JSON payload of a tool answer (exactly one text item, spec 4.1). */
export function toolPayload(result: Awaited<ReturnType<Client["callTool"]>>): Record<string, unknown> {
  const content = result.content as { type: string; text: string }[];
  if (content.length !== 1) throw new Error(`a tool answer has ${content.length} content items, not 1`);
  return JSON.parse(content[0]!.text) as Record<string, unknown>;
}

/** The local operator API (spec 4.4) with the operator token. */
export async function localOperator<T = Record<string, unknown>>(
  rig: Pick<LocalRig, "url">,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: T }> {
  const response = await fetch(`${rig.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${LOCAL_TOKENS.operator}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, json: (await response.json()) as T };
}
