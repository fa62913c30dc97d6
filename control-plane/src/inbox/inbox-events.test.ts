import { describe, expect, it } from "vitest";
import type { AuditedCall } from "../audit/audit.repo.ts";
import { formatServerSentEvent, toInboxEvent } from "./inbox-events.ts";

const row = (action: string, detail: Record<string, unknown> = {}): AuditedCall => ({
  seq: 7,
  at: new Date("2026-11-26T05:00:00.000Z"),
  environment: "staging",
  actor: "agent:cli_abc",
  actor_name: "Nightly sync",
  action,
  item_name: "API_KEY",
  host: "api.example.com",
  detail,
});

describe("the inbox event an audit row is", () => {
  it.each([
    ["grant_requested", "approval_requested", {}],
    ["grant_approved", "approval_decided", { decision: "approved" }],
    ["grant_first_approved", "approval_decided", { decision: "first_of_two", approvals: "1 of 2" }],
    ["grant_denied", "approval_decided", { decision: "denied" }],
    ["need_requested", "need_created", {}],
    ["need_fulfilled", "need_closed", { status: "fulfilled" }],
    ["need_denied", "need_closed", { status: "denied" }],
    ["need_closed", "need_closed", { status: "closed" }],
  ])("%s is %s", (action, type, data) => {
    const event = toInboxEvent(row(action, { grant_id: "grt_1", approvals: "1 of 2" }));
    expect(event?.type).toBe(type);
    expect(event?.id).toBe(7);
    expect(event?.data).toMatchObject(data);
  });

  it("names the agent by id and by its name as issued", () => {
    expect(toInboxEvent(row("grant_requested", { agent_id: "cli_abc" }))?.data.agent).toEqual({
      id: "cli_abc",
      name: "Nightly sync",
    });
  });

  it("shows the invisible characters of the agent's name as U+FFFD, as every approval does", () => {
    const named = {
      ...row("grant_requested", { agent_id: "cli_abc" }),
      actor_name: "Read\u202Eetirw\u200B bot",
    };
    expect(toInboxEvent(named)?.data.agent).toEqual({ id: "cli_abc", name: "Read\uFFFDetirw\uFFFD bot" });
    const asking = { ...row("need_requested", { need_id: "need_1" }), actor_name: "\u2066sync\u2069" };
    expect(toInboxEvent(asking)?.data.agent).toEqual({ id: "cli_abc", name: "\uFFFDsync\uFFFD" });
  });

  it("is none for a row the inbox does not follow", () => {
    expect(toInboxEvent(row("http_request"))).toBeUndefined();
    expect(toInboxEvent(row("grant_revoked"))).toBeUndefined();
  });

  it("is one data line on the wire, whatever the text holds", () => {
    const wire = formatServerSentEvent({
      id: 3,
      type: "x",
      data: { path: "/a\r\nevent: forged\n\ndata: 1" },
    });
    expect(wire.split("\n")).toEqual(["id: 3", "event: x", expect.stringMatching(/^data: \{/), "", ""]);
  });
});
