// Test fixture: a real UDP DNS server on loopback that answers A and AAAA from a plan per name,
// including the rebinding attacker whose answer changes between queries, and (when asked) the
// hostile server whose answer is too big for UDP, so the resolver retries over TCP for all of it.
import { createSocket } from "node:dgram";
import { type AddressInfo, createServer, type Socket } from "node:net";
import * as dnsPacket from "dns-packet";

/** One answer: addresses per family, or an error code, or silence (the query is dropped). */
export interface DnsAnswer {
  A?: string[];
  AAAA?: string[];
  rcode?: "NXDOMAIN" | "SERVFAIL" | "REFUSED";
  isSilent?: boolean;
  /** The records' TTL in seconds; 0 unless set (an answer nobody may reuse). */
  ttl?: number;
  /** AAAA queries alone get this error (A answers as planned). */
  aaaaRcode?: "SERVFAIL";
}

/**
 * A fixed answer, or a sequence: the n-th query of a type for the name gets `sequence[n]`, the
 * last entry repeating (first 127.0.0.1, later 10.0.0.1: the rebinding attacker).
 */
export type DnsAnswerPlan = DnsAnswer | { sequence: DnsAnswer[] };

export interface RecordedQuery {
  name: string;
  type: string;
}

export interface DnsServerOptions {
  /**
   * Also serve TCP on the same port, and answer over UDP with the truncated flag (TC, no records)
   * whenever the answer is over 512 bytes: the resolver then asks again over TCP, where an answer
   * can hold thousands of records. A query retried over TCP is recorded once.
   */
  isTcpServed?: boolean;
}

export interface RunningDnsServer {
  port: number;
  /** `127.0.0.1:<port>`, ready for `dnsServers`. */
  server: string;
  queries: RecordedQuery[];
  /** Replaces the answer for a name (replicas coming and going behind a service name). */
  setPlan(name: string, plan: DnsAnswerPlan): void;
  close(): Promise<void>;
}

const RCODES = { NOERROR: 0, SERVFAIL: 2, NXDOMAIN: 3, REFUSED: 5 } as const;
/** RFC 1035 4.2.1: a UDP message without EDNS holds at most 512 bytes. */
const MAX_UDP_ANSWER_BYTES = 512;

function normalize(name: string): string {
  return name.toLowerCase().replace(/\.$/, "");
}

/**
 * Starts the server on 127.0.0.1:0 (or `at`). Unknown names get NXDOMAIN; a known name without a
 * record of the type gets an empty NOERROR.
 */
export async function startDnsServer(
  answers: Record<string, DnsAnswerPlan>,
  at: { host: string; port: number } = { host: "127.0.0.1", port: 0 },
  options: DnsServerOptions = {},
): Promise<RunningDnsServer> {
  const plans = new Map(Object.entries(answers).map(([name, plan]) => [normalize(name), plan]));
  const asked = new Map<string, number>();
  // What the last UDP query of each name and type was given, for its retry over TCP.
  const lastAnswers = new Map<string, DnsAnswer | undefined>();
  const queries: RecordedQuery[] = [];

  function answerFor(name: string, type: string): DnsAnswer | undefined {
    const plan = plans.get(name);
    if (plan === undefined || !("sequence" in plan)) return plan;
    const key = `${name}|${type}`;
    const index = asked.get(key) ?? 0;
    asked.set(key, index + 1);
    return plan.sequence[Math.min(index, plan.sequence.length - 1)];
  }

  /** The encoded response to one query, or undefined when it gets none (undecodable, silent). */
  function respond(message: Buffer, isTcp: boolean): Buffer | undefined {
    let query: dnsPacket.DecodedPacket;
    try {
      query = dnsPacket.decode(message);
    } catch {
      return undefined;
    }
    const question = query.questions?.[0];
    if (question === undefined) return undefined;
    const name = normalize(question.name);
    // The TCP retry of a truncated answer is the same query: it is recorded once and, for a
    // sequence, answered with the entry the UDP query was given.
    const answer = isTcp ? lastAnswers.get(`${name}|${question.type}`) : answerFor(name, question.type);
    if (!isTcp) {
      queries.push({ name, type: question.type });
      lastAnswers.set(`${name}|${question.type}`, answer);
    }
    if (answer?.isSilent) return undefined;
    const rcode =
      answer === undefined
        ? RCODES.NXDOMAIN
        : RCODES[(question.type === "AAAA" ? answer.aaaaRcode : undefined) ?? answer.rcode ?? "NOERROR"];
    const records = question.type === "A" ? answer?.A : question.type === "AAAA" ? answer?.AAAA : undefined;
    const flags =
      dnsPacket.AUTHORITATIVE_ANSWER | dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE | rcode;
    const response = dnsPacket.encode({
      type: "response",
      id: query.id,
      flags,
      questions: [question],
      answers:
        rcode === RCODES.NOERROR
          ? (records ?? []).map((data) => ({
              type: question.type as "A" | "AAAA",
              name: question.name,
              ttl: answer?.ttl ?? 0,
              data,
            }))
          : [],
    });
    if (isTcp || !options.isTcpServed || response.length <= MAX_UDP_ANSWER_BYTES) return response;
    return dnsPacket.encode({
      type: "response",
      id: query.id,
      flags: flags | dnsPacket.TRUNCATED_RESPONSE,
      questions: [question],
      answers: [],
    });
  }
  const tcpConnections = new Set<Socket>();
  const serveTcp = (connection: Socket) => {
    tcpConnections.add(connection);
    connection.on("close", () => tcpConnections.delete(connection));
    connection.on("error", () => {});
    let pending = Buffer.alloc(0);
    connection.on("data", (data) => {
      pending = Buffer.concat([pending, data]);
      // RFC 1035 4.2.2: each message over TCP is preceded by its two-byte length.
      while (pending.length >= 2 && pending.length >= 2 + pending.readUInt16BE(0)) {
        const message = pending.subarray(2, 2 + pending.readUInt16BE(0));
        pending = pending.subarray(2 + message.length);
        const response = respond(Buffer.from(message), true);
        if (response === undefined) continue;
        const length = Buffer.alloc(2);
        length.writeUInt16BE(response.length);
        connection.write(Buffer.concat([length, response]));
      }
    });
  };

  // UDP takes a free port, TCP the same number, which another socket may hold: then both are
  // let go and another port tried (a fixed port is tried once).
  for (let attempt = 1; ; attempt++) {
    const socket = createSocket("udp4");
    socket.on("message", (message, remote) => {
      const response = respond(message, false);
      if (response !== undefined) socket.send(response, remote.port, remote.address);
    });
    await new Promise<void>((resolve, reject) => {
      socket.once("error", reject);
      socket.bind(at.port, at.host, () => resolve());
    });
    const { port } = socket.address() as AddressInfo;
    const tcp = options.isTcpServed ? createServer(serveTcp) : undefined;
    try {
      if (tcp !== undefined) {
        await new Promise<void>((resolve, reject) => {
          tcp.once("error", reject);
          tcp.listen(port, at.host, () => resolve());
        });
      }
    } catch (error) {
      await new Promise<void>((resolve) => socket.close(() => resolve()));
      if (at.port !== 0 || attempt >= 20) throw error;
      continue;
    }
    return {
      port,
      server: `${at.host}:${port}`,
      queries,
      setPlan: (name, plan) => {
        plans.set(normalize(name), plan);
      },
      close: async () => {
        for (const connection of tcpConnections) connection.destroy();
        await Promise.all([
          new Promise<void>((resolve) => socket.close(() => resolve())),
          tcp === undefined ? undefined : new Promise<void>((resolve) => tcp.close(() => resolve())),
        ]);
      },
    };
  }
}
