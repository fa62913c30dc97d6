// Test helper: a Server-Sent Events reader over fetch, parsing the stream as the WHATWG HTML spec
// (9.2.6) says an EventSource does: `id`, `event`, `data` fields, a blank line dispatching.
import type { Browser } from "./hosted.ts";

export interface ReceivedEvent {
  id: string;
  type: string;
  data: Record<string, unknown>;
  /** performance.now() when it arrived. */
  at: number;
}

export interface EventStream {
  status: number;
  events: ReceivedEvent[];
  /** The next event (of `type`, when given) not yet taken, within `timeoutMs`. */
  next(type?: string, timeoutMs?: number): Promise<ReceivedEvent>;
  /** Whether the server ended the stream. */
  readonly isEnded: boolean;
  close(): void;
}

/** Opens `url` as the browser's session (its cookies), optionally resuming after `lastEventId`. */
export async function openEventStream(
  url: string,
  browser: Browser,
  options: { lastEventId?: string } = {},
): Promise<EventStream> {
  const abort = new AbortController();
  const response = await fetch(url, {
    headers: {
      accept: "text/event-stream",
      cookie: [...browser.cookies].map(([k, v]) => `${k}=${v}`).join("; "),
      ...(options.lastEventId ? { "last-event-id": options.lastEventId } : {}),
    },
    signal: abort.signal,
  });
  const events: ReceivedEvent[] = [];
  let taken = 0;
  let isEnded = false;
  const waiters = new Set<() => void>();
  const wake = () => {
    for (const waiter of waiters) waiter();
  };
  if (response.body && response.status === 200) {
    void (async () => {
      const decoder = new TextDecoder();
      let buffer = "";
      let fields: { id?: string; event?: string; data: string[] } = { data: [] };
      try {
        for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
          buffer += decoder.decode(chunk, { stream: true });
          let newline = buffer.search(/\r\n|\r|\n/);
          while (newline !== -1) {
            const line = buffer.slice(0, newline);
            buffer = buffer.slice(newline + (buffer.startsWith("\r\n", newline) ? 2 : 1));
            if (line === "") {
              if (fields.data.length > 0) {
                events.push({
                  id: fields.id ?? "",
                  type: fields.event ?? "message",
                  data: JSON.parse(fields.data.join("\n")) as Record<string, unknown>,
                  at: performance.now(),
                });
                wake();
              }
              fields = { data: [] };
            } else if (!line.startsWith(":")) {
              const colon = line.indexOf(":");
              const name = colon === -1 ? line : line.slice(0, colon);
              const value = colon === -1 ? "" : line.slice(colon + 1).replace(/^ /, "");
              if (name === "id") fields.id = value;
              else if (name === "event") fields.event = value;
              else if (name === "data") fields.data.push(value);
            }
            newline = buffer.search(/\r\n|\r|\n/);
          }
        }
      } catch {
        // Aborted by close().
      }
      isEnded = true;
      wake();
    })();
  }
  return {
    status: response.status,
    events,
    get isEnded() {
      return isEnded;
    },
    next(type, timeoutMs = 3_000) {
      return new Promise((resolve, reject) => {
        const look = () => {
          while (taken < events.length) {
            const event = events[taken++]!;
            if (!type || event.type === type) {
              finish();
              resolve(event);
              return;
            }
          }
          if (isEnded) {
            finish();
            reject(new Error(`the stream ended before a ${type ?? "new"} event`));
          }
        };
        const timer = setTimeout(() => {
          finish();
          reject(new Error(`no ${type ?? "new"} event within ${timeoutMs} ms`));
        }, timeoutMs);
        const finish = () => {
          clearTimeout(timer);
          waiters.delete(look);
        };
        waiters.add(look);
        look();
      });
    },
    close: () => abort.abort(),
  };
}
