// GET /mcp keep-alive streams, who they are counted for and what they write: 8 per bearer (every
// member of an organisation using one OAuth app shares its client row, so the row is not the
// unit), 200 per organisation on a replica (one organisation cannot take the process's 2,000), and
// the minute's re-check of an open stream marks no use of its client (an idle stream is not an
// active agent in the Clients list). Real sockets; only setInterval is faked where a test says so.
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import {
  type Browser,
  type HostedHarness,
  operatorWithClient,
  readyOperator,
  startHosted,
} from "./hosted.ts";
import { approveAndExchange, register } from "./oauth/oauth-flow.ts";
import { joinAs } from "./teams.ts";

let h: HostedHarness;
let url: string;

beforeAll(async () => {
  h = await startHosted();
  url = await h.app.listen({ host: "127.0.0.1", port: 0 });
}, 60_000);
afterEach(() => {
  vi.useRealTimers();
});
afterAll(async () => {
  await h?.close();
});

interface Stream {
  status: number;
  body: unknown;
  close(): void;
  reader?: ReadableStreamDefaultReader<Uint8Array>;
}

/** GET /mcp with `token`: a stream left open (close() ends it), or a refusal read in full. */
async function openStream(token: string): Promise<Stream> {
  const aborted = new AbortController();
  const response = await fetch(`${url}/mcp`, {
    headers: { authorization: `Bearer ${token}`, accept: "text/event-stream" },
    signal: aborted.signal,
  });
  if (response.status !== 200) {
    return { status: response.status, body: await response.json(), close: () => {} };
  }
  return {
    status: 200,
    body: undefined,
    close: () => aborted.abort(),
    reader: response.body!.getReader(),
  };
}

async function openStreams(token: string, count: number): Promise<Stream[]> {
  const streams: Stream[] = [];
  for (let i = 0; i < count; i++) streams.push(await openStream(token));
  return streams;
}

const closeAll = (streams: Stream[]) => {
  for (const stream of streams) stream.close();
};

/** A model client of the operator's organisation, issued through the API: its bearer. */
async function issueModelClient(op: Browser, name: string): Promise<string> {
  const issued = await op.request("POST", "/api/clients/model", { name, environment: "staging" });
  if (issued.statusCode !== 201) throw new Error(`issuing ${name} failed: ${issued.body}`);
  return issued.json().token as string;
}

describe("GET /mcp streams are counted per bearer", () => {
  it("gives each member using one OAuth app their own 8, though they share its client row", async () => {
    const owner = await readyOperator(h, "owner");
    const organisationId = (await owner.request("GET", "/api/auth/me")).json().organisation.id as string;
    const admin = await joinAs(h, owner, "admin");
    const redirectUri = "http://127.0.0.1:33418/callback";
    const registered = await register(h.app, {
      client_name: "Shared agent app",
      redirect_uris: [redirectUri],
    });
    const clientId = registered.json().client_id as string;
    const ownerTokens = await approveAndExchange(owner, h.app, { clientId, redirectUri, organisationId });
    const adminTokens = await approveAndExchange(admin.browser, h.app, {
      clientId,
      redirectUri,
      organisationId,
    });
    // One client row for the app in the organisation's environment: both act through it.
    const rows = (await owner.request("GET", "/api/access")).json().clients as { oauth: boolean }[];
    expect(rows.filter((row) => row.oauth)).toHaveLength(1);

    const owners = await openStreams(ownerTokens.tokens.access_token, 8);
    expect(owners.map((s) => s.status)).toEqual(Array(8).fill(200));
    const ninth = await openStream(ownerTokens.tokens.access_token);
    expect(ninth.status).toBe(429);
    expect(ninth.body).toMatchObject({ error: { code: "rate_limited" } });
    // The admin's streams are theirs: the owner holding 8 takes none of them.
    const admins = await openStreams(adminTokens.tokens.access_token, 8);
    expect(admins.map((s) => s.status)).toEqual(Array(8).fill(200));
    expect((await openStream(adminTokens.tokens.access_token)).status).toBe(429);
    closeAll([...owners, ...admins]);
  });

  it("holds at most 200 for one organisation, whatever its bearers; another organisation is not held", async () => {
    const first = await operatorWithClient(h, {
      secret: "sk_live_streams_org_cap_4e2a",
      items: [{ name: "API_KEY" }],
      clientName: "agent 0",
    });
    const tokens = [first.token];
    for (let i = 1; i <= 25; i++) tokens.push(await issueModelClient(first.op, `agent ${i}`));
    const held: Stream[] = [];
    for (const token of tokens.slice(0, 25)) held.push(...(await openStreams(token, 8)));
    expect(held.filter((s) => s.status === 200)).toHaveLength(200);
    // The 26th agent holds none yet, but its organisation holds 200 on this replica.
    const over = await openStream(tokens[25]!);
    expect(over.status).toBe(429);
    expect(over.body).toMatchObject({ error: { code: "rate_limited" } });
    const other = await operatorWithClient(h, {
      secret: "sk_live_streams_other_org_77c1",
      items: [{ name: "API_KEY" }],
      clientName: "other organisation's agent",
    });
    const others = await openStream(other.token);
    expect(others.status).toBe(200);
    // One closed, the organisation may open one again.
    held[0]!.close();
    await vi.waitFor(async () => {
      const again = await openStream(tokens[25]!);
      expect(again.status).toBe(200);
      held.push(again);
    });
    closeAll([...held, others]);
  }, 60_000);
});

describe("GET /mcp's minute re-check", () => {
  it("does not mark an idle stream's client used", async () => {
    const agent = await operatorWithClient(h, {
      secret: "sk_live_streams_idle_3b90",
      items: [{ name: "API_KEY" }],
      clientName: "idle stream agent",
    });
    const lastAccess = async () => {
      // The Clients list (GET /api/access): when each client last used its access.
      const clients = (await agent.op.request("GET", "/api/access")).json().clients as {
        client_id: string;
        last_access_at: string | null;
      }[];
      return clients.find((c) => c.client_id === agent.clientId)!.last_access_at;
    };
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const stream = await openStream(agent.token);
    expect(stream.status).toBe(200);
    const opened = await lastAccess();
    expect(opened).not.toBeNull();
    // Ten idle minutes, a re-check in each: the stream stays, the client is not used.
    for (let minute = 0; minute < 10; minute++) {
      h.clock.advance(60_000);
      vi.advanceTimersByTime(60_000);
      // The re-check's query, on the real database, answers well within this.
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(await lastAccess()).toBe(opened);
    // It still re-checks: revoked, the stream ends within the next minute.
    const revoked = await agent.op.request("POST", `/api/clients/${agent.clientId}/revoke`, {});
    expect(revoked.statusCode, revoked.body).toBe(200);
    vi.advanceTimersByTime(60_000);
    let rest = await stream.reader!.read();
    while (!rest.done) rest = await stream.reader!.read();
    expect(rest.done).toBe(true);
  });
  it("does not mark an idle OAuth stream's client used either", async () => {
    const owner = await readyOperator(h, "owner");
    const organisationId = (await owner.request("GET", "/api/auth/me")).json().organisation.id as string;
    const redirectUri = "http://127.0.0.1:33418/callback";
    const registered = await register(h.app, { client_name: "Idle OAuth app", redirect_uris: [redirectUri] });
    const clientId = registered.json().client_id as string;
    const { tokens } = await approveAndExchange(owner, h.app, { clientId, redirectUri, organisationId });
    const lastAccess = async () => {
      const clients = (await owner.request("GET", "/api/access")).json().clients as {
        oauth: boolean;
        name: string;
        last_access_at: string | null;
      }[];
      return clients.find((c) => c.oauth && c.name === "Idle OAuth app")?.last_access_at ?? null;
    };
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const stream = await openStream(tokens.access_token);
    expect(stream.status).toBe(200);
    const opened = await lastAccess();
    // Five idle minutes (the access token lives ten), a re-check in each.
    for (let minute = 0; minute < 5; minute++) {
      h.clock.advance(60_000);
      vi.advanceTimersByTime(60_000);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(await lastAccess()).toBe(opened);
    stream.close();
  });
});
