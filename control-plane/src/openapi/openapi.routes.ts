// GET /openapi.json and GET /docs/api: the document of every route this app registered, made on
// first request (after every route, these two included, is registered) and kept.
import { readFileSync } from "node:fs";
import type { FastifyInstance } from "fastify";
import { Marked } from "marked";
import { z } from "zod";
import { escapeHtml, readPage, reflectOrigin, registerPublicPreflight } from "../pages/page-files.ts";
import { publicPageHeaders } from "../pages/page-headers.ts";
import { apiReferenceMarkdown } from "./api-reference.ts";
import { buildOpenApiDocument, type OpenApiDocument } from "./openapi-document.ts";

const VERSION = (
  JSON.parse(readFileSync(new URL("../../../package.json", import.meta.url), "utf8")) as { version: string }
).version;

const ignoredQuery = z.looseObject({}).describe("ignored");
const markdown = new Marked({ gfm: true, renderer: { html: ({ text }) => escapeHtml(text) } });

export function registerOpenApiRoutes(app: FastifyInstance, deps: { baseUrl: string }): void {
  const baseUrl = deps.baseUrl.replace(/\/+$/, "");
  let document: OpenApiDocument | undefined;
  let page: string | undefined;
  const documentOf = () => {
    document ??= buildOpenApiDocument(app.registeredRoutes, { baseUrl, version: VERSION });
    return document;
  };
  const docPage = readPage("pages/doc.html", ["title", "canonical"]);

  app.get(
    "/openapi.json",
    {
      schema: {
        querystring: ignoredQuery,
        response: { 200: z.looseObject({ openapi: z.literal("3.1.0") }).describe("This document") },
      },
    },
    async (request, reply) => {
      reflectOrigin(request, reply);
      return documentOf();
    },
  );
  registerPublicPreflight(app, "/openapi.json");

  app.get(
    "/docs/api",
    {
      schema: { querystring: ignoredQuery, response: { 200: z.string().describe("The API reference page") } },
    },
    async (request, reply) => {
      page ??= docPage
        .fill({ title: "HTTP API reference", canonical: `${baseUrl}/docs/api` })
        .replace("<!--doc-->", () => markdown.parse(apiReferenceMarkdown(documentOf()), { async: false }));
      reply.headers(publicPageHeaders());
      reflectOrigin(request, reply);
      return reply.send(page);
    },
  );
  registerPublicPreflight(app, "/docs/api");
}
