// A member's role is judged when the request acts, not when its headers arrived (DECISIONS
// "Teams": removing a member ends their sessions' access to that organisation). A client may send
// a request's headers and hold its body back; a member removed or demoted meanwhile must not finish
// it once the body arrives: the session and membership are read again after the body
// (operator-guard.ts), and a request that does not arrive whole within a minute is not waited for.
import { PassThrough } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { REQUEST_TIMEOUT_MS } from "../src/app.ts";
import { type Browser, type HostedHarness, startHosted } from "./hosted.ts";
import { type Member, startTeam, type Team } from "./teams.ts";

let h: HostedHarness;
beforeAll(async () => {
  h = await startHosted();
}, 60_000);
afterAll(async () => {
  await h?.close();
});

/**
 * A request whose headers are sent now and whose body only when `finish` is called. `judged`
 * settles once the server asks for the body: every check of the headers (the session, its role,
 * the route's declared principals) has run by then.
 */
function heldRequest(browser: Browser, method: "POST" | "DELETE" | "PATCH", url: string) {
  const csrf = browser.cookies.get("__Host-latch_csrf") ?? browser.cookies.get("latch_csrf");
  const body = new PassThrough();
  // light-my-request waits for 'readable' on the payload when the server reads a body not there yet.
  const judged = new Promise<void>((resolve) => {
    body.on("newListener", (event) => {
      if (event === "readable") resolve();
    });
  });
  const answer = h.app.inject({
    method,
    url,
    headers: {
      origin: "http://localhost:8787",
      cookie: [...browser.cookies].map(([name, value]) => `${name}=${value}`).join("; "),
      "x-csrf-token": csrf ?? "",
      "content-type": "application/json",
    },
    payload: body,
    remoteAddress: "10.43.0.9",
  });
  return {
    judged,
    answer,
    finish(json: unknown) {
      body.end(JSON.stringify(json));
    },
  };
}

async function auditOf(member: Member, action: string) {
  const answer = await member.browser.request("GET", `/api/audit?action=${action}`);
  expect(answer.statusCode, answer.body).toBe(200);
  return (answer.json().events as { action: string; detail: Record<string, unknown> }[]).filter(
    (event) => event.action === action,
  );
}

/** The team's admin made a second owner (the owner's own request, answered 200). */
async function secondOwner(team: Team): Promise<Member> {
  const promoted = await team.owner.browser.request(
    "POST",
    `/api/orgs/members/${team.admin.operatorId}/role`,
    {
      role: "owner",
    },
  );
  expect(promoted.statusCode, promoted.body).toBe(200);
  return team.admin;
}

describe("a request whose headers arrived before its sender lost the role", () => {
  it("issues no model client when the admin was removed before the body arrived", async () => {
    const team = await startTeam(h);
    const held = heldRequest(team.admin.browser, "POST", "/api/clients/model");
    await held.judged;
    const removed = await team.owner.browser.request("DELETE", `/api/orgs/members/${team.admin.operatorId}`);
    expect(removed.statusCode, removed.body).toBe(200);
    held.finish({ name: "after removal" });
    const answer = await held.answer;
    expect(answer.statusCode, answer.body).toBe(403);
    expect(answer.json().error.code).toBe("forbidden");
    expect(answer.body).not.toMatch(/avm_/);
    const clients = (await team.owner.browser.request("GET", "/api/clients")).json();
    expect(JSON.stringify(clients)).not.toContain("after removal");
    const issued = await auditOf(team.owner, "client_issued");
    expect(issued.filter((event) => JSON.stringify(event).includes("after removal"))).toEqual([]);
  });

  it("deletes nothing when an owner was demoted to auditor before the body arrived", async () => {
    const team = await startTeam(h);
    const other = await secondOwner(team);
    const name = (await team.owner.browser.request("GET", "/api/orgs/settings")).json().organisation.name;
    const held = heldRequest(other.browser, "DELETE", "/api/orgs");
    await held.judged;
    const demoted = await team.owner.browser.request("POST", `/api/orgs/members/${other.operatorId}/role`, {
      role: "auditor",
    });
    expect(demoted.statusCode, demoted.body).toBe(200);
    held.finish({ confirm_name: name });
    const answer = await held.answer;
    expect(answer.statusCode, answer.body).toBe(403);
    expect(answer.json().error).toMatchObject({ code: "forbidden_role", required_roles: ["owner"] });
    const settings = await team.owner.browser.request("GET", "/api/orgs/settings");
    expect(settings.statusCode, settings.body).toBe(200);
    expect(settings.json().organisation.name).toBe(name);
  });

  it("changes no setting when an owner was removed before the body arrived", async () => {
    const team = await startTeam(h);
    const other = await secondOwner(team);
    const name = (await team.owner.browser.request("GET", "/api/orgs/settings")).json().organisation.name;
    const held = heldRequest(other.browser, "PATCH", "/api/orgs/settings");
    await held.judged;
    const removed = await team.owner.browser.request("DELETE", `/api/orgs/members/${other.operatorId}`);
    expect(removed.statusCode, removed.body).toBe(200);
    held.finish({ name: "Renamed by a removed owner" });
    const answer = await held.answer;
    expect(answer.statusCode, answer.body).toBe(403);
    expect(answer.json().error.code).toBe("forbidden");
    const settings = (await team.owner.browser.request("GET", "/api/orgs/settings")).json();
    expect(settings.organisation.name).toBe(name);
    expect(await auditOf(team.owner, "setting_changed")).toEqual([]);
  });

  it("still acts for a member whose role did not change while the body was held", async () => {
    const team = await startTeam(h);
    const held = heldRequest(team.admin.browser, "POST", "/api/clients/model");
    await held.judged;
    held.finish({ name: "held but allowed" });
    const answer = await held.answer;
    expect(answer.statusCode, answer.body).toBe(201);
    expect(answer.json().token).toMatch(/^avm_/);
  });
});

describe("the server's wait for a request", () => {
  it("is a minute for the whole request, never unbounded", () => {
    expect(REQUEST_TIMEOUT_MS).toBe(60_000);
    expect(h.app.server.requestTimeout).toBe(REQUEST_TIMEOUT_MS);
  });
});
