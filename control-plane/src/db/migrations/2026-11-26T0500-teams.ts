// Teams (DECISIONS "Teams", third wave): the four roles, invitations by mail, organisation
// settings (the two-person rule), the slug later single sign-on addresses an organisation by, and
// the first of the two approvals a standing grant may need.
import { type Kysely, sql } from "kysely";

/** The slug of a name, as orgs/org-slug.ts makes it (a migration imports no app code). */
function slugOf(name: string): string {
  const slug = name
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 40)
    .replace(/-+$/, "");
  return slug || "org";
}

export async function up(db: Kysely<unknown>): Promise<void> {
  // Roles: the single 'member' of before could approve and store, as an admin does now.
  await sql`alter table memberships drop constraint memberships_role_check`.execute(db);
  await sql`update memberships set role = 'admin' where role = 'member'`.execute(db);
  await sql`alter table memberships add constraint memberships_role_check
    check (role in ('owner', 'admin', 'approver', 'auditor'))`.execute(db);

  await db.schema
    .alterTable("organisations")
    .addColumn("slug", "text", (c) => c.check(sql`slug ~ '^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$'`))
    // 1: one member's approval makes a standing grant active; 2: a second member must confirm it.
    .addColumn("standing_approvals_need", "integer", (c) =>
      c.notNull().defaultTo(1).check(sql`standing_approvals_need in (1, 2)`),
    )
    .execute();
  const rows = await sql<{
    id: string;
    name: string;
  }>`select id, name from organisations order by id`.execute(db);
  const taken = new Set<string>();
  for (const row of rows.rows) {
    const base = slugOf(row.name);
    let slug = base;
    for (let n = 2; taken.has(slug); n++) slug = `${base}-${n}`;
    taken.add(slug);
    await sql`update organisations set slug = ${slug} where id = ${row.id}`.execute(db);
  }
  // A row written without a slug (a test fixture, a benchmark's direct insert) still gets a unique
  // one, from its id; the service always gives one made from the name.
  await sql`create function organisations_default_slug() returns trigger language plpgsql as $$
    begin
      if new.slug is null then
        new.slug := replace(lower(new.id), '_', '-');
      end if;
      return new;
    end $$`.execute(db);
  await sql`create trigger organisations_default_slug before insert on organisations
    for each row execute function organisations_default_slug()`.execute(db);
  await db.schema
    .alterTable("organisations")
    .alterColumn("slug", (c) => c.setNotNull())
    .execute();
  await db.schema.createIndex("organisations_slug").unique().on("organisations").column("slug").execute();

  await db.schema
    .createTable("org_invites")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("organisation_id", "text", (c) =>
      c.notNull().references("organisations.id").onDelete("cascade"),
    )
    .addColumn("email", "text", (c) => c.notNull())
    .addColumn("role", "text", (c) =>
      c.notNull().check(sql`role in ('owner', 'admin', 'approver', 'auditor')`),
    )
    // SHA-256 of the single-use token the mail carries; the token itself is never stored.
    .addColumn("token_hash", "text", (c) => c.notNull().unique())
    .addColumn("invited_by", "text", (c) => c.notNull())
    .addColumn("created_at", "timestamptz", (c) => c.notNull())
    .addColumn("expires_at", "timestamptz", (c) => c.notNull())
    .addColumn("accepted_at", "timestamptz")
    .addColumn("accepted_by", "text")
    .addColumn("withdrawn_at", "timestamptz")
    .addColumn("withdrawn_by", "text")
    .execute();
  // 50 a day per organisation are counted from this index; the members list reads the pending ones.
  await db.schema
    .createIndex("org_invites_by_organisation")
    .on("org_invites")
    .columns(["organisation_id", "created_at"])
    .execute();

  // The first approval of a standing grant under the two-person rule: who gave it, when, and what
  // they chose (policy and scope), which the second member confirms.
  await db.schema
    .alterTable("grants")
    .addColumn("first_approved_by", "text")
    .addColumn("first_approved_at", "timestamptz")
    .addColumn("first_policy", "text")
    .addColumn("first_scope", "text", (c) => c.check(sql`first_scope in ('path_prefix', 'credential')`))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable("grants")
    .dropColumn("first_approved_by")
    .dropColumn("first_approved_at")
    .dropColumn("first_policy")
    .dropColumn("first_scope")
    .execute();
  await db.schema.dropTable("org_invites").execute();
  await db.schema.dropIndex("organisations_slug").execute();
  await sql`drop trigger organisations_default_slug on organisations`.execute(db);
  await sql`drop function organisations_default_slug()`.execute(db);
  await db.schema
    .alterTable("organisations")
    .dropColumn("slug")
    .dropColumn("standing_approvals_need")
    .execute();
  await sql`alter table memberships drop constraint memberships_role_check`.execute(db);
  await sql`update memberships set role = 'member' where role <> 'owner'`.execute(db);
  await sql`alter table memberships add constraint memberships_role_check
    check (role in ('owner', 'member'))`.execute(db);
}
