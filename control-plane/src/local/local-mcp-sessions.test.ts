// The local MCP sessions (spec 4.4): every client holds the same model bearer, so none of them may
// end another's session or crowd it out; a full store refuses the new one instead.
import { AppError } from "@latch/shared/errors";
import { describe, expect, it } from "vitest";
import { SESSION_IDLE_MS } from "../mcp/mcp-sessions.ts";
import { createLocalMcpSessions } from "./local-mcp-sessions.ts";

function refusal(open: () => unknown): AppError {
  try {
    open();
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error("the session was opened");
}

describe("the local MCP session store", () => {
  it("never ends another agent's session to make room: a full store refuses the new one, with retry_after", () => {
    let clock = 1_000_000;
    const store = createLocalMcpSessions(() => clock, { total: 5, perAgent: 100 });
    const victim = store.open("victim");
    clock += 1000;
    for (let i = 0; i < 4; i++) store.open(`flooder-${i}`);
    const refused = refusal(() => store.open("flooder-5"));
    expect(refused.code).toBe("rate_limited");
    expect(refused.status).toBe(429);
    expect(refused.extra.retry_after).toBe(Math.ceil((SESSION_IDLE_MS - 1000) / 1000));
    expect(store.touch(victim.id)?.agentId).toBe("victim");
  });

  it("keeps one agent name to its share, so a client re-initializing in a loop leaves room for others", () => {
    const store = createLocalMcpSessions(() => 0, { total: 10, perAgent: 3 });
    for (let i = 0; i < 3; i++) store.open("looping");
    expect(refusal(() => store.open("looping")).code).toBe("rate_limited");
    expect(store.open("other").agentId).toBe("other");
  });

  it("counts a closed or idle session no more", () => {
    let clock = 0;
    const store = createLocalMcpSessions(() => clock, { total: 2, perAgent: 2 });
    const first = store.open("a");
    store.open("a");
    expect(store.close(first.id)).toBe(true);
    expect(store.close(first.id)).toBe(false);
    store.open("a");
    clock += SESSION_IDLE_MS + 1;
    // Both idle past 8 hours: forgotten, so the store has room again.
    store.open("a");
    const live = store.open("a");
    expect(store.touch(live.id)?.id).toBe(live.id);
    expect(store.touch(first.id)).toBeUndefined();
  });

  it("forgets a session idle for 8 hours (404) and keeps one that is used", () => {
    let clock = 0;
    const store = createLocalMcpSessions(() => clock);
    const used = store.open("a");
    const idle = store.open("b");
    clock += SESSION_IDLE_MS - 1;
    expect(store.touch(used.id)).toBeDefined();
    clock += 2;
    expect(store.touch(idle.id)).toBeUndefined();
    expect(store.touch(used.id)).toBeDefined();
  });
});
