// The one sentence a wrong tool argument is refused with (JSON-RPC -32602): the argument by name
// and the shape it must have, read from the same JSON schema tools/list shows, never a zod dump
// and never the value sent (it could be anything the agent had at hand).
import type { z } from "zod";
import { listToolDefinitions, type ToolName } from "./tool-schemas.ts";

interface PropertySchema {
  type?: string;
  enum?: unknown[];
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  anyOf?: PropertySchema[];
  description?: string;
}

interface ObjectSchema {
  properties?: Record<string, PropertySchema>;
  required?: string[];
}

/** What a value of `schema` looks like, in words: "one of GET, POST", "an integer from 1 to 9". */
export function describeShape(schema: PropertySchema | undefined): string {
  if (!schema) return "a valid value";
  if (schema.enum) return `one of ${schema.enum.map(String).join(", ")}`;
  if (schema.anyOf) {
    const kinds = schema.anyOf.map((s) => s.type).filter((t): t is string => Boolean(t));
    if (kinds.includes("object") && kinds.includes("array")) return "a JSON object or array";
    return schema.anyOf.map(describeShape).join(" or ");
  }
  switch (schema.type) {
    case "string": {
      const isNonEmpty = (schema.minLength ?? 0) > 0;
      const limit = schema.maxLength === undefined ? "" : ` of at most ${schema.maxLength} characters`;
      return `${isNonEmpty ? "a non-empty string" : "a string"}${limit}`;
    }
    case "integer":
    case "number": {
      const noun = schema.type === "integer" ? "a whole number" : "a number";
      if (schema.minimum !== undefined && schema.maximum !== undefined) {
        return `${noun} from ${schema.minimum} to ${schema.maximum}`;
      }
      return noun;
    }
    case "boolean":
      return "true or false";
    case "object":
      return "a JSON object";
    case "array":
      return "a JSON array";
    default:
      return "a valid value";
  }
}

const SCHEMAS = new Map(listToolDefinitions().map((t) => [t.name, t.inputSchema as ObjectSchema]));

/**
 * The sentence for the first problem of a tool's arguments.
 *
 * @example describeArgumentProblem("http_request", error, { method: "TRACE", path: "/" })
 * // "`method` must be one of GET, POST, PUT, PATCH, DELETE."
 */
export function describeArgumentProblem(tool: ToolName, error: z.ZodError, args: unknown): string {
  const schema = SCHEMAS.get(tool) ?? {};
  const properties = schema.properties ?? {};
  const names = Object.keys(properties);
  const issue = error.issues[0];
  if (!issue) return `The arguments of ${tool} are not valid.`;
  if (issue.code === "unrecognized_keys") {
    const unknown = issue.keys.map((k) => `\`${k.slice(0, 64)}\``).join(", ");
    const known =
      names.length === 0 ? `${tool} takes no arguments` : `the arguments of ${tool} are ${names.join(", ")}`;
    return `${unknown} ${issue.keys.length === 1 ? "is not an argument" : "are not arguments"} of ${tool}; ${known}.`;
  }
  // A path can hold a key the agent chose (a header's name): kept short, as the unknown keys are.
  const name = issue.path.map(String).join(".").slice(0, 128);
  if (name === "") {
    // The arguments as a whole: not an object, or a rule between arguments (a refine's message).
    if (issue.code === "custom") return `${issue.message.replace(/\.$/, "")}.`;
    return `The arguments of ${tool} must be a JSON object.`;
  }
  const top = String(issue.path[0]);
  const property = issue.path.length === 1 ? properties[top] : undefined;
  const shape = describeShape(property);
  const isMissing =
    issue.path.length === 1 && (typeof args !== "object" || args === null || !Object.hasOwn(args, top));
  if (isMissing) return `\`${name}\` is required: ${shape}.`;
  // A typed-text refusal says what is wrong with the text ("contains a NUL character").
  if (issue.code === "custom") return `\`${name}\` ${issue.message.replace(/\.$/, "")}.`;
  return `\`${name}\` must be ${shape}.`;
}
