// The limits of one outbound call (spec 4.2 rules 5 and 6, section 8).
export const DEFAULT_TIMEOUT_MS = 10_000;
export const MIN_TIMEOUT_MS = 1_000;
export const MAX_TIMEOUT_MS = 30_000;
/** The model sees at most this much of a body. */
export const MODEL_BODY_LIMIT_BYTES = 256 * 1024;
export const ALLOWED_METHODS: ReadonlySet<string> = new Set(["GET", "POST", "PUT", "PATCH", "DELETE"]);
export const ALLOWED_CONTENT_TYPES: ReadonlySet<string> = new Set([
  "application/json",
  "application/x-www-form-urlencoded",
]);
