// What tools/list shows an agent: every argument of every tool described, nested ones included;
// and a wrong argument refused with one sentence naming it and the shape it must have.
import { describe, expect, it } from "vitest";
import { describeArgumentProblem } from "./argument-problem.ts";
import { listToolDefinitions, TOOL_ARGS, type ToolName } from "./tool-schemas.ts";

type JsonSchema = Record<string, unknown>;

/** Every property schema in `schema`, with its dotted path: object properties, array items, unions. */
function propertiesOf(schema: JsonSchema, prefix = ""): [string, JsonSchema][] {
  const found: [string, JsonSchema][] = [];
  const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
  for (const [name, property] of Object.entries(properties)) {
    found.push([`${prefix}${name}`, property], ...propertiesOf(property, `${prefix}${name}.`));
  }
  for (const key of ["anyOf", "oneOf", "allOf"] as const) {
    for (const branch of (schema[key] ?? []) as JsonSchema[]) found.push(...propertiesOf(branch, prefix));
  }
  if (schema.items && typeof schema.items === "object") {
    found.push(...propertiesOf(schema.items as JsonSchema, `${prefix}[].`));
  }
  return found;
}

describe("tools/list", () => {
  it("describes every argument of every tool", () => {
    const undescribed: string[] = [];
    let count = 0;
    for (const tool of listToolDefinitions()) {
      for (const [path, property] of propertiesOf(tool.inputSchema)) {
        count += 1;
        const text = property.description;
        if (typeof text !== "string" || text.trim().length < 8) undescribed.push(`${tool.name}.${path}`);
      }
    }
    expect(undescribed).toEqual([]);
    // The walk saw the arguments (http_request alone has ten).
    expect(count).toBeGreaterThanOrEqual(10);
  });
});

/** The sentence the MCP server answers -32602 with, for these arguments of `tool`. */
function problemOf(tool: ToolName, args: unknown): string {
  const parsed = TOOL_ARGS[tool].safeParse(args);
  if (parsed.success) throw new Error(`${JSON.stringify(args)} is valid for ${tool}`);
  return describeArgumentProblem(tool, parsed.error, args);
}

describe("a wrong argument is one sentence naming it and its shape", () => {
  it.each([
    [
      "an unknown enum value",
      "http_request",
      { method: "TRACE", path: "/" },
      "`method` must be one of GET, POST, PUT, PATCH, DELETE.",
    ],
    [
      "a missing argument",
      "http_request",
      { method: "GET" },
      "`path` is required: a non-empty string of at most 8192 characters.",
    ],
    [
      "a missing enum argument",
      "http_request",
      { path: "/v1" },
      "`method` is required: one of GET, POST, PUT, PATCH, DELETE.",
    ],
    [
      "a wrong type",
      "http_request",
      { method: "GET", path: "/", timeout_ms: "5s" },
      "`timeout_ms` must be a whole number from 1000 to 30000.",
    ],
    [
      "a number out of range",
      "http_request",
      { method: "GET", path: "/", timeout_ms: 50 },
      "`timeout_ms` must be a whole number from 1000 to 30000.",
    ],
    [
      "a bad shape",
      "http_request",
      { method: "POST", path: "/", body: "a=1" },
      "`body` must be a JSON object or array.",
    ],
    [
      "a boolean given as text",
      "setup",
      { host: "api.example.com", dry_run: "yes" },
      "`dry_run` must be true or false.",
    ],
    [
      "a provider it does not know",
      "setup",
      { provider: "myspace" },
      "`provider` must be one of spotify, github, google, slack, stripe.",
    ],
    [
      "an argument it does not define",
      "list_items",
      { agent_id: "x" },
      "`agent_id` is not an argument of list_items; list_items takes no arguments.",
    ],
    [
      "arguments that are no object",
      "find_items",
      "api.example.com",
      "The arguments of find_items must be a JSON object.",
    ],
  ] as const)("%s", (_case, tool, args, sentence) => {
    expect(problemOf(tool, args)).toBe(sentence);
  });

  it("a body with GET is refused before any approval is asked, even an empty one; other methods keep it", () => {
    for (const body of [{}, { q: 1 }, []]) {
      expect(
        problemOf("http_request", { method: "GET", path: "/v1/me", host: "api.example.com", body }),
      ).toBe("`body` is not sent with GET: leave it out, or use POST, PUT or PATCH.");
    }
    for (const method of ["POST", "PUT", "PATCH", "DELETE"] as const) {
      expect(
        TOOL_ARGS.http_request.safeParse({ method, path: "/x", host: "a.example", body: {} }).success,
      ).toBe(true);
    }
  });

  it("an undefined argument names the ones that exist", () => {
    expect(problemOf("request_grant", { item_name: "A", agent_id: "x" })).toBe(
      "`agent_id` is not an argument of request_grant; the arguments of request_grant are item_name, task_description.",
    );
  });

  it("unsafe text says what is wrong with it, never echoing it", () => {
    const sentence = problemOf("http_request", { method: "GET", path: "/", host: "api.\u0000evil" });
    expect(sentence).toBe("`host` contains a NUL character.");
  });

  it("is never a zod dump: one line, no JSON, no zod wording", () => {
    for (const args of [{}, { method: 1, path: [], body: 5, dry_run: {} }]) {
      const sentence = problemOf("http_request", args);
      expect(sentence.split("\n")).toHaveLength(1);
      expect(sentence).not.toMatch(/[{}[\]"]|Invalid input|expected/);
      expect(sentence).toMatch(/^`\w+` .+\.$/);
    }
  });
});
