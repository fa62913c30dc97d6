// Direct HTTPS calls to the benchmark origin: the baseline for egress-proxy.js.
// Run by loadtest/bench-egress.ts; -e VUS, ITERATIONS, ORIGIN_PORT, SECRET, SUMMARY_PATH.
//
// TLS is verified: k6 is started with SSL_CERT_FILE pointing at the test CA (Go's crypto/tls
// reads it on Linux), and api.latch.test is mapped to 127.0.0.1 by the `hosts` option.
import { check } from "k6";
import http from "k6/http";
import { env, sharedIterations, writeSummary } from "./lib/summary.js";

export const options = {
  scenarios: sharedIterations("direct"),
  hosts: { "api.latch.test": "127.0.0.1" },
  // Keep-alive on both sides: each VU keeps its connection, as the proxy keeps its upstream pool.
  noConnectionReuse: false,
  thresholds: { checks: ["rate==1"] },
};

const url = `https://api.latch.test:${env("ORIGIN_PORT")}/v1/echo`;
const params = { headers: { authorization: `Bearer ${env("SECRET")}` } };

export default function () {
  const res = http.get(url, params);
  check(res, {
    "origin answered 200": (r) => r.status === 200,
    "echo body": (r) => typeof r.body === "string" && r.body.includes('"object":"echo"'),
  });
}

export function handleSummary(data) {
  return writeSummary(data);
}
