// The local MCP sessions (spec 4.4): every client holds the same model bearer and names itself, so
// room is made at the expense of whoever holds the most, never of a client with a few sessions.
import { describe, expect, it } from "vitest";
import { SESSION_IDLE_MS } from "../mcp/mcp-sessions.ts";
import { createLocalMcpSessions } from "./local-mcp-sessions.ts";

describe("the local MCP session store", () => {
  it("a full store makes room from the name holding the most, however many names a flooder spreads over", () => {
    let clock = 1_000_000;
    const store = createLocalMcpSessions(() => clock, { total: 12, perAgent: 100 });
    const victim = store.open("victim");
    // Three sessions under each of four names fill the rest of the store but one.
    const flooded = [];
    for (let name = 0; name < 4; name++)
      for (let i = 0; i < 3; i++) {
        clock += 1;
        flooded.push(store.open(`flooder-${name}`));
      }
    // Hours of this: the victim, older than every flooder's session, keeps its one.
    for (let round = 0; round < 50; round++) {
      clock += 1;
      expect(store.open(`flooder-${round % 4}`).agentId).toBe(`flooder-${round % 4}`);
      clock += 1;
      expect(store.open("newcomer").agentId).toBe("newcomer");
    }
    expect(store.touch(victim.id)?.agentId).toBe("victim");
    // The flooders paid: their oldest sessions are gone.
    expect(store.touch(flooded[0]!.id)).toBeUndefined();
  });

  it("keeps one agent name to its share: a client re-initializing in a loop ends only its own oldest", () => {
    let clock = 0;
    const store = createLocalMcpSessions(() => clock, { total: 10, perAgent: 3 });
    const other = store.open("other");
    const looped = [];
    for (let i = 0; i < 20; i++) {
      clock += 1;
      looped.push(store.open("looping"));
    }
    expect(store.touch(other.id)?.agentId).toBe("other");
    // Its newest three live; the rest were its own to give up.
    expect(looped.filter((session) => store.touch(session.id)).length).toBe(3);
    expect(store.touch(looped[19]!.id)).toBeDefined();
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
