// EGRESS_CONNECT_TO: the development/test knob that sends a host to another address or port, like
// curl's --connect-to. The request still names the real host (Host header, SNI, certificate check).
import { isIP } from "node:net";
import { AppError } from "@latch/shared/errors";

/**
 * One `host:443:target:port` entry. `targetAddress` undefined means "resolve the host through
 * DNS as usual" (an empty target, `api.latch.test:443::8443`); `targetPort` undefined keeps 443.
 */
export interface ConnectToRule {
  host: string;
  port: number;
  targetAddress: string | undefined;
  targetPort: number | undefined;
}

/** Only port 443 is ever called (spec 4.2 rule 2), so a rule for another source port is a typo. */
const SOURCE_PORT = 443;
const HOSTNAME =
  /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;
// host:port:target:port where target is empty, an IPv4 address or a bracketed IPv6 address.
const ENTRY = /^([^:[\]]+):(\d{1,5}):(\[[0-9a-fA-F:.]+\]|[^:[\]]*):(\d{0,5})$/;

function refuse(entry: string, why: string): never {
  // Configuration text, not a secret: naming the entry is what lets the operator fix it.
  throw new AppError("invalid_request", `EGRESS_CONNECT_TO entry "${entry.slice(0, 120)}": ${why}`);
}

function parsePort(entry: string, text: string): number {
  const port = Number(text);
  if (!Number.isInteger(port) || port < 1 || port > 65_535) refuse(entry, `port ${text} is not 1-65535`);
  return port;
}

function parseEntry(entry: string): ConnectToRule {
  const match = ENTRY.exec(entry);
  if (!match) refuse(entry, "expected host:443:ip:port (the ip may be empty, an IPv6 ip goes in brackets)");
  const [, hostText = "", portText = "", targetText = "", targetPortText = ""] = match;
  const host = hostText.toLowerCase().replace(/\.$/, "");
  if (!HOSTNAME.test(host)) refuse(entry, "the source must be a hostname");
  if (isIP(host) !== 0) refuse(entry, "the source must be a hostname, not an IP address");
  const port = parsePort(entry, portText);
  if (port !== SOURCE_PORT) refuse(entry, `only port ${SOURCE_PORT} is ever called`);
  const targetAddress = targetText.replace(/^\[|\]$/g, "");
  // A target hostname would need a second DNS lookup outside the destination policy: refused.
  if (targetAddress !== "" && isIP(targetAddress) === 0)
    refuse(entry, "the target must be an IP address or empty");
  if (targetText.startsWith("[") && isIP(targetAddress) !== 6)
    refuse(entry, "only an IPv6 address goes in brackets");
  if (isIP(targetAddress) === 6 && !targetText.startsWith("["))
    refuse(entry, "an IPv6 target goes in brackets");
  return {
    host,
    port,
    targetAddress: targetAddress === "" ? undefined : targetAddress,
    targetPort: targetPortText === "" ? undefined : parsePort(entry, targetPortText),
  };
}

/**
 * Parses `host:443:ip:port[,...]`. Empty entries are skipped; any bad entry, or a second entry
 * for the same host (which one would win is a guess), throws `AppError("invalid_request")` naming it.
 *
 * @example parseConnectTo("api.latch.test:443:127.0.0.1:8443,dns.latch.test:443::8443")
 */
export function parseConnectTo(text: string): ConnectToRule[] {
  const rules: ConnectToRule[] = [];
  for (const entry of text.split(",").map((e) => e.trim())) {
    if (entry === "") continue;
    const rule = parseEntry(entry);
    if (rules.some((r) => r.host === rule.host)) refuse(entry, `a second rule for ${rule.host}`);
    rules.push(rule);
  }
  return rules;
}

/** The rule for this host and port, if any. */
export function findConnectToRule(
  rules: readonly ConnectToRule[],
  host: string,
  port: number,
): ConnectToRule | undefined {
  return rules.find((rule) => rule.host === host && rule.port === port);
}
