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
