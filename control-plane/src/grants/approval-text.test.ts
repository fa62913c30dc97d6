// How an approval mail and page name the agent: by its client's name, on one line, never a bare
// cli_ id, and never an empty pair of quotes.
import { expect, it } from "vitest";
import { describeAgent } from "./approval-text.ts";

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
