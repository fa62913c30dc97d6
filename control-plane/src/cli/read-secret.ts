// Reading a credential's value for `vault set`: from standard input when it is not a terminal
// (a pipe, a file), else from a prompt that does not echo. Never from the command line, where it
// would sit in shell history and the process list.
import { createInterface } from "node:readline";
import { Writable } from "node:stream";

/** More than any real credential; a larger input is a mistake (a whole file piped in). */
const MAX_INPUT_BYTES = 64 * 1024;

export async function readSecretValue(prompt: string): Promise<string> {
  if (!process.stdin.isTTY) return stripOneNewline(await readAllStdin());
  return promptHidden(prompt);
}

/** `echo TOKEN | vault set` adds one newline that is not part of the value. */
export function stripOneNewline(text: string): string {
  return text.replace(/\r?\n$/, "");
}

async function readAllStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of process.stdin) {
    size += (chunk as Buffer).length;
    if (size > MAX_INPUT_BYTES)
      throw new Error(`the value on standard input is over ${MAX_INPUT_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** A paste arrives in one burst: lines that follow the first within this time are part of it. */
const PASTE_QUIET_MS = 100;

/**
 * The value typed (or pasted) at a prompt that echoes nothing. A paste of several lines is refused
 * whole, its every line read here (none left for the shell to run after we exit); so is a prompt
 * closed without a line (Ctrl-D), as a cancel.
 */
export function promptHidden(
  prompt: string,
  input: NodeJS.ReadableStream = process.stdin,
  errors: NodeJS.WritableStream = process.stderr,
): Promise<string> {
  errors.write(prompt);
  // Echo nothing of what is typed; the prompt itself went straight to stderr.
  const muted = new Writable({ write: (_chunk, _enc, done) => done() });
  const rl = createInterface({ input, output: muted, terminal: true });
  return new Promise((resolve, reject) => {
    const lines: string[] = [];
    let isSettled = false;
    let quiet: NodeJS.Timeout | undefined;
    const settle = (error: Error | undefined) => {
      if (isSettled) return;
      isSettled = true;
      clearTimeout(quiet);
      rl.close();
      errors.write("\n");
      if (error) reject(error);
      else resolve(lines[0] ?? "");
    };
    rl.on("line", (line) => {
      lines.push(line);
      clearTimeout(quiet);
      quiet = setTimeout(() => {
        settle(
          lines.length > 1
            ? new Error(
                "the value pasted holds a line break, so nothing was stored: paste it as one line, or pipe it on standard input",
              )
            : undefined,
        );
      }, PASTE_QUIET_MS);
    });
    rl.once("SIGINT", () => settle(new Error("cancelled")));
    // Ctrl-D (or the input closing) before a whole line: nothing to store.
    rl.once("close", () => settle(lines.length === 1 ? undefined : new Error("cancelled")));
  });
}
