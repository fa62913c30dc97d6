// Where a process writes its log: pino's JSON lines when the output is a file, a pipe or a log
// collector, and one readable line per entry ("12:04:31 INFO  control plane listening address=...")
// when a person watches it in a terminal. Same fields either way: the serializers of logging.ts
// have already removed what must never be logged.
import { type DestinationStream, destination } from "pino";

const LEVEL_NAMES: Readonly<Record<number, string>> = {
  10: "TRACE",
  20: "DEBUG",
  30: "INFO",
  40: "WARN",
  50: "ERROR",
  60: "FATAL",
};

/** pino's own bookkeeping, not worth a reader's attention on a terminal. */
const HIDDEN_FIELDS = new Set(["time", "level", "msg", "pid", "hostname", "name", "v"]);

/** `key=value` pairs of an object, nested objects flattened with dots (`req.method=GET`). */
function pairsOf(value: Record<string, unknown>, prefix = ""): string[] {
  const pairs: string[] = [];
  for (const [key, field] of Object.entries(value)) {
    if (prefix === "" && HIDDEN_FIELDS.has(key)) continue;
    if (field === undefined) continue;
    const name = `${prefix}${key}`;
    if (typeof field === "object" && field !== null && !Array.isArray(field)) {
      pairs.push(...pairsOf(field as Record<string, unknown>, `${name}.`));
    } else {
      const text = typeof field === "string" ? field : JSON.stringify(field);
      // Quoted unless plain printable ASCII: a value can never start a fake line or a terminal escape.
      pairs.push(`${name}=${/^[!#-<>-~]+$/.test(text) ? text : JSON.stringify(text)}`);
    }
  }
  return pairs;
}

/**
 * One JSON log line as a person reads it; a line that is not a pino entry is passed on unchanged.
 * An error's stack goes on the lines below, indented.
 *
 * @example humanLogLine('{"level":30,"time":0,"msg":"listening","port":8787}\n')
 * // "00:00:00 INFO  listening port=8787\n" (in the machine's time zone)
 */
export function humanLogLine(line: string): string {
  let entry: unknown;
  try {
    entry = JSON.parse(line);
  } catch {
    return line;
  }
  if (typeof entry !== "object" || entry === null || Array.isArray(entry)) return line;
  const fields = { ...(entry as Record<string, unknown>) };
  const level = LEVEL_NAMES[Number(fields.level)] ?? String(fields.level ?? "");
  const time = typeof fields.time === "number" ? new Date(fields.time) : new Date();
  const clock = [time.getHours(), time.getMinutes(), time.getSeconds()]
    .map((n) => String(n).padStart(2, "0"))
    .join(":");
  let stack = "";
  const err = fields.err as { stack?: unknown } | undefined;
  if (err && typeof err === "object" && typeof err.stack === "string") {
    // The stack starts with the error's message: its control characters are escaped as every
    // other value's are, so that no text in it starts a fake line or a terminal escape.
    const escaped = err.stack.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, (c) =>
      JSON.stringify(c).slice(1, -1),
    );
    stack = `\n${escaped.replace(/^/gm, "    ")}`;
    const { stack: _stack, ...rest } = err;
    fields.err = rest;
  }
  const text = typeof fields.msg === "string" ? fields.msg : "";
  const message = /[\u0000-\u001f\u007f-\u009f]/.test(text) ? JSON.stringify(text) : text;
  const pairs = pairsOf(fields);
  return `${[clock, level.padEnd(5), message, ...pairs].filter(Boolean).join(" ")}${stack}\n`;
}

/**
 * The log destination for file descriptor 1 (stdout) or 2 (stderr): readable lines when it is a
 * terminal, pino's JSON otherwise.
 */
export function logDestination(fd: 1 | 2): DestinationStream {
  const stream = fd === 1 ? process.stdout : process.stderr;
  if (!stream.isTTY) return destination(fd);
  return {
    write(line: string) {
      stream.write(humanLogLine(line));
    },
  };
}
