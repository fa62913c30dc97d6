// /docs/api: the OpenAPI document as a page a person reads, in the same Markdown pipeline and page
// as the other /docs pages. Grouped by who calls; each operation with its parameters, its body's
// schema, and every status it can answer with its media type.
import type { OpenApiDocument } from "./openapi-document.ts";

const GROUPS: [tag: string, title: string, sentence: string][] = [
  ["operator", "Operator API", "A signed-in operator's session cookie; `X-CSRF-Token` on POST and DELETE."],
  ["model", "Model clients", "An `avm_` bearer or an OAuth access token."],
  ["trusted", "Trusted runtimes", "An `avt_` bearer."],
  ["oauth", "OAuth 2.1 authorization server", "Public clients with PKCE S256; errors as RFC 6749 5.2."],
  ["public", "Public pages and files", "No credential."],
];

interface Operation {
  summary?: string;
  tags?: string[];
  parameters?: { name: string; in: string; required: boolean; schema: Record<string, unknown> }[];
  requestBody?: { content: Record<string, { schema?: unknown }> };
  responses: Record<string, { description: string; content?: Record<string, unknown> }>;
}

const code = (text: string) => `\`${text.replaceAll("`", "'")}\``;
const cell = (text: string) => text.replaceAll("|", "\\|").replaceAll("\n", " ");

function typeOf(schema: Record<string, unknown>): string {
  if (Array.isArray(schema.enum)) return schema.enum.map((v) => JSON.stringify(v)).join(" \\| ");
  if (typeof schema.type === "string") return schema.type;
  return "any";
}

export function apiReferenceMarkdown(document: OpenApiDocument): string {
  const lines = [
    "# HTTP API reference",
    "",
    `Every route of the hosted service, generated from the schemas that validate it. The machine-readable document is [/openapi.json](/openapi.json) (OpenAPI ${document.openapi}). Errors are \`{"error": {"code", "message"}}\` with the status of their code.`,
    "",
  ];
  for (const [tag, title, sentence] of GROUPS) {
    const operations = Object.entries(document.paths).flatMap(([path, methods]) =>
      Object.entries(methods as Record<string, Operation>)
        .filter(([, operation]) => operation.tags?.includes(tag))
        .map(([method, operation]) => ({ path, method, operation })),
    );
    if (operations.length === 0) continue;
    lines.push(`## ${title}`, "", sentence, "");
    for (const { path, method, operation } of operations) {
      lines.push(`### ${code(`${method.toUpperCase()} ${path}`)}`, "");
      if (operation.summary) lines.push(operation.summary, "");
      if (operation.parameters?.length) {
        lines.push("| parameter | in | required | type | description |", "|---|---|---|---|---|");
        for (const p of operation.parameters) {
          const description = typeof p.schema.description === "string" ? p.schema.description : "";
          lines.push(
            `| ${code(p.name)} | ${p.in} | ${p.required ? "yes" : "no"} | ${cell(typeOf(p.schema))} | ${cell(description)} |`,
          );
        }
        lines.push("");
      }
      for (const [type, media] of Object.entries(operation.requestBody?.content ?? {})) {
        lines.push(
          `Body (${code(type)}):`,
          "",
          "```json",
          JSON.stringify(media.schema ?? {}, null, 2),
          "```",
          "",
        );
      }
      lines.push("| status | media type | meaning |", "|---|---|---|");
      for (const [status, response] of Object.entries(operation.responses)) {
        const types =
          Object.keys(response.content ?? {})
            .map(code)
            .join(", ") || "none";
        lines.push(`| ${status} | ${types} | ${cell(response.description)} |`);
      }
      lines.push("");
    }
  }
  return `${lines.join("\n")}\n`;
}
