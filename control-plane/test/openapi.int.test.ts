// /openapi.json describes every route the app registers, and nothing else: compared with the
// routes Fastify registered (app.registeredRoutes, as the authorization suite takes them), checked
// by a maintained OpenAPI 3.1 validator, and rendered at /docs/api. A route added without a schema
// fails here with the sentence that says what to add.
import { Validator } from "@seriousme/openapi-schema-validator";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { buildApp } from "../src/app.ts";
import type { ZodTypeProvider } from "../src/http/route-schemas.ts";
import { undocumentedRoutes } from "../src/openapi/openapi-document.ts";
import { type HostedHarness, startHosted } from "./hosted.ts";

type Operation = {
  tags: string[];
  requestBody?: { content: Record<string, unknown> };
  responses: Record<string, { content?: Record<string, unknown> }>;
  parameters?: { name: string; in: string }[];
};
let h: HostedHarness;
let document: { openapi: string; paths: Record<string, Record<string, Operation>> };

beforeAll(async () => {
  h = await startHosted();
  const answer = await h.app.inject({ method: "GET", url: "/openapi.json" });
  expect(answer.statusCode).toBe(200);
  expect(answer.headers["content-type"]).toMatch(/^application\/json/);
  document = answer.json();
});

afterAll(async () => {
  await h.close();
});

const op = (method: string, path: string) => document.paths[path]?.[method.toLowerCase()];

describe("/openapi.json", () => {
  it("is a valid OpenAPI 3.1 document", async () => {
    expect(document.openapi).toBe("3.1.0");
    const validator = new Validator();
    const result = await validator.validate(structuredClone(document));
    expect(result.errors ?? [], JSON.stringify(result.errors, null, 2)?.slice(0, 2000)).toEqual([]);
    expect(result.valid).toBe(true);
    // Schemathesis (CI) refuses a tuple's prefixItems + items: false as an invalid schema, though
    // the validator above accepts it: write a fixed pair as an array of a fixed length instead.
    expect(JSON.stringify(document)).not.toContain('"prefixItems"');
  });

  it("lists exactly the routes the app registers, each with what it answers", () => {
    const registered = h.app.registeredRoutes.map(
      (r) => `${r.method} ${r.url.replace(/:([A-Za-z0-9_]+)/g, "{$1}")}`,
    );
    const documented = Object.entries(document.paths).flatMap(([path, methods]) =>
      Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`),
    );
    expect([...documented].sort()).toEqual([...new Set(registered)].sort());
    expect(undocumentedRoutes(h.app.registeredRoutes)).toEqual([]);
    for (const key of documented) {
      const [method, path] = key.split(" ") as [string, string];
      expect(Object.keys(op(method, path)!.responses).length, key).toBeGreaterThan(0);
    }
  });

  it("names each answer's statuses and media types, errors included", () => {
    const items = op("POST", "/api/items")!;
    expect(Object.keys(items.responses)).toEqual(
      expect.arrayContaining(["201", "400", "401", "403", "404", "409", "413", "415"]),
    );
    expect(items.tags).toEqual(["operator"]);
    expect(Object.keys(items.requestBody!.content)).toEqual(["application/json"]);
    expect(Object.keys(op("POST", "/api/auth/otp/send")!.responses)).toContain("429");
    expect(Object.keys(op("GET", "/api/audit/ledger")!.responses["200"]!.content!)).toEqual([
      "application/jsonl",
    ]);
    expect(op("GET", "/api/audit/ledger")!.parameters!.map((p) => p.name)).toEqual(["since_seq"]);
    expect(Object.keys(op("GET", "/sign-in")!.responses["200"]!.content!)).toEqual(["text/html"]);
    expect(Object.keys(op("GET", "/robots.txt")!.responses["200"]!.content!)).toEqual(["text/plain"]);
    expect(Object.keys(op("GET", "/assets/site.css")!.responses["200"]!.content!)).toEqual(["text/css"]);
    const token = op("POST", "/oauth/token")!;
    expect(Object.keys(token.requestBody!.content)).toEqual(["application/x-www-form-urlencoded"]);
    expect(Object.keys(token.responses)).toEqual(expect.arrayContaining(["200", "400", "401", "429"]));
    expect(op("POST", "/runtime/resolve")!.tags).toEqual(["trusted"]);
    expect(op("POST", "/mcp")!.tags).toEqual(["model"]);
    expect(op("GET", "/api/items/{id}")).toBeUndefined();
    expect(op("DELETE", "/api/items/{id}")!.parameters).toEqual([
      expect.objectContaining({ name: "id", in: "path" }),
    ]);
  });

  it("fails a route registered without a schema, saying what to add", async () => {
    const app = await buildApp({
      logger: pino({ level: "silent" }),
      isDatabaseReady: async () => true,
      isEgressServing: () => true,
      routes: [
        (app) => app.get("/api/forgotten", async () => ({ ok: true })),
        (app) =>
          app
            .withTypeProvider<ZodTypeProvider>()
            .get(
              "/api/described",
              { schema: { response: { 200: z.object({ ok: z.boolean() }) } } },
              async () => ({ ok: true }),
            ),
      ],
    });
    const missing = undocumentedRoutes(app.registeredRoutes);
    expect(missing).toEqual([
      expect.stringMatching(/^GET \/api\/forgotten declares no answer: give it schema\.response/),
    ]);
    await app.close();
  });
});

describe("/docs/api", () => {
  it("renders the document for a person, linked from /docs", async () => {
    const page = await h.app.inject({ method: "GET", url: "/docs/api" });
    expect(page.statusCode).toBe(200);
    expect(page.headers["content-type"]).toMatch(/^text\/html/);
    expect(page.body).toContain("HTTP API reference");
    expect(page.body).toContain("<code>POST /api/items</code>");
    expect(page.body).toContain('href="/openapi.json"');
    const docs = await h.app.inject({ method: "GET", url: "/docs" });
    expect(docs.body).toContain('href="/docs/api"');
  });
});
