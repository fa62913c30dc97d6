// The answers of GET /health and GET /ready (spec 4.3): nothing about keys or versions.
import { z } from "zod";

export const liveness = z.object({ ok: z.literal(true), product: z.string() });

const check = z.enum(["ok", "unavailable"]);
/** 200 when the database answers, 503 otherwise; `egress` says whether a proxy serves, nothing more. */
export const readiness = z.object({ ok: z.boolean(), checks: z.object({ database: check, egress: check }) });
