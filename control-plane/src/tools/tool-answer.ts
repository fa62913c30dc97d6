// What a tool handler is and answers, whatever transport carries it (MCP over HTTP or stdio).
import type { z } from "zod";
import type { TOOL_ARGS, ToolName } from "./tool-schemas.ts";

/** What a tool answers: the JSON payload, and whether MCP should flag it as an error result. */
export interface ToolAnswer {
  payload: Record<string, unknown>;
  isError?: boolean;
}

/** Who is calling: set by the transport from its credential, never from the frame. */
export interface ToolCaller {
  agentId: string;
}

export type ToolHandlers = {
  [N in ToolName]: (args: z.infer<(typeof TOOL_ARGS)[N]>, caller: ToolCaller) => Promise<ToolAnswer>;
};
