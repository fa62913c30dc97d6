// The plain-JSON answers of the hosted MCP endpoint (spec 4.1). POST /mcp itself has none here:
// its JSON-RPC frames are judged by the MCP server (mcp-server.ts), which answers for the frame's id.
import { z } from "zod";

/** GET /mcp/tools: each tool's name, description and the JSON schema of its arguments. */
export const toolList = z.object({
  tools: z.array(
    z.object({ name: z.string(), description: z.string(), inputSchema: z.record(z.string(), z.unknown()) }),
  ),
});

/** RFC 9728 protected-resource metadata: where an agent finds the authorization server. */
export const protectedResource = z.object({
  resource: z.string(),
  authorization_servers: z.array(z.string()),
  scopes_supported: z.array(z.string()),
  bearer_methods_supported: z.array(z.string()),
});
