// BASE_URL as every check reads it: an https deployment written with capitals in its scheme or
// host must still set __Host- Secure cookies and match its own Origin.
import { expect, it } from "vitest";
import { loadConfig } from "./config.ts";

it("writes BASE_URL's scheme and host as the URL standard does, without a trailing slash", () => {
  expect(loadConfig({ BASE_URL: "HTTPS://Latch.Example.com/" }).BASE_URL).toBe("https://latch.example.com");
  expect(loadConfig({ BASE_URL: "https://latch.example.com:443" }).BASE_URL).toBe(
    "https://latch.example.com",
  );
  expect(loadConfig({ BASE_URL: "http://localhost:8787//" }).BASE_URL).toBe("http://localhost:8787");
  expect(loadConfig({}).BASE_URL).toBe("http://localhost:8787");
  expect(() => loadConfig({ BASE_URL: "ftp://latch.example.com" })).toThrow(/BASE_URL/);
});

it("refuses, in production, to start a proxy of its own or to turn certificate checks off", () => {
  const production = { NODE_ENV: "production", SMTP_URL: "smtp://127.0.0.1:2525" };
  expect(() => loadConfig(production)).toThrow(
    "Latch cannot start: the egress proxy runs as its own process in production; set EGRESS_URL.",
  );
  const withProxy = { ...production, EGRESS_URL: "127.0.0.1:50051" };
  expect(loadConfig(withProxy).EGRESS_URL).toBe("127.0.0.1:50051");
  for (const value of ["0", "", "false"]) {
    expect(() => loadConfig({ ...withProxy, NODE_TLS_REJECT_UNAUTHORIZED: value }), value).toThrow(
      "Latch cannot start: NODE_TLS_REJECT_UNAUTHORIZED other than 1 turns certificate checks off and is refused when NODE_ENV=production.",
    );
  }
  expect(loadConfig({ ...withProxy, NODE_TLS_REJECT_UNAUTHORIZED: "1" }).NODE_ENV).toBe("production");
  // A laptop starts its proxy alongside, whatever it does with its own TLS.
  expect(
    loadConfig({ NODE_ENV: "development", NODE_TLS_REJECT_UNAUTHORIZED: "0" }).EGRESS_URL,
  ).toBeUndefined();
});
