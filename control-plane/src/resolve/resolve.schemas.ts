// The shapes of POST /runtime/resolve (spec 4.3 "Trusted resolve") at the edge.
import { safeString } from "@latch/shared/text/safe-string";
import { z } from "zod";

/** A name that matches no credential is 404 from the route, not refused here. */
export const resolveInput = z.object({ item_name: safeString().max(128) });

/** The plaintext, for the trusted runtime that asked, this once. */
export const resolvedItem = z.object({ item_name: z.string(), value: z.string() });
