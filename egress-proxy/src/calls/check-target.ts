// The target of a call the control plane names itself (FetchDocument, SendPush): its host, path and
// time limit judged by the same rules as an agent's call, before anything is resolved or dialled.
import { AppError } from "@latch/shared/errors";
import { checkHostname } from "@latch/shared/requests/host";
import { validateRequestPath } from "@latch/shared/requests/path";
import { MAX_TIMEOUT_MS, MIN_TIMEOUT_MS } from "./call-limits.ts";

export function checkTarget(spec: { host: string; path: string; timeoutMs: number }): {
  host: string;
  path: string;
} {
  const host = checkHostname(spec.host);
  if (!host.ok) throw new AppError(host.code, host.message);
  const path = validateRequestPath(spec.path);
  if (!path.ok) throw new AppError(path.code, path.message);
  if (spec.timeoutMs < MIN_TIMEOUT_MS || spec.timeoutMs > MAX_TIMEOUT_MS) {
    throw new AppError(
      "invalid_timeout",
      `timeout_ms must be between ${MIN_TIMEOUT_MS} and ${MAX_TIMEOUT_MS}`,
    );
  }
  return { host: host.host, path: path.path };
}
