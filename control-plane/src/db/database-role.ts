// Least privilege for the control plane's own database role (the guide: "a process checks at start
// that it holds no more than it needs"). It owns the schema and needs nothing more: a superuser
// can run programs on the database server, read its files and switch the audit ledger's guards off
// for a session; so can a member of the server-file and server-program roles, a role that may
// make roles can grant itself those, a role that bypasses row security reads past any policy, one
// that replicates streams every database of the server, and a member of pg_read_all_data or
// pg_write_all_data reads or writes the server's other databases. A role it is a member of counts
// as its own (a membership that does not inherit still allows SET ROLE, and SET ROLE to a
// superuser is a superuser). In production such a role is refused; elsewhere (tests, a laptop) it
// is a warning.
import { type Kysely, sql } from "kysely";
import { ConfigError } from "../config.ts";
import type { Database } from "./schema.ts";

/** The sentence that refuses (or warns of) a superuser role; it never names the URL. */
export const SUPERUSER_SENTENCE =
  'DATABASE_URL connects as a superuser, which can run programs on the database server and turn the audit ledger\'s guards off; give the control plane a role that owns the latch database and nothing more (README "Deployment")';

/** The predefined roles whose members reach past the database's own grants, and what each does. */
const SERVER_ROLES = [
  { role: "pg_execute_server_program", does: "runs programs on the database server" },
  { role: "pg_read_server_files", does: "reads any file on the database server" },
  { role: "pg_write_server_files", does: "writes any file on the database server" },
  { role: "pg_read_all_data", does: "reads every table of every database on the server" },
  { role: "pg_write_all_data", does: "writes every table of every database on the server" },
] as const;

/** The role attributes it needs none of, and what each lets it do. */
const ATTRIBUTES = [
  { column: "create_role", named: "CREATEROLE (makes roles and grants them)" },
  { column: "bypass_rls", named: "BYPASSRLS (reads past row-level security)" },
  { column: "replicate", named: "REPLICATION (streams every database's rows)" },
] as const;

type Attribute = (typeof ATTRIBUTES)[number]["column"];

/** The role itself, or one it is a member of, holding an attribute or being a server role. */
type RoleRow = { name: string; is_self: boolean; is_superuser: boolean } & Record<Attribute, boolean>;

/** The sentence for a role that is no superuser but holds more than it needs; never the URL. */
export function excessSentence(held: readonly string[]): string {
  return `DATABASE_URL connects as a role with ${held.join(", ")}; give the control plane a role that owns the latch database and nothing more (README "Deployment")`;
}

/** What the connected role holds beyond owning its database, each as the refusal names it. */
function findExcess(rows: readonly RoleRow[]): string[] {
  const others = rows.filter((r) => !r.is_self);
  const held: string[] = others
    .filter((r) => r.is_superuser)
    .map((r) => `membership of the superuser role ${r.name} (SET ROLE makes it a superuser)`);
  for (const server of SERVER_ROLES) {
    if (others.some((r) => r.name === server.role))
      held.push(`membership of ${server.role} (${server.does})`);
  }
  for (const attribute of ATTRIBUTES) {
    const holders = rows.filter((r) => r[attribute.column] && !r.is_superuser);
    if (holders.some((r) => r.is_self)) held.push(attribute.named);
    else if (holders[0]) held.push(`${attribute.named} through membership of ${holders[0].name}`);
  }
  return held;
}

export async function checkDatabaseRole(
  db: Kysely<Database>,
  options: { isProduction: boolean; warn(sentence: string): void },
): Promise<void> {
  // pg_has_role(..., 'MEMBER') follows memberships through other roles, as the server does, and
  // counts one that does not inherit (SET ROLE still reaches it). The server roles are matched by
  // name, so a server without one of them (PostgreSQL 13 has no pg_read_all_data) is no error.
  const serverRoles = SERVER_ROLES.map((s) => s.role);
  const { rows } = await sql<RoleRow>`
    SELECT r.rolname::text AS name,
           r.rolname = current_user AS is_self,
           r.rolsuper AS is_superuser,
           r.rolcreaterole AS create_role,
           r.rolbypassrls AS bypass_rls,
           r.rolreplication AS replicate
      FROM pg_catalog.pg_roles r
     WHERE pg_has_role(current_user, r.oid, 'MEMBER')
       AND (r.rolname = current_user OR r.rolsuper OR r.rolcreaterole OR r.rolbypassrls
            OR r.rolreplication OR r.rolname = ANY(${serverRoles}::text[]))
     ORDER BY r.rolname`.execute(db);
  const self = rows.find((r) => r.is_self);
  if (!self) return;
  // A superuser holds all of the others too: the one sentence that says so is enough.
  const held = self.is_superuser ? [] : findExcess(rows);
  const sentence = self.is_superuser
    ? SUPERUSER_SENTENCE
    : held.length > 0
      ? excessSentence(held)
      : undefined;
  if (!sentence) return;
  if (options.isProduction) throw new ConfigError([sentence]);
  options.warn(sentence);
}
