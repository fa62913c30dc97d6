// The proxy's logger: pino JSON lines, each carrying the call's request id, on standard output
// (or a file). Every answered call writes one line, so the lines are written in batches: at 4 KiB
// gathered or 250 ms after the first one waits, whichever comes first, and all of them when the
// process exits (pino flushes on exit, SIGTERM's drain included). One write per batch instead of
// one per call was about a tenth of the proxy's CPU per call (loadtest/README.md, issue 27). A
// process killed outright loses at most the last 250 ms of lines; the record of a call is the
// control plane's audit row, which never waits for this.
import { openSync } from "node:fs";
import pino, { type Logger } from "pino";
import { callContextFields } from "./grpc/call-context.ts";

/** Bytes gathered before a write. */
export const LOG_BATCH_BYTES = 4096;
/** The longest a line waits for its batch. */
export const LOG_BATCH_MS = 250;

/**
 * @example
 * const logger = createProxyLogger({ level: "info" }); // standard output
 */
export function createProxyLogger(options: { level: string; file?: string }): {
  logger: Logger;
  /** Writes what is gathered now (synchronously). */
  flush(): void;
  /** Drops what is gathered and writes nothing more: for when nobody reads the output any more. */
  discard(): void;
} {
  // Buffers, not text: sonic-boom measures its pending text again on every line in text mode (the
  // whole batch each time), and keeps only lengths in buffer mode. pino flushes the destination
  // itself at exit.
  // A file is opened here, at once, so that it is as ready as standard output from the first line.
  const destination = pino.destination({
    dest: options.file ? openSync(options.file, "w", 0o600) : 1,
    sync: false,
    minLength: LOG_BATCH_BYTES,
    periodicFlush: LOG_BATCH_MS,
    contentMode: "buffer",
  });
  // sonic-boom's types know only its text mode.
  const writeBuffer = destination.write as unknown as (chunk: Buffer) => boolean;
  const lines = { write: (line: string) => writeBuffer.call(destination, Buffer.from(line)) };
  const logger = pino({ name: "egress-proxy", level: options.level, mixin: callContextFields }, lines);
  return { logger, flush: () => destination.flushSync(), discard: () => destination.destroy() };
}
