// What schemathesis found in CI (npm run fuzz:api), each kept as a test that failed before its fix:
// a server error (500) on input a client controls is a bug, whatever the input.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HostedHarness, readyOperator, startHosted } from "./hosted.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
});
afterAll(async () => {
  await h.close();
});

describe("inputs the API fuzzing found answered 500", () => {
  it("a QUERY request without a Content-Type is 415 in our envelope", async () => {
    const answer = await h.app.inject({ method: "QUERY" as never, url: "/health" });
    expect(answer.statusCode).toBe(415);
    expect(answer.json().error.code).toBe("unsupported_media_type");
  });

  it("a path segment over the router's 100 characters is 400", async () => {
    const op = await readyOperator(h, "fuzz");
    const answer = await op.request("POST", `/api/integrations/${"x".repeat(101)}/start`, { item_name: "X" });
    expect(answer.statusCode).toBe(400);
    expect(answer.json().error).toMatchObject({ code: "invalid_request" });
  });

  it("a device page reached without its session is a 400 page, not a 500", async () => {
    const resume = await h.app.inject({ method: "GET", url: "/device/0" });
    expect(resume.statusCode).toBe(400);
    expect(resume.headers["content-type"]).toMatch(/^text\/html/);
    expect(resume.body).toContain("Open the code page again");
    const post = await h.app.inject({
      method: "POST",
      url: "/device",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      payload: "",
    });
    expect(post.statusCode).toBe(400);
    expect(post.headers["content-type"]).toMatch(/^text\/html/);
  });
});
