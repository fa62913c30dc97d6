// The arguments of an http_request (spec 4.2) and the shape of its answer (spec 2.8).

import { HTTP_METHODS } from "@latch/shared/requests/methods";
import { freeText, safeString } from "@latch/shared/text/safe-string";
import { z } from "zod";

export const httpRequestArgs = z
  .object({
    method: z.enum(HTTP_METHODS).describe("HTTP method"),
    path: safeString()
      .min(1)
      .max(8192)
      .describe(
        "Path starting with / (query included), or a full https:// URL (the host is then taken from it)",
      ),
    host: safeString()
      .min(1)
      .max(253)
      .optional()
      .describe("Exact API hostname, e.g. api.github.com (or give item_name, or a full URL in path)"),
    item_name: safeString()
      .min(1)
      .max(128)
      .optional()
      .describe("Exact stored credential name (or give host, or a full URL in path)"),
    body: z
      .union([z.record(z.string(), z.unknown()), z.array(z.unknown())])
      .optional()
      .describe("Request body for POST, PUT, PATCH: JSON, or form-encoded when content_type says so"),
    content_type: z
      .enum(["application/json", "application/x-www-form-urlencoded"])
      .optional()
      .describe("How body is encoded; application/json unless given"),
    client_id: safeString()
      .max(256)
      .optional()
      .describe("Public OAuth client ID, when the credential is a client secret"),
    task_description: freeText()
      .optional()
      .describe("What the call is for; shown to the operator (first 500 characters)"),
    timeout_ms: z
      .number()
      .int()
      .min(1000)
      .max(30000)
      .optional()
      .describe("How long to wait for the API, in milliseconds (default 10000)"),
    dry_run: z
      .boolean()
      .optional()
      .describe("true: report the credential, approval and what would be sent, without sending"),
  })
  .strict()
  // The proxy never sends a GET with a body (egress-proxy check-call.ts): refused here, before an
  // operator is asked to approve a call that could never leave.
  .superRefine((args, ctx) => {
    if (args.method === "GET" && args.body !== undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["body"],
        message: "is not sent with GET: leave it out, or use POST, PUT or PATCH",
      });
    }
  });

export type HttpRequestArgs = z.infer<typeof httpRequestArgs>;

/** Spec 2.8. `status` duplicates `origin_status` for one release. */
export interface HttpRequestResult {
  origin_status?: number;
  status?: number;
  body?: string;
  origin_headers?: Record<string, string>;
  body_truncated?: boolean;
  error?: { code: string; message: string };
  hint?: string;
  /** Spec 4.2 rule 3: the path the call was sent to instead of the one given. */
  path_rewritten?: { from: string; to: string };
  /** Spec 2.8 / rule 7: an access token was minted for this call; its last four characters. */
  refreshed?: boolean;
  token_last4?: string;
  next?: { for_model: string; tool?: string; arguments?: Record<string, unknown> };
}

/** What the caller needs besides the answer: whether the request left (a prompt grant is spent). */
export interface CallOutcome {
  reachedOrigin: boolean;
  itemName: string;
  host: string;
  result: HttpRequestResult;
}
