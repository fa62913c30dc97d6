// The egress proxy's gRPC Execute path, one pre-minted call ticket per iteration.
// Run by loadtest/bench-egress.ts; -e VUS, ITERATIONS, PROXY_ADDR, PROTO_ROOT, TICKETS_FILE,
// SECRET, SUMMARY_PATH.
//
// Tickets are single use and live at most 10 minutes, so the node side mints exactly ITERATIONS
// of them before the run; the shared-iterations executor hands out each iteration number once,
// and iteration i spends ticket i.
import { check } from "k6";
import { SharedArray } from "k6/data";
import encoding from "k6/encoding";
import exec from "k6/execution";
import { Counter } from "k6/metrics";
import grpc from "k6/net/grpc";
import { env, sharedIterations, writeSummary } from "./lib/summary.js";

export const options = {
  scenarios: sharedIterations("proxy"),
  thresholds: { checks: ["rate==1"] },
};

// { payload, signature, key_id } per ticket: SignedTicket in protojson (bytes as base64).
const tickets = new SharedArray("tickets", () => JSON.parse(open(env("TICKETS_FILE"))).tickets);
const secret = env("SECRET");

const client = new grpc.Client();
client.load([env("PROTO_ROOT")], "latch/egress/v1/egress.proto");

// Calls that passed every check below; the node side compares it with the planned count.
const callsOk = new Counter("calls_ok");

// Per VU: one HTTP/2 connection, opened on the VU's first iteration and kept for the run.
let connected = false;

export default function () {
  if (!connected) {
    client.connect(env("PROXY_ADDR"), { plaintext: true });
    connected = true;
  }
  const index = exec.scenario.iterationInTest;
  const ticket = tickets[index];
  if (ticket === undefined) throw new Error(`no ticket for iteration ${index} (${tickets.length} minted)`);
  const res = client.invoke("latch.egress.v1.EgressProxy/Execute", { ticket });
  const message = res.message || {};
  const body = message.body ? encoding.b64decode(message.body, "std", "s") : "";
  const ok = check(res, {
    "gRPC OK": (r) => r.status === grpc.StatusOK,
    "reached origin": () => message.reachedOrigin === true,
    "origin answered 200": () => message.originStatus === 200,
    "echo body": () => body.includes('"object":"echo"'),
    "credential redacted": () => body.includes("Bearer [redacted]") && !body.includes(secret),
  });
  if (ok) callsOk.add(1);
}

export function handleSummary(data) {
  return writeSummary(data);
}
