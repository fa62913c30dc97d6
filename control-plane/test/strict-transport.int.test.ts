// Strict-Transport-Security (RFC 6797) on every answer of a control plane whose BASE_URL is https:
// JSON, pages, errors, an unknown path, and the answers handed to oidc-provider (which never pass
// Fastify's onSend); never on one served over http (the local vault, a developer's plane).
import type { LightMyRequestResponse } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HostedHarness, startHosted } from "./hosted.ts";

const HSTS = "max-age=31536000; includeSubDomains";

/** A JSON route, a page, a refusal, an unknown path and the device page oidc-provider writes. */
const ASKED = [
  { name: "health", url: "/health", accept: "application/json" },
  { name: "sign-in page", url: "/sign-in", accept: "text/html" },
  { name: "refused", url: "/api/grants", accept: "application/json" },
  { name: "unknown", url: "/api/no-such-route", accept: "application/json" },
  { name: "oidc-provider", url: "/device", accept: "text/html" },
];

/**
 * Each of ASKED, by BASE_URL's host as a browser would ask (a page on a loopback name is
 * redirected there).
 */
function answersOf(h: HostedHarness, base: string): Promise<[string, LightMyRequestResponse][]> {
  const host = new URL(base).host;
  return Promise.all(
    ASKED.map(
      async ({ name, url, accept }): Promise<[string, LightMyRequestResponse]> => [
        name,
        await h.app.inject({ method: "GET", url, headers: { host, accept } }),
      ],
    ),
  );
}

describe("Strict-Transport-Security", () => {
  let https: HostedHarness;
  let http: HostedHarness;
  beforeAll(async () => {
    https = await startHosted({ baseUrl: "https://latch.example" });
    http = await startHosted({ baseUrl: "http://localhost:8787" });
  }, 60_000);
  afterAll(async () => {
    await https?.close();
    await http?.close();
  });

  it("is on every answer of a plane whose BASE_URL is https", async () => {
    const answers = await answersOf(https, "https://latch.example");
    expect(answers.map(([name, a]) => [name, a.statusCode])).toEqual([
      ["health", 200],
      ["sign-in page", 200],
      ["refused", 401],
      ["unknown", 404],
      ["oidc-provider", 200],
    ]);
    for (const [name, answer] of answers)
      expect(answer.headers["strict-transport-security"], name).toBe(HSTS);
  });

  it("is never sent over http", async () => {
    for (const [name, answer] of await answersOf(http, "http://localhost:8787")) {
      expect(answer.headers["strict-transport-security"], name).toBeUndefined();
    }
  });
});
