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

function promptHidden(prompt: string): Promise<string> {
  process.stderr.write(prompt);
  // Echo nothing of what is typed; the prompt itself went straight to stderr.
  const muted = new Writable({ write: (_chunk, _enc, done) => done() });
  const rl = createInterface({ input: process.stdin, output: muted, terminal: true });
  return new Promise((resolve, reject) => {
    rl.once("line", (line) => {
      rl.close();
      process.stderr.write("\n");
      resolve(line);
    });
    rl.once("SIGINT", () => {
      rl.close();
      reject(new Error("cancelled"));
    });
  });
}
