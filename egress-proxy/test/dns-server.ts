// Test fixture: a real UDP DNS server on loopback that answers A and AAAA from a plan per name,
// including the rebinding attacker whose answer changes between queries.
import { createSocket } from "node:dgram";
import type { AddressInfo } from "node:net";
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
): Promise<RunningDnsServer> {
  const plans = new Map(Object.entries(answers).map(([name, plan]) => [normalize(name), plan]));
  const asked = new Map<string, number>();
  const queries: RecordedQuery[] = [];
  const socket = createSocket("udp4");

  function answerFor(name: string, type: string): DnsAnswer | undefined {
    const plan = plans.get(name);
    if (plan === undefined || !("sequence" in plan)) return plan;
    const key = `${name}|${type}`;
    const index = asked.get(key) ?? 0;
    asked.set(key, index + 1);
    return plan.sequence[Math.min(index, plan.sequence.length - 1)];
  }

  socket.on("message", (message, remote) => {
    let query: dnsPacket.DecodedPacket;
    try {
      query = dnsPacket.decode(message);
    } catch {
      return;
    }
    const question = query.questions?.[0];
    if (question === undefined) return;
    const name = normalize(question.name);
    queries.push({ name, type: question.type });
    const answer = answerFor(name, question.type);
    if (answer?.isSilent) return;
    const rcode =
      answer === undefined
        ? RCODES.NXDOMAIN
        : RCODES[(question.type === "AAAA" ? answer.aaaaRcode : undefined) ?? answer.rcode ?? "NOERROR"];
    const records = question.type === "A" ? answer?.A : question.type === "AAAA" ? answer?.AAAA : undefined;
    const response = dnsPacket.encode({
      type: "response",
      id: query.id,
      flags:
        dnsPacket.AUTHORITATIVE_ANSWER | dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE | rcode,
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
    socket.send(response, remote.port, remote.address);
  });

  await new Promise<void>((resolve, reject) => {
    socket.once("error", reject);
    socket.bind(at.port, at.host, () => resolve());
  });
  const { port } = socket.address() as AddressInfo;
  return {
    port,
    server: `${at.host}:${port}`,
    queries,
    setPlan: (name, plan) => {
      plans.set(normalize(name), plan);
    },
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
