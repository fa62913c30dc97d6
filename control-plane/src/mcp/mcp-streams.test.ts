// The keep-alive stream caps: per bearer, per organisation, and a full process that makes room at
// the expense of the organisation holding the most; each stream counted down exactly once.
import { describe, expect, it } from "vitest";
import { createKeepaliveStreams, type OpenStream } from "./mcp-streams.ts";

const LIMITS = { perBearer: 2, perOrganisation: 3, total: 4 };

/** A registry whose streams record being ended, in order. */
function streamsWithLog(limits = LIMITS) {
  const ended: string[] = [];
  const streams = createKeepaliveStreams(limits);
  const open = (holder: string, organisationId: string, name: string) =>
    streams.admit(holder, organisationId, () => ended.push(name));
  return { streams, ended, open };
}

describe("keep-alive streams", () => {
  it("refuses a bearer's stream over its cap, and an organisation's over its cap", () => {
    const { streams, open } = streamsWithLog();
    expect(open("a1", "A", "a1-1")).toBeDefined();
    expect(open("a1", "A", "a1-2")).toBeDefined();
    expect(open("a1", "A", "a1-3")).toBeUndefined();
    expect(open("a2", "A", "a2-1")).toBeDefined();
    expect(open("a3", "A", "a3-1")).toBeUndefined();
    expect(streams.countOf("A")).toBe(3);
    expect(streams.size).toBe(3);
  });

  it("at the process cap, ends the oldest stream of the largest organisation for a smaller one", () => {
    const { streams, ended, open } = streamsWithLog();
    open("a1", "A", "a1");
    open("a1", "A", "a2");
    open("a2", "A", "a3");
    expect(open("b1", "B", "b1")).toBeDefined();
    expect(streams.size).toBe(4);
    // C holds none, A holds the most: A's oldest makes room.
    expect(open("c1", "C", "c1")).toBeDefined();
    expect(ended).toEqual(["a1"]);
    expect(streams.countOf("A")).toBe(2);
    expect(streams.size).toBe(4);
    // A's own stream at a full process: A holds the most, so 429 as before.
    expect(open("a2", "A", "a4")).toBeUndefined();
    // B holds 1 of A's 2: A's next oldest goes.
    expect(open("b1", "B", "b2")).toBeDefined();
    expect(ended).toEqual(["a1", "a2"]);
    // B is now the largest (2); C, holding 1, takes B's oldest.
    expect([streams.countOf("A"), streams.countOf("B"), streams.countOf("C")]).toEqual([1, 2, 1]);
    expect(open("c1", "C", "c2")).toBeDefined();
    expect(ended).toEqual(["a1", "a2", "b1"]);
  });

  it("refuses an organisation holding as many as the largest at a full process", () => {
    const { ended, open } = streamsWithLog({ perBearer: 8, perOrganisation: 3, total: 4 });
    open("a", "A", "a1");
    open("a", "A", "a2");
    open("b", "B", "b1");
    open("b", "B", "b2");
    expect(open("a", "A", "a3")).toBeUndefined();
    expect(open("b", "B", "b3")).toBeUndefined();
    expect(ended).toEqual([]);
  });

  it("counts a stream down once: ended to make room, then its socket closes", () => {
    const { streams, open } = streamsWithLog({ perBearer: 8, perOrganisation: 3, total: 4 });
    const evicted = open("a", "A", "a1") as OpenStream;
    open("a", "A", "a2");
    open("a", "A", "a3");
    open("b", "B", "b1");
    expect(open("b", "B", "b2")).toBeDefined();
    expect(streams.countOf("A")).toBe(2);
    // The evicted stream's socket closes afterwards: already forgotten, nothing more counted down.
    streams.forget(evicted);
    streams.forget(evicted);
    expect(streams.countOf("A")).toBe(2);
    expect(streams.size).toBe(4);
    // B now holds as many as A: the process is still full for it.
    expect(open("b", "B", "b3")).toBeUndefined();
  });

  it("forgets a bearer's and an organisation's count with its last stream", () => {
    const { streams, open } = streamsWithLog();
    const one = open("a1", "A", "1") as OpenStream;
    const two = open("a1", "A", "2") as OpenStream;
    streams.forget(one);
    streams.forget(one);
    expect(streams.countOf("A")).toBe(1);
    // The bearer's count went down once: one more fits, not two.
    expect(open("a1", "A", "3")).toBeDefined();
    expect(open("a1", "A", "4")).toBeUndefined();
    streams.forget(two);
    expect(streams.size).toBe(1);
  });

  it("ends every stream when the server closes", () => {
    const { streams, ended, open } = streamsWithLog();
    open("a1", "A", "a1");
    open("b1", "B", "b1");
    streams.endAll();
    expect(ended.sort()).toEqual(["a1", "b1"]);
  });
});
