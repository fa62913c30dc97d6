// The one rule for text an agent or a person types (DECISIONS "Approvals"): no NUL, no unpaired
// surrogate, no control characters (free text may keep tab and newline). Such text breaks jsonb and
// PostgreSQL text columns (a NUL is refused there, an unpaired surrogate is not valid UTF-8), and
// control characters forge lines in mail, logs and consoles. Both tiers judge text with this file.

/** What is wrong with a piece of text, in words a caller can act on. */
export type UnsafeTextReason = "nul" | "unpaired_surrogate" | "control_character";

export interface SafeTextOptions {
  /** Free text (a task description): tab, newline and carriage return are allowed. */
  multiline?: boolean;
}

const REASON_WORDS: Record<UnsafeTextReason, string> = {
  nul: "a NUL character",
  unpaired_surrogate: "an unpaired UTF-16 surrogate (invalid Unicode)",
  control_character: "a control character",
};

/** The sentence fragment for a reason: "contains a NUL character". */
export function describeUnsafeText(reason: UnsafeTextReason): string {
  return `contains ${REASON_WORDS[reason]}`;
}

function isAllowedControl(code: number, multiline: boolean): boolean {
  return multiline && (code === 0x09 || code === 0x0a || code === 0x0d);
}

/**
 * Why `text` is unsafe, or undefined when it is fine. C0 controls, DEL and C1 controls count as
 * control characters; tab, LF and CR are allowed in multiline text only.
 * @example unsafeTextReason("x\u0000y") // "nul"
 */
export function unsafeTextReason(text: string, options: SafeTextOptions = {}): UnsafeTextReason | undefined {
  const multiline = options.multiline ?? false;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === 0) return "nul";
    if (code < 0x20 || (code >= 0x7f && code <= 0x9f)) {
      if (!isAllowedControl(code, multiline)) return "control_character";
      continue;
    }
    if (code >= 0xd800 && code <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        i++;
        continue;
      }
      return "unpaired_surrogate";
    }
    if (code >= 0xdc00 && code <= 0xdfff) return "unpaired_surrogate";
  }
  return undefined;
}

export function isSafeText(text: string, options: SafeTextOptions = {}): boolean {
  return unsafeTextReason(text, options) === undefined;
}

/**
 * `text` with every unsafe character replaced by U+FFFD: for a record that must be written even
 * when a field slipped past the edge (an audit row is never skipped).
 */
export function toSafeText(text: string, options: SafeTextOptions = {}): string {
  if (isSafeText(text, options)) return text;
  const multiline = options.multiline ?? false;
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code >= 0xd800 && code <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        out += text[i]! + text[i + 1]!;
        i++;
      } else out += "\uFFFD";
      continue;
    }
    const isControl = code < 0x20 || (code >= 0x7f && code <= 0x9f);
    if ((isControl && !isAllowedControl(code, multiline)) || (code >= 0xdc00 && code <= 0xdfff)) {
      out += "\uFFFD";
    } else out += text[i]!;
  }
  return out;
}

/** A JSON-like value with every string in it (keys too) made safe; other values unchanged. */
export function toSafeJson(value: unknown, options: SafeTextOptions = { multiline: true }): unknown {
  if (typeof value === "string") return toSafeText(value, options);
  if (Array.isArray(value)) return value.map((v) => toSafeJson(v, options));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [toSafeText(k, options), toSafeJson(v, options)]),
    );
  }
  return value;
}
