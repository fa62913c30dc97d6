// `vault set` (POST /api/secrets, /api/items, and the CLI with no server running) stores or
// replaces a credential by name (spec 4.4). A replace that widens the credential, a host added or
// its inject mode changed (items/item-widening.ts), must not hand that wider reach to approvals the
// operator gave the narrower one: as a widening edit ends the whole-credential standing approvals
// hosted, a widening replace here ends the item's active approvals of the whole credential (a
// one-call or 8-hour approval asked with request_grant or given with POST /api/grants), each with
// its grant_revoked audit row. An approval of one named call keeps its host and is left as it is.
import { AppError } from "@latch/shared/errors";
import { refuseUnsafeText } from "@latch/shared/text/safe-string";
import type { PublicGrant } from "../grants/grant-view.ts";
import { findWidening } from "../items/item-widening.ts";
import type { ItemView } from "../items/items.schemas.ts";
import { LOCAL_OPERATOR, type LocalVault } from "./local-vault.ts";

type StoringVault = Pick<LocalVault, "organisationId" | "environment" | "items" | "grants">;

/** An approval that covers every call with the credential, wherever it is sent. */
const isWholeCredential = (grant: PublicGrant) =>
  grant.call === null && (grant.scope === null || grant.scope.host === null);

export async function storeLocalItem(vault: StoringVault, input: unknown): Promise<ItemView> {
  const org = vault.organisationId;
  const name = typeof input === "object" && input !== null ? (input as { name?: unknown }).name : undefined;
  // Looked up before storeItem validates it: a name that is not safe text is refused here first.
  refuseUnsafeText("name", name);
  const before =
    typeof name === "string" ? await vault.items.findItemByName(org, vault.environment, name) : undefined;
  const stored = await vault.items.storeItem(org, LOCAL_OPERATOR, input, { replace: true });
  if (!before || before.id !== stored.id || !findWidening(before, stored)) return stored;
  const reaching = (await vault.grants.listGrants(org)).filter(
    (grant) =>
      grant.status === "active" &&
      grant.item_name === stored.name &&
      grant.environment_id === stored.environment &&
      isWholeCredential(grant),
  );
  for (const grant of reaching) {
    try {
      await vault.grants.revokeGrant(org, LOCAL_OPERATOR, grant.grant_id);
    } catch (error) {
      // Spent, expired or revoked since it was listed: it reaches nothing any more.
      if (!(error instanceof AppError && error.code === "grant_not_revocable")) throw error;
    }
  }
  return stored;
}
