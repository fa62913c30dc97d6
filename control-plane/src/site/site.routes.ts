// The public site (spec 4.3 "Health and discovery"): GET / (the landing page), the /docs pages,
// /llms.txt and /llms-full.txt (all three from the Markdown of public/docs/, site-docs.ts),
// /robots.txt, /sitemap.xml, security.txt at its two addresses, and the icons and social images of
// public/site/ (site-assets.ts). None reads a session or a bearer, so an invalid bearer sent to
// one is ignored (spec 5 rule 7), and each names a foreign Origin and answers its preflight
// (rule 6): nothing here is private. Everything is built once, at start.
import type { FastifyInstance } from "fastify";
import { z } from "zod";
import { readPage, reflectOrigin, registerAssets, registerPublicPreflight } from "../pages/page-files.ts";
import { publicPageHeaders, publicTextHeaders } from "../pages/page-headers.ts";
import { llmsFull, llmsIndex, readDocs } from "./site-docs.ts";
import { robotsTxt, securityTxt, sitemapXml } from "./site-text.ts";

export interface SiteRouteDeps {
  baseUrl: string;
  isProduction: boolean;
  now: () => Date;
}

const publicSchema = {
  querystring: z.looseObject({}).describe("ignored: the public site reads no parameter"),
  response: { 200: z.string().describe("a public page or discovery file") },
} as const;

export function registerSiteRoutes(app: FastifyInstance, deps: SiteRouteDeps): void {
  const baseUrl = deps.baseUrl.replace(/\/+$/, "");
  const docs = readDocs(baseUrl);
  const landing = readPage("pages/landing.html", ["baseUrl", "mcpUrl"]).fill({
    baseUrl,
    mcpUrl: `${baseUrl}/mcp`,
  });
  const docPage = readPage("pages/doc.html", ["title", "canonical"]);
  const security = securityTxt(baseUrl, deps.now());

  const html = publicPageHeaders();
  const files: Array<{ path: string; headers: Readonly<Record<string, string>>; body: string }> = [
    { path: "/", headers: publicPageHeaders("landing"), body: landing },
    ...docs.map((doc) => ({
      path: doc.path,
      headers: html,
      body: docPage
        .fill({ title: doc.title, canonical: `${baseUrl}${doc.path}` })
        .replace("<!--doc-->", () => doc.html),
    })),
    {
      path: "/robots.txt",
      headers: publicTextHeaders("text/plain; charset=utf-8"),
      body: robotsTxt(baseUrl, deps.isProduction),
    },
    {
      path: "/sitemap.xml",
      headers: publicTextHeaders("application/xml; charset=utf-8"),
      body: sitemapXml(baseUrl, ["/", ...docs.map((doc) => doc.path)]),
    },
    {
      path: "/.well-known/security.txt",
      headers: publicTextHeaders("text/plain; charset=utf-8"),
      body: security,
    },
    { path: "/security.txt", headers: publicTextHeaders("text/plain; charset=utf-8"), body: security },
    {
      path: "/llms.txt",
      headers: publicTextHeaders("text/markdown; charset=utf-8"),
      body: llmsIndex(docs, baseUrl),
    },
    {
      path: "/llms-full.txt",
      headers: publicTextHeaders("text/markdown; charset=utf-8"),
      body: llmsFull(docs),
    },
  ];

  for (const file of files) {
    app.get(
      file.path,
      {
        schema: publicSchema,
        // After the app's onSend hook (which marks every answer no-store): this file's own headers.
        onSend: async (request, reply) => {
          if (reply.statusCode < 400) reply.headers(file.headers);
          reflectOrigin(request, reply);
        },
      },
      async (_request, reply) => reply.send(file.body),
    );
    registerPublicPreflight(app, file.path);
  }

  registerAssets(app, "site", "/");
}
