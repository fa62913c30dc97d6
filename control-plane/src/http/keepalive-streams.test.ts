// The keep-alive stream caps: per bearer, per organisation, and a full process that makes room at
// the expense of the organisation holding the most; each stream counted down exactly once. The
// holders here stand for bearers (GET /mcp) or sessions (the live inbox) alike.
import { describe, expect, it } from "vitest";
import { createKeepaliveStreams, type OpenStream } from "./keepalive-streams.ts";

const LIMITS = { perHolder: 2, perOrganisation: 3, total: 4 };

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

  it("at the process cap, ends the oldest stream of the largest organisation for one two below it", () => {
    const { streams, ended, open } = streamsWithLog();
    open("a1", "A", "a1");
    open("a1", "A", "a2");
    open("a2", "A", "a3");
    expect(open("b1", "B", "b1")).toBeDefined();
    expect(streams.size).toBe(4);
    // C holds none, A holds the most (3): A's oldest makes room.
    expect(open("c1", "C", "c1")).toBeDefined();
    expect(ended).toEqual(["a1"]);
    expect(streams.countOf("A")).toBe(2);
    expect(streams.size).toBe(4);
    // A's own stream at a full process: A holds the most, so 429 as before.
    expect(open("a2", "A", "a4")).toBeUndefined();
    // B holds 1 of A's 2: one below would only trade places with A, so 429.
    expect(open("b1", "B", "b2")).toBeUndefined();
    expect(ended).toEqual(["a1"]);
    expect([streams.countOf("A"), streams.countOf("B"), streams.countOf("C")]).toEqual([2, 1, 1]);
  });

  it("settles when ended clients reconnect: no two organisations end each other's streams for ever", () => {
    const { streams, ended, open } = streamsWithLog({ perHolder: 8, perOrganisation: 8, total: 5 });
    const live = new Map<string, OpenStream>();
    let n = 0;
    /** Opens a stream for `org`; the registry ends it by name, and its client reconnects. */
    const connect = (org: string) => {
      const name = `${org}${n++}`;
      const stream = open(org, org, name);
      if (stream) live.set(name, stream);
      return stream;
    };
    // X fills most of the process; Y gets in at X's expense, then asks for one more, and again.
    for (let i = 0; i < 5; i++) connect("X");
    for (let i = 0; i < 3; i++) connect("Y");
    // Every ended client reconnects, round after round.
    for (let round = 0; round < 20; round++) {
      const gone = ended.splice(0);
      for (const name of gone) {
        streams.forget(live.get(name)!);
        live.delete(name);
        connect(name.replace(/\d+$/, ""));
      }
    }
    expect(ended).toEqual([]);
    expect(streams.size).toBe(5);
    // X kept the larger share; Y got in and stays.
    expect(streams.countOf("X")).toBeGreaterThanOrEqual(streams.countOf("Y"));
    expect(streams.countOf("Y")).toBeGreaterThan(0);
  });

  it("refuses an organisation holding as many as the largest at a full process", () => {
    const { ended, open } = streamsWithLog({ perHolder: 8, perOrganisation: 3, total: 4 });
    open("a", "A", "a1");
    open("a", "A", "a2");
    open("b", "B", "b1");
    open("b", "B", "b2");
    expect(open("a", "A", "a3")).toBeUndefined();
    expect(open("b", "B", "b3")).toBeUndefined();
    expect(ended).toEqual([]);
  });

  it("counts a stream down once: ended to make room, then its socket closes", () => {
    const { streams, open } = streamsWithLog({ perHolder: 8, perOrganisation: 3, total: 4 });
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
