// The database as Kysely sees it: one interface per table, kept in step with migrations/.
import type { ColumnType, Generated, Insertable, Selectable, Updateable } from "kysely";

type CreatedAt = ColumnType<Date, Date | undefined, never>;
type Timestamp = ColumnType<Date, Date | undefined, Date>;

export interface OrganisationsTable {
  id: string;
  name: string;
  created_at: CreatedAt;
}

export interface FoldersTable {
  id: string;
  organisation_id: string;
  environment: string;
  name: string;
  created_at: CreatedAt;
}

export interface ItemsTable {
  id: string;
  organisation_id: string;
  environment: string;
  name: string;
  kind: string;
  sealed_value: Uint8Array;
  sealing_key_id: string;
  last4: string;
  allowed_hosts: string[];
  inject: string;
  username: string | null;
  folder_id: string | null;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

export interface AuditEventsTable {
  id: Generated<string>;
  organisation_id: string;
  environment: string | null;
  at: CreatedAt;
  actor: string;
  action: string;
  item_name: string | null;
  host: string | null;
  reason: string | null;
  detail: ColumnType<Record<string, unknown>, string | undefined, never>;
}

export interface GrantsTable {
  id: string;
  organisation_id: string;
  environment: string;
  item_id: string;
  agent_id: string;
  tool_id: string;
  policy: string;
  status: string;
  task_id: string | null;
  task_description: string | null;
  created_at: Date;
  approved_at: Date | null;
  expires_at: Date | null;
  consumed_at: Date | null;
  revoked_at: Date | null;
}

export interface Database {
  organisations: OrganisationsTable;
  folders: FoldersTable;
  items: ItemsTable;
  audit_events: AuditEventsTable;
  grants: GrantsTable;
}

export type ItemRow = Selectable<ItemsTable>;
export type NewItem = Insertable<ItemsTable>;
export type ItemUpdate = Updateable<ItemsTable>;
export type AuditEventRow = Selectable<AuditEventsTable>;
export type GrantRow = Selectable<GrantsTable>;
