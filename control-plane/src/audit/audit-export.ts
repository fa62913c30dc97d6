// The audit export (GET /api/audit/export): the events of a filtered view as CSV or JSON Lines, as a
// person reads them: who acted by name (a member by email, a client by its name), the details
// without internal ids or hashes, agents in details by name. Pure: the route reads the rows.
import type { AuditEventView } from "./audit.repo.ts";

/** Detail keys that mean nothing to a person (internal ids, hashes): never exported. */
const HIDDEN_DETAIL = /(^|_)(hash|sha256|jti|grant_id)$|^tool_id$/;

export const EXPORT_COLUMNS = [
  "at",
  "environment",
  "who",
  "actor",
  "action",
  "credential",
  "host",
  "reason",
  "detail",
] as const;
export type ExportRow = Record<(typeof EXPORT_COLUMNS)[number], unknown>;

/** Who acted, for a person: the name the audit gives, Latch itself, or the actor string. */
function whoOf(event: AuditEventView, clientNames: ReadonlyMap<string, string>): string {
  if (event.actor_name) return event.actor_name;
  if (event.actor === "system") return "Latch";
  const client = /^(?:agent|trusted):(.+)$/.exec(event.actor);
  return client ? (clientNames.get(client[1]!) ?? client[1]!) : event.actor;
}

/** The details a person reads: no hashes or internal ids; agent_id and client_id as names. */
function readableDetail(detail: Record<string, unknown>, clientNames: ReadonlyMap<string, string>) {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(detail)) {
    if (HIDDEN_DETAIL.test(key)) continue;
    if ((key === "agent_id" || key === "client_id") && typeof value === "string") {
      out[key.replace(/_id$/, "")] = clientNames.get(value) ?? value;
    } else out[key] = value;
  }
  return out;
}

export function toExportRows(
  events: readonly AuditEventView[],
  clientNames: ReadonlyMap<string, string>,
): ExportRow[] {
  return events.map((event) => ({
    at: event.at,
    environment: event.environment,
    who: whoOf(event, clientNames),
    actor: event.actor,
    action: event.action,
    credential: event.item_name,
    host: event.host,
    reason: event.reason,
    detail: readableDetail(event.detail, clientNames),
  }));
}

/**
 * One CSV field. A cell a spreadsheet would read as a formula (OWASP CSV injection: = + - @ first,
 * also after leading spaces, tabs or line breaks, which spreadsheets skip; or a leading tab or
 * carriage return) gets a ' in front; a field with a quote, comma, line break or ' is quoted.
 * @example csvField("=1+1") // "\"'=1+1\""
 */
export function csvField(value: unknown): string {
  let text =
    value === null || value === undefined ? "" : typeof value === "string" ? value : JSON.stringify(value);
  if (/^(?:[\t\r]|[ \t\r\n]*[=+\-@])/.test(text)) text = `'${text}`;
  return /[",\r\n']/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function toCsv(rows: readonly ExportRow[]): string {
  const lines = [EXPORT_COLUMNS.join(",")].concat(
    rows.map((row) => EXPORT_COLUMNS.map((column) => csvField(row[column])).join(",")),
  );
  return `${lines.join("\r\n")}\r\n`;
}

export function toJsonLines(rows: readonly ExportRow[]): string {
  return rows.map((row) => `${JSON.stringify(row)}\n`).join("");
}
