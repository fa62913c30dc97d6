// How an approval mail and page name the agent: by its client's name, on one line, never a bare
// cli_ id, and never an empty pair of quotes.
import { expect, it } from "vitest";
import { agentWords, approvalMail, describeAgent, grantDetail } from "./approval-text.ts";

it("names the agent by its client's name, on one line and at most 80 characters", () => {
  expect(describeAgent({ agent_id: "cli_abc", agent_name: "Claude Code" })).toBe('The agent "Claude Code"');
  expect(describeAgent({ agent_id: "cli_abc", agent_name: "evil\r\nBcc: x@y" })).toBe(
    'The agent "evil Bcc: x@y"',
  );
  expect(describeAgent({ agent_id: "cli_abc", agent_name: "x".repeat(200) })).toBe(
    `The agent "${"x".repeat(80)}"`,
  );
});

it("falls back to an id an operator typed, and never shows a bare cli_ id or empty quotes", () => {
  expect(describeAgent({ agent_id: "cli_abc", agent_name: "cli_abc" })).toBe("An agent without a name");
  expect(describeAgent({ agent_id: "agent-3", agent_name: "" })).toBe('The agent "agent-3"');
  expect(describeAgent({ agent_id: "agent-3", agent_name: "agent-3" })).toBe('The agent "agent-3"');
});

// Issue H8 item 2: the agent's name and task reach the mail's subject and body, the approval page
// and the console; direction overrides and zero-width characters must not make them read otherwise.
const RLO = "\u202E";
const ZWSP = "\u200B";

it("shows the invisible characters of an agent's name and task as U+FFFD, in the subject and the body", () => {
  expect(describeAgent({ agent_id: "cli_abc", agent_name: `Claude${ZWSP} Code${RLO}evil` })).toBe(
    'The agent "Claude\uFFFD Code\uFFFDevil"',
  );
  expect(agentWords(`Read the invoice${RLO}txt.exe\r\nthen stop`)).toBe(
    "Read the invoice\uFFFDtxt.exe then stop",
  );
  const grant = {
    grant_id: "grt_1",
    policy: "prompt",
    status: "pending",
    environment_id: "production",
    item_name: "API_KEY",
    agent_id: "cli_abc",
    agent_name: `helper${RLO}regnad`,
    tool_id: "http_request",
    expires_at: null,
    created_at: "2026-01-01T00:00:00.000Z",
    approved_at: null,
    consumed_at: null,
    task_id: null,
    task_description: `list issues${RLO}seteled${ZWSP}`,
    scope: null,
    call: { method: "GET", host: "api.example.com", path: "/v1/issues", body_sha256: null },
    approvals: null,
  };
  const mail = approvalMail(grant, null, "12345678", "https://latch.example/approve?token=x");
  for (const text of [mail.subject, mail.text, grantDetail({ ...grant, body: null })]) {
    expect(text).not.toMatch(/[\u202E\u200B]/);
  }
  expect(mail.subject).toContain('"helper\uFFFDregnad"');
  expect(mail.text).toContain('Task (written by the agent): "list issues\uFFFDseteled\uFFFD"');
});
