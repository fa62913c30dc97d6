// Least privilege for the control plane's own database role (the guide: "a process checks at start
// that it holds no more than it needs"). It owns the schema and needs nothing more: a superuser
// can run programs on the database server, read its files and switch the audit ledger's guards off
// for a session. In production such a role is refused; elsewhere (tests, a laptop) it is a warning.
import { type Kysely, sql } from "kysely";
import { ConfigError } from "../config.ts";
import type { Database } from "./schema.ts";

/** The sentence that refuses (or warns of) a superuser role; it never names the URL. */
export const SUPERUSER_SENTENCE =
  'DATABASE_URL connects as a superuser, which can run programs on the database server and turn the audit ledger\'s guards off; give the control plane a role that owns the latch database and nothing more (README "Deployment")';

export async function checkDatabaseRole(
  db: Kysely<Database>,
  options: { isProduction: boolean; warn(sentence: string): void },
): Promise<void> {
  const { rows } = await sql<{ is_superuser: boolean }>`
    SELECT rolsuper AS is_superuser FROM pg_catalog.pg_roles WHERE rolname = current_user`.execute(db);
  if (!rows[0]?.is_superuser) return;
  if (options.isProduction) throw new ConfigError([SUPERUSER_SENTENCE]);
  options.warn(SUPERUSER_SENTENCE);
}
