// The public docs (spec 4.3 "Health and discovery"): one Markdown file per page in public/docs/,
// read once at start. /docs pages, /llms.txt and /llms-full.txt are all made from these same files,
// so the site and what a model reads never drift apart. `BASE_URL` in a file is this plane's own.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Marked } from "marked";
import { escapeHtml, PUBLIC_ROOT } from "../pages/page-files.ts";

export interface DocPage {
  /** The page's path: /docs, /docs/connect. */
  path: string;
  title: string;
  /** One line for /llms.txt. */
  summary: string;
  markdown: string;
  html: string;
}

/** Every page, in the order /llms.txt and /llms-full.txt list them. */
const SOURCES = [
  { file: "index.md", path: "/docs", summary: "What Latch is and how a call flows" },
  {
    file: "connect.md",
    path: "/docs/connect",
    summary: "Connect an MCP client with OAuth, a token, or locally",
  },
  {
    file: "approvals.md",
    path: "/docs/approvals",
    summary: "What each approval covers, the Approvals list, and revoking",
  },
  {
    file: "members.md",
    path: "/docs/members",
    summary: "Members, their roles, invitations and the two-person rule",
  },
  {
    file: "inject.md",
    path: "/docs/inject",
    summary: "Where a stored credential goes in the outgoing request",
  },
  { file: "cli.md", path: "/docs/cli", summary: "The vault command line: Latch on your own computer" },
  {
    file: "run.md",
    path: "/docs/run",
    summary: "Run Latch yourself: start it, mail without a server, device sign-in",
  },
  {
    file: "security.md",
    path: "/docs/security",
    summary: "How secrets are kept and how to report a vulnerability",
  },
] as const;

// Raw HTML in a source is shown as text, never passed through: the pages hold only what Markdown
// makes, and the strict policy of page-headers.ts ("site") would refuse any script anyway.
const markdown = new Marked({ gfm: true, renderer: { html: ({ text }) => escapeHtml(text) } });

export function readDocs(baseUrl: string): DocPage[] {
  return SOURCES.map((source) => {
    const text = readFileSync(join(PUBLIC_ROOT, "docs", source.file), "utf8").replaceAll("BASE_URL", baseUrl);
    const title = /^# (.+)$/m.exec(text)?.[1] ?? "Latch";
    return {
      path: source.path,
      title,
      summary: source.summary,
      markdown: text,
      html: markdown.parse(text, { async: false }),
    };
  });
}

/** /llms.txt (llmstxt.org): the title, a summary, and a link to each page's Markdown. */
export function llmsIndex(docs: readonly DocPage[], baseUrl: string): string {
  const lines = [
    "# Latch",
    "",
    "> A credential vault and broker for AI agents: an agent calls third-party APIs through Latch over MCP, an operator approves, and the agent never sees a secret.",
    "",
    `The hosted MCP address is ${baseUrl}/mcp (OAuth 2.1, discovered from ${baseUrl}/.well-known/oauth-protected-resource/mcp).`,
    "",
    "## Docs",
    "",
    ...docs.map((doc) => `- [${doc.title}](${baseUrl}${doc.path}): ${doc.summary}`),
    "",
    "## Optional",
    "",
    `- [Full docs](${baseUrl}/llms-full.txt): every page above in one Markdown file`,
    "",
  ];
  return lines.join("\n");
}

/** /llms-full.txt: every page's Markdown, one after the other. */
export function llmsFull(docs: readonly DocPage[]): string {
  return `${docs.map((doc) => doc.markdown.trim()).join("\n\n---\n\n")}\n`;
}
