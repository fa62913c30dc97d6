// A client metadata document is a stranger's JSON: a string in it PostgreSQL cannot store (a NUL, a
// lone surrogate) is refused like any other invalid document, 400 invalid_client naming the field,
// before its client_name reaches the interaction's jsonb row (where it was a 500 server_error).
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CIMD_FAILED_FETCHES_PER_HOST } from "../../src/oauth/cimd-fetch.ts";
import { testDatabase } from "../database.ts";
import { type HostedHarness, startHosted } from "../hosted.ts";
import { forgetDocumentFetches, fromAddress, pkcePair, RESOURCE, testAddress } from "./oauth-flow.ts";

let h: HostedHarness;
const HOST = "api.latch.test";
const REDIRECT = "https://agent.example/callback";
/** The client_name each folder's documents carry, as JSON text (escapes kept). */
const NAMES: Record<string, string> = {
  nul: '"Claude\\u0000x"',
  surrogate: '"Cl\\ud800aude"',
  key: '"Claude", "x\\u0000y": 1',
  fine: '"Claude"',
};

beforeAll(async () => {
  h = await startHosted();
  h.egress.setHandler((req, res) => {
    const url = `https://${req.headers.host}${req.url}`;
    const folder = req.url?.split("/")[1] ?? "";
    res.setHeader("content-type", "application/json");
    res.end(
      `{"client_id":${JSON.stringify(url)},"client_name":${NAMES[folder]},"redirect_uris":${JSON.stringify([REDIRECT])}}`,
    );
  });
});
afterAll(async () => {
  await h?.close();
});

async function authorize(folder: string) {
  // A window of our own; on a PostgreSQL database kept between runs, earlier runs' counts go too.
  h.clock.advance(3_600_000 + 60_000);
  await forgetDocumentFetches(HOST);
  const { db } = await testDatabase();
  await db
    .deleteFrom("rate_limit_hits")
    .where("bucket", "=", `${CIMD_FAILED_FETCHES_PER_HOST.name}:${HOST}`)
    .execute();
  const clientId = `https://${HOST}/${folder}/${randomBytes(6).toString("hex")}.json`;
  const query = new URLSearchParams({
    client_id: clientId,
    redirect_uri: REDIRECT,
    response_type: "code",
    code_challenge: pkcePair().challenge,
    code_challenge_method: "S256",
    state: "s",
    resource: RESOURCE,
    scope: "mcp",
  });
  return fromAddress(h.app, testAddress()).inject({ method: "GET", url: `/oauth/authorize?${query}` });
}

describe("a client metadata document with text PostgreSQL cannot store", () => {
  it.each([
    ["nul", /client_name contains/],
    ["surrogate", /client_name contains/],
    ["key", /a field name contains/],
  ])("%s: 400 invalid_client naming the field, never a 500", async (folder, names) => {
    const answer = await authorize(folder);
    expect(answer.statusCode, answer.body.slice(0, 400)).toBe(400);
    expect(answer.body).toContain("(invalid_client)");
    expect(answer.body).toContain("the client metadata document is refused");
    expect(answer.body).toMatch(names);
    expect(answer.headers.location).toBeUndefined();
  });

  it("a document with ordinary text goes on to consent", async () => {
    const answer = await authorize("fine");
    expect(answer.statusCode, answer.body.slice(0, 400)).toBe(303);
    expect(String(answer.headers.location)).toMatch(/\/consent\?uid=/);
  });
});
