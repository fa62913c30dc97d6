// Clients from before `issued_by` get it from the audit trail: the operator of their last
// client_issued or client_rotated row, so removing that member revokes the trusted clients they hold.
import { PGlite } from "@electric-sql/pglite";
import { Kysely, PGliteDialect, sql } from "kysely";
import { describe, expect, it } from "vitest";
import { migrateTo, migrateToLatest } from "../src/db/migrate.ts";

describe("the issued_by backfill", () => {
  it("names the operator of each client's last issue or rotation; system, none and OAuth rows stay empty", async () => {
    const pglite = new PGlite();
    const db = new Kysely<unknown>({ dialect: new PGliteDialect({ pglite }) });
    try {
      await migrateTo(db, "2026-11-27T1820-pending-totp-session");
      await sql`insert into organisations (id, name) values ('org_a', 'A'), ('org_b', 'B')`.execute(db);
      const client = (id: string, organisationId: string, oauth: string | null = null) =>
        sql`insert into clients (id, organisation_id, kind, name, environment, token_hash, token_last4, created_at, oauth_client_id)
          values (${id}, ${organisationId}, 'trusted', ${id}, 'staging', ${`hash-${id}`}, 'abcd', now(), ${oauth})`.execute(
          db,
        );
      for (const id of ["cli_issued", "cli_rotated", "cli_system", "cli_silent"]) await client(id, "org_a");
      await client("cli_oauth", "org_a", "oac_1");
      let seq = 0;
      const audit = (organisationId: string, actor: string, action: string, clientId: string) => {
        seq += 1;
        return sql`insert into audit_events (organisation_id, actor, action, detail, seq, prev_hash, hash)
          values (${organisationId}, ${actor}, ${action}, ${JSON.stringify({ client_id: clientId })}::jsonb, ${seq}, ${"0".repeat(64)}, ${String(seq).padStart(64, "0")})`.execute(
          db,
        );
      };
      await audit("org_a", "operator:opr_alice", "client_issued", "cli_issued");
      await audit("org_a", "operator:opr_alice", "client_issued", "cli_rotated");
      await audit("org_a", "operator:opr_bob", "client_rotated", "cli_rotated");
      await audit("org_a", "operator:opr_alice", "client_issued", "cli_system");
      await audit("org_a", "system", "client_rotated", "cli_system");
      await audit("org_b", "operator:opr_eve", "client_issued", "cli_silent");
      await audit("org_a", "operator:opr_alice", "oauth_client_consented", "cli_oauth");
      await migrateToLatest(db);
      const rows = await sql<{
        id: string;
        issued_by: string | null;
      }>`select id, issued_by from clients order by id`.execute(db);
      expect(rows.rows).toEqual([
        { id: "cli_issued", issued_by: "opr_alice" },
        { id: "cli_oauth", issued_by: null },
        { id: "cli_rotated", issued_by: "opr_bob" },
        { id: "cli_silent", issued_by: null },
        { id: "cli_system", issued_by: null },
      ]);
    } finally {
      await db.destroy();
    }
  });
});
