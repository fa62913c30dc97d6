// The body of a request an operator approves (DECISIONS "The approval, readable and reversible"):
// what is kept of it (its first 64 KiB, never a stored secret: the proxy injects those later) and
// how it is shown: JSON re-indented without being re-parsed into other values, form fields as
// name and value, anything else as text. One view for the inbox, the approval page, the collect
// page and the mail, so each shows the same thing. Pure functions.
import { showHidden } from "@latch/shared/text/show-hidden";

// What an operator cannot see is shown as U+FFFD (shared/src/text/show-hidden.ts).
export { showHidden };

/** DECISIONS: a pending request keeps the agent's body up to 64 KiB. */
export const MAX_KEPT_BODY_BYTES = 64 * 1024;
/** A re-indented body longer than this is shown as sent (deep nesting would multiply it). */
const MAX_PRETTY_CHARS = 2 * MAX_KEPT_BODY_BYTES;
/** Indentation stops growing here, so a deeply nested body stays readable and bounded. */
const MAX_INDENT_LEVELS = 16;

/** A body as a grant or a need request keeps it. */
export interface KeptBody {
  /** The first 64 KiB of the bytes that would be sent, cut on a character boundary. */
  text: string;
  /** The size of the whole body in bytes. */
  bytes: number;
  contentType: string;
}

/** A body as an operator reads it (the inbox, the approval and collect pages). */
export interface BodyView {
  content_type: string;
  /** The whole body's size in bytes. */
  size: number;
  /** True when the body is longer than what was kept: `text` is its first 64 KiB. */
  is_cut: boolean;
  /** json: `text` re-indented; form: `fields`; text: `text` as sent. */
  format: "json" | "form" | "text";
  text: string;
  fields: [string, string][] | null;
  /**
   * True when the body holds control or bidirectional-override characters, shown as U+FFFD:
   * invisible, they could make text read differently from what is sent.
   */
  has_hidden_characters: boolean;
  /** Hex SHA-256 of the exact body bytes (of the whole body, when it was cut). */
  sha256: string;
}

/**
 * What is kept of `bytes`: the first 64 KiB, cut where a UTF-8 character starts, so the kept
 * text never ends in half a character.
 * @example keepBody(Buffer.from('{"a":1}'), "application/json") // { text: '{"a":1}', bytes: 7, ... }
 */
export function keepBody(bytes: Buffer, contentType: string): KeptBody {
  let end = Math.min(bytes.length, MAX_KEPT_BODY_BYTES);
  // Back off continuation bytes (10xxxxxx) so the cut falls before a character's first byte.
  if (end < bytes.length) while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--;
  return { text: bytes.subarray(0, end).toString("utf8"), bytes: bytes.length, contentType };
}

/**
 * `json` laid out one value per line, two spaces per level. The text is re-spaced, never parsed
 * into values and printed again: a number, a string escape or a repeated key is shown exactly as
 * it will be sent. Undefined when it is not one complete JSON value or grows too long.
 */
export function indentJson(json: string): string | undefined {
  try {
    JSON.parse(json);
  } catch {
    return undefined;
  }
  let out = "";
  let depth = 0;
  const newline = () => `\n${"  ".repeat(Math.min(depth, MAX_INDENT_LEVELS))}`;
  for (let i = 0; i < json.length; i++) {
    const c = json[i]!;
    if (c === '"') {
      // A string, copied as is up to its closing quote.
      let end = i + 1;
      while (json[end] !== '"') end += json[end] === "\\" ? 2 : 1;
      out += json.slice(i, end + 1);
      i = end;
    } else if (c === "{" || c === "[") {
      let next = i + 1;
      while (/\s/.test(json[next] ?? "")) next++;
      if (json[next] === (c === "{" ? "}" : "]")) {
        out += c === "{" ? "{}" : "[]";
        i = next;
        continue;
      }
      depth++;
      out += c + newline();
    } else if (c === "}" || c === "]") {
      depth--;
      out += newline() + c;
    } else if (c === ",") out += `,${newline()}`;
    else if (c === ":") out += ": ";
    else if (!/\s/.test(c)) out += c;
    if (out.length > MAX_PRETTY_CHARS) return undefined;
  }
  return out;
}

/** The body as an operator reads it. */
export function viewBody(kept: KeptBody, sha256: string): BodyView {
  const isCut = kept.bytes > Buffer.byteLength(kept.text, "utf8");
  const base = { content_type: kept.contentType, size: kept.bytes, is_cut: isCut, sha256 };
  if (!isCut && kept.contentType === "application/x-www-form-urlencoded") {
    let isHidden = false;
    const fields = [...new URLSearchParams(kept.text)].map(([name, value]): [string, string] => {
      const shownName = showHidden(name);
      const shownValue = showHidden(value);
      isHidden ||= shownName.isHidden || shownValue.isHidden;
      return [shownName.text, shownValue.text];
    });
    return { ...base, format: "form", text: kept.text, fields, has_hidden_characters: isHidden };
  }
  const pretty = isCut || kept.contentType !== "application/json" ? undefined : indentJson(kept.text);
  const shown = showHidden(pretty ?? kept.text);
  return {
    ...base,
    format: pretty === undefined ? "text" : "json",
    text: shown.text,
    fields: null,
    has_hidden_characters: shown.isHidden,
  };
}

/** How a body's size reads: "312 bytes", "4.2 KiB". */
export function describeSize(bytes: number): string {
  return bytes < 1024 ? `${bytes} bytes` : `${(bytes / 1024).toFixed(1)} KiB`;
}

/**
 * The body as plain text lines for the approval mail: at most `limit` characters of the
 * formatted body (JSON indented, form fields as `name: value`), and what was left out.
 */
export function bodyExcerpt(view: BodyView, limit: number): { lines: string[]; isShortened: boolean } {
  const whole =
    view.format === "form" && view.fields
      ? view.fields.map(([name, value]) => `${name}: ${value}`).join("\n")
      : view.text;
  const isShortened = whole.length > limit || view.is_cut;
  return { lines: whole.slice(0, limit).split("\n"), isShortened };
}
