// The shapes of the clients API at the edge (spec 4.3 "Clients"): what an operator sends to issue
// a model or trusted client, and the one answer that carries its token.
import { safeString } from "@latch/shared/text/safe-string";
import { z } from "zod";

/**
 * POST /api/clients/{model,trusted}. Both optional: a blank name becomes "<kind> client", a missing
 * environment the plane's default; one the plane does not serve is 404 (the service decides).
 */
export const clientInput = z.object({
  name: safeString().optional(),
  environment: safeString().optional(),
});

/** An issued or rotated client: the token is shown this once (spec 4.3). */
export const issuedClient = z.object({
  client_id: z.string(),
  kind: z.enum(["model", "trusted"]),
  name: z.string(),
  environment: z.string(),
  token: z.string(),
  /** Model clients only: where the agent connects. */
  mcp_url: z.string().optional(),
});
