// `vault set` (POST /api/secrets, /api/items, and the CLI with no server running) stores or
// replaces a credential by name (spec 4.4). A replace that widens the credential, a host added or
// its inject mode changed (items/item-widening.ts), must not hand that wider reach to approvals the
// operator gave the narrower one: as a widening edit ends the whole-credential standing approvals
// hosted, a widening replace here ends the item's active approvals of the whole credential (a
// one-call or 8-hour approval asked with request_grant or given with POST /api/grants), each with
// its grant_revoked audit row. items.service `storeItem` with `replace` judges the widening on the
// stored row locked and revokes them in the replace's own transaction, so a vault killed in
// between leaves both or neither. An approval of one named call keeps its host and is left as it is.
import { refuseUnsafeText } from "@latch/shared/text/safe-string";
import type { ItemView } from "../items/items.schemas.ts";
import { LOCAL_OPERATOR, type LocalVault } from "./local-vault.ts";

type StoringVault = Pick<LocalVault, "organisationId" | "items">;

export async function storeLocalItem(vault: StoringVault, input: unknown): Promise<ItemView> {
  const name = typeof input === "object" && input !== null ? (input as { name?: unknown }).name : undefined;
  // A name that is not safe text is refused here first, as the one the operator typed.
  refuseUnsafeText("name", name);
  return vault.items.storeItem(vault.organisationId, LOCAL_OPERATOR, input, { replace: true });
}
