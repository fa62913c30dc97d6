// Least privilege for the control plane's own database role (the guide: "a process checks at start
// that it holds no more than it needs"). It owns the schema and needs nothing more: a superuser
// can run programs on the database server, read its files and switch the audit ledger's guards off
// for a session; so can a member of the server-file and server-program roles, a role that may
// make roles can grant itself those, and a role that bypasses row security reads past any policy.
// In production such a role is refused; elsewhere (tests, a laptop) it is a warning.
import { type Kysely, sql } from "kysely";
import { ConfigError } from "../config.ts";
import type { Database } from "./schema.ts";

/** The sentence that refuses (or warns of) a superuser role; it never names the URL. */
export const SUPERUSER_SENTENCE =
  'DATABASE_URL connects as a superuser, which can run programs on the database server and turn the audit ledger\'s guards off; give the control plane a role that owns the latch database and nothing more (README "Deployment")';

/** What a role holds beyond owning its database, and what each lets it do. */
const EXCESS = [
  {
    column: "execute_server_program",
    named: "membership of pg_execute_server_program (runs programs on the database server)",
  },
  {
    column: "read_server_files",
    named: "membership of pg_read_server_files (reads any file on the database server)",
  },
  {
    column: "write_server_files",
    named: "membership of pg_write_server_files (writes any file on the database server)",
  },
  { column: "create_role", named: "CREATEROLE (makes roles and grants them)" },
  { column: "bypass_rls", named: "BYPASSRLS (reads past row-level security)" },
] as const;

type RoleRow = { is_superuser: boolean } & Record<(typeof EXCESS)[number]["column"], boolean>;

/** The sentence for a role that is no superuser but holds more than it needs; never the URL. */
export function excessSentence(held: readonly string[]): string {
  return `DATABASE_URL connects as a role with ${held.join(", ")}; give the control plane a role that owns the latch database and nothing more (README "Deployment")`;
}

export async function checkDatabaseRole(
  db: Kysely<Database>,
  options: { isProduction: boolean; warn(sentence: string): void },
): Promise<void> {
  // pg_has_role(..., 'MEMBER') follows memberships through other roles, as the server does.
  const { rows } = await sql<RoleRow>`
    SELECT rolsuper AS is_superuser,
           pg_has_role(current_user, 'pg_execute_server_program', 'MEMBER') AS execute_server_program,
           pg_has_role(current_user, 'pg_read_server_files', 'MEMBER') AS read_server_files,
           pg_has_role(current_user, 'pg_write_server_files', 'MEMBER') AS write_server_files,
           rolcreaterole AS create_role,
           rolbypassrls AS bypass_rls
      FROM pg_catalog.pg_roles WHERE rolname = current_user`.execute(db);
  const role = rows[0];
  if (!role) return;
  // A superuser holds all of the others too: the one sentence that says so is enough.
  const held = role.is_superuser ? [] : EXCESS.filter((e) => role[e.column]).map((e) => e.named);
  const sentence = role.is_superuser
    ? SUPERUSER_SENTENCE
    : held.length > 0
      ? excessSentence(held)
      : undefined;
  if (!sentence) return;
  if (options.isProduction) throw new ConfigError([sentence]);
  options.warn(sentence);
}
