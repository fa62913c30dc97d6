// What one hosted http_request reads before it can send, in ONE statement (issue 27: at most
// three per agent call with a standing approval, the proxy's ticket spend and the audit row being
// the other two): whether the calling client is still live under the bearer it presented, the
// version of the organisation's policy list (the rules themselves are read only when it moved),
// the credential by name or by host, and the agent's usable grants on it. Each part is what its own
// feature's read returns (items.repo findItemByName / findItemsByHost, grants.repo
// findUsableGrants); call-context.int.test.ts compares them row for row.
import { type Kysely, sql } from "kysely";
import type { Database } from "../db/schema.ts";
import type { GrantWithItem } from "../grants/grants.repo.ts";
import type { CallableItem } from "../items/callable-item.ts";

export interface CallContextQuery {
  organisationId: string;
  environment: string;
  /** The credential by exact name, else every credential allowing `host`. */
  itemName?: string | undefined;
  host?: string | undefined;
  /** The calling client (the agent) and the tool its grants are for. */
  agentId: string;
  toolId: string;
  /** SHA-256 of the bearer the client presented, checked against its row; unset: not checked. */
  bearerHash?: string | undefined;
  now: Date;
}

export interface CallContext {
  /** The client exists, is not revoked and (when asked) still holds that bearer. */
  clientLive: boolean;
  /** The version of the organisation's policy list (0: none saved), read in the same snapshot. */
  policyVersion: number;
  /** As items.service findCallableByName (one at most) or findCallableByHost (by name). */
  items: CallableItem[];
  /** Usable grants of the agent on each item, as grants.repo findUsableGrants orders them. */
  grantsOf(itemId: string): GrantWithItem[];
}

export interface CallContextRepo {
  findCallContext(query: CallContextQuery): Promise<CallContext>;
}

/** grants.repo's order: the broadest standing grant is tried first. */
const POLICY_ORDER = ["item_standing", "folder_standing", "session", "prompt"];

export function createCallContextRepo(db: Kysely<Database>): CallContextRepo {
  return {
    async findCallContext(query) {
      const { organisationId, environment, agentId, toolId, now } = query;
      const bearerHash = query.bearerHash ?? null;
      // One row at least (the client check), then one per (item, usable grant) pair.
      const rows = await db
        .selectFrom(
          sql<{ client_live: boolean; policy_version: number }>`(select exists (
            select 1 from clients
            where clients.id = ${agentId}
              and clients.organisation_id = ${organisationId}
              and clients.revoked_at is null
              and (${bearerHash}::text is null or clients.token_hash = ${bearerHash})
          ) as client_live, coalesce((
            select version from policy_lists where policy_lists.organisation_id = ${organisationId}
          ), 0) as policy_version)`.as("ctx"),
        )
        .leftJoin("items", (join) =>
          join
            .on("items.organisation_id", "=", organisationId)
            .on("items.environment", "=", environment)
            .on((eb) =>
              query.itemName !== undefined
                ? eb("items.name", "=", query.itemName)
                : eb(eb.val(query.host ?? ""), "=", eb.fn.any("items.allowed_hosts")),
            ),
        )
        // grants.repo findUsableGrants, with the item's id and folder from the row.
        .leftJoin("grants", (join) =>
          join
            .onRef("grants.organisation_id", "=", "items.organisation_id")
            .on((eb) =>
              eb.or([
                eb("grants.item_id", "=", eb.ref("items.id")),
                eb.and([
                  eb("grants.policy", "=", "folder_standing"),
                  eb("grants.folder_id", "=", eb.ref("items.folder_id")),
                ]),
              ]),
            )
            .on("grants.agent_id", "=", agentId)
            .on("grants.tool_id", "=", toolId)
            .on("grants.status", "=", "active")
            .on((eb) => eb.or([eb("grants.expires_at", "is", null), eb("grants.expires_at", ">", now)])),
        )
        // grants.repo's GrantWithItem: the grant's own item's name and its agent's name.
        .leftJoin("items as grant_items", "grant_items.id", "grants.item_id")
        .leftJoin("clients as grant_agents", (join) =>
          join
            .onRef("grant_agents.id", "=", "grants.agent_id")
            .onRef("grant_agents.organisation_id", "=", "grants.organisation_id"),
        )
        .selectAll("grants")
        .select([
          "ctx.client_live",
          "ctx.policy_version",
          "grant_items.name as item_name",
          "grant_agents.name as agent_name",
          "items.id as call_item_id",
          "items.name as call_item_name",
          "items.folder_id as call_item_folder_id",
          "items.allowed_hosts as call_item_allowed_hosts",
          "items.inject as call_item_inject",
          "items.username as call_item_username",
          "items.sealing_key_id as call_item_sealing_key_id",
          "items.sealed_value as call_item_sealed_value",
          "items.last_used_at as call_item_last_used_at",
        ])
        .orderBy("items.name")
        .execute();

      const items = new Map<string, CallableItem>();
      const grants = new Map<string, GrantWithItem[]>();
      for (const row of rows) {
        const {
          client_live: _live,
          policy_version: _version,
          call_item_id: itemId,
          call_item_name,
          call_item_folder_id,
          call_item_allowed_hosts,
          call_item_inject,
          call_item_username,
          call_item_sealing_key_id,
          call_item_sealed_value,
          call_item_last_used_at,
          ...grant
        } = row;
        if (itemId === null) continue;
        if (!items.has(itemId)) {
          items.set(itemId, {
            id: itemId,
            name: call_item_name!,
            folderId: call_item_folder_id,
            allowedHosts: call_item_allowed_hosts!,
            inject: call_item_inject!,
            username: call_item_username,
            sealingKeyId: call_item_sealing_key_id!,
            sealedValue: call_item_sealed_value!,
            lastUsedAt: call_item_last_used_at,
          });
          grants.set(itemId, []);
        }
        if (grant.id !== null) grants.get(itemId)!.push(grant as GrantWithItem);
      }
      for (const list of grants.values()) {
        list.sort((a, b) => POLICY_ORDER.indexOf(a.policy) - POLICY_ORDER.indexOf(b.policy));
      }
      return {
        clientLive: rows[0]?.client_live === true,
        policyVersion: Number(rows[0]?.policy_version ?? 0),
        items: [...items.values()],
        grantsOf: (itemId) => grants.get(itemId) ?? [],
      };
    },
  };
}
