// GET / on `vault serve`: the console page (credentials without values, approvals with approve,
// deny and revoke buttons, recent activity) from public/local/, with its script and stylesheet at
// /console.js and /console.css, and the hosted pages' stylesheet and mark, so both look alike. No outside assets: the Content-Security-Policy (page-headers.ts)
// allows nothing else. The operator token arrives in the URL fragment (never sent to a server or
// a log) and is kept in sessionStorage for this tab only.
import type { FastifyInstance } from "fastify";
import { pageSchema } from "../http/route-schemas.ts";
import { readPage, registerAssets, sendPage } from "../pages/page-files.ts";

export function registerLocalConsole(app: FastifyInstance): void {
  const page = readPage("local/console.html").fill({});
  app.get("/", { schema: pageSchema }, async (_request, reply) => sendPage(reply, "local-console", page));
  registerAssets(app, "local/assets", "/");
  // One look with the hosted pages: their stylesheet, the mark, scrolling tables reachable by
  // keyboard, and the guard of a click a redraw moved.
  registerAssets(app, "assets", "/assets/", [
    "site.css",
    "table-regions.js",
    "request-view.js",
    "shifted-clicks.js",
  ]);
  registerAssets(app, "site", "/", ["mark.svg", "favicon.svg"]);
}
