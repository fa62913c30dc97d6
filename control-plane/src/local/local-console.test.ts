// The `vault serve` console on a bare Fastify: the page with its strict policy, and its script and
// stylesheet from public/local/assets/ at the paths the page names.
import Fastify from "fastify";
import { expect, it } from "vitest";
import { registerRouteSchemas } from "../http/route-schemas.ts";
import { pageHeaders } from "../pages/page-headers.ts";
import { registerLocalConsole } from "./local-console.ts";

it("serves the page, /console.js, /console.css, the hosted stylesheet and mark, and nothing else", async () => {
  const app = Fastify();
  // The zod compilers every app of ours registers (the page declares a zod schema).
  registerRouteSchemas(app);
  registerLocalConsole(app);
  try {
    const page = await app.inject({ method: "GET", url: "/" });
    expect(page.statusCode).toBe(200);
    expect(page.headers["content-security-policy"]).toBe(
      pageHeaders("local-console")["content-security-policy"],
    );
    expect(page.headers["content-type"]).toBe("text/html; charset=utf-8");
    const scriptUrl = page.body.match(/<script src="(\/console\.[0-9a-f]{12}\.js)"><\/script>/)?.[1];
    const styleUrl = page.body.match(/<link rel="stylesheet" href="(\/console\.[0-9a-f]{12}\.css)">/)?.[1];
    expect(scriptUrl && styleUrl).toBeTruthy();
    expect(page.body).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>|\sstyle=|<style|\son[a-z]+=/i);
    const hashed = await app.inject({ method: "GET", url: scriptUrl! });
    expect(hashed.headers["cache-control"]).toContain("immutable");
    const script = await app.inject({ method: "GET", url: "/console.js" });
    expect(script.body).toBe(hashed.body);
    expect(script.statusCode).toBe(200);
    expect(script.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    expect(script.body).toContain("latch-operator-token");
    expect(script.body).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(/);
    const style = await app.inject({ method: "GET", url: styleUrl! });
    expect(style.headers["content-type"]).toBe("text/css; charset=utf-8");
    // One look with the hosted pages: their stylesheet and the mark, and no other hosted file.
    expect(page.body).toContain('<link rel="stylesheet" href="/assets/site.css">');
    expect(page.body).toContain('<script src="/assets/table-regions.js"></script>');
    expect((await app.inject({ method: "GET", url: "/assets/table-regions.js" })).statusCode).toBe(200);
    const shared = await app.inject({ method: "GET", url: "/assets/site.css" });
    expect(shared.statusCode).toBe(200);
    expect(shared.headers["content-type"]).toBe("text/css; charset=utf-8");
    expect((await app.inject({ method: "GET", url: "/mark.svg" })).headers["content-type"]).toMatch(
      /^image\/svg\+xml/,
    );
    for (const url of ["/console.html", "/assets/console.js", "/assets/auth.js", "/og.png", "/index.html"]) {
      expect((await app.inject({ method: "GET", url })).statusCode, url).toBe(404);
    }
  } finally {
    await app.close();
  }
});
