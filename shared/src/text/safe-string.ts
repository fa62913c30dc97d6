// The typed-text rule (safe-text.ts) where input arrives: zod strings for every schema that takes
// text a person or an agent typed, and the same check for a field a route reads by hand. A NUL, an
// unpaired surrogate or a control character is then a 400 / -32602 naming the field, never a
// database error later (PostgreSQL refuses a NUL in text and jsonb, and invalid Unicode).
import { z } from "zod";
import { AppError, type ErrorCode } from "../errors.ts";
import { describeUnsafeText, type SafeTextOptions, unsafeTextReason } from "./safe-text.ts";

/**
 * A string field that must be safe text: one line, or free text (tab and newlines kept) with
 * `multiline`. The issue's message is the reason only ("contains a NUL character"); the caller's
 * formatter puts the field's name in front.
 * @example safeString().min(1).max(128)              // a name
 * @example safeString({ multiline: true }).max(10_000) // a task description
 */
export function safeString(options: SafeTextOptions = {}) {
  return z.string().superRefine((text, ctx) => {
    const reason = unsafeTextReason(text, options);
    if (reason) ctx.addIssue({ code: "custom", message: describeUnsafeText(reason), params: { reason } });
  });
}

/** Free text a person reads (a task description, a message): tab and newlines are kept. */
export function freeText() {
  return safeString({ multiline: true });
}

/**
 * Throws 400 naming `field` when `value` is a string that is not safe text (one line unless
 * `multiline`). Any other value passes: the field's own check judges its type.
 * @example refuseUnsafeText("agent_id", "a\u0000b") // throws "agent_id contains a NUL character"
 */
export function refuseUnsafeText(
  field: string,
  value: unknown,
  options: SafeTextOptions & { code?: ErrorCode } = {},
): void {
  if (typeof value !== "string") return;
  const reason = unsafeTextReason(value, options);
  if (reason) throw new AppError(options.code ?? "invalid_request", `${field} ${describeUnsafeText(reason)}`);
}
