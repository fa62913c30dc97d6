// The columns of a pending grant's first approval under the two-person rule (DECISIONS "Teams"),
// cleared together wherever a first approval stops counting: its member removed or demoted
// (orgs.repo.ts), or the credential widened under it (items.repo.ts).
import type { GrantsTable } from "./schema.ts";

/** A pending grant with no first approval; it is bound to a folder only by a first folder_standing one. */
export const NO_FIRST_APPROVAL = {
  first_approved_by: null,
  first_approved_at: null,
  first_policy: null,
  first_scope: null,
  folder_id: null,
} as const satisfies Partial<Record<keyof GrantsTable, null>>;
