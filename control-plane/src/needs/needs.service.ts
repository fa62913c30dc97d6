// Need requests (spec 2.5, 3.2): an agent needs a credential nobody stored. The operator types the
// value on the collect page; fulfilling stores it (sealed at once), activates the requesting
// agent's approval and, with always_allow, writes a standing approval, all in one transaction.
import { AppError } from "@latch/shared/errors";
import { newId } from "@latch/shared/ids";
import type { Kysely } from "kysely";
import type { Database, NeedRequestRow } from "../db/schema.ts";
import { HTTP_REQUEST_TOOL } from "../grants/grant-scope.ts";
import type { RequestedCall } from "../grants/grants.repo.ts";
import {
  type GrantsService,
  MAX_TASK_DESCRIPTION,
  type PublicGrant,
  requestedCallColumns,
  requestedCallOfRow,
  toPublicCall,
} from "../grants/grants.service.ts";
import type { ItemView } from "../items/items.schemas.ts";
import type { ItemsService } from "../items/items.service.ts";
import { checkRequestLimit, withOrganisationLock } from "../limits/request-limit.ts";
import { type Recipe, recipeFields } from "./recipes.ts";

export interface NeedsDeps {
  db: Kysely<Database>;
  baseUrl: string;
  now: () => Date;
  /** Items and grants services bound to one transaction. */
  servicesFor(trx: Kysely<Database>): { items: ItemsService; grants: GrantsService };
}

export interface NeedView {
  need_id: string;
  kind: string;
  status: string;
  environment: string;
  host: string;
  suggested_name: string;
  client_name: string;
  message: string | null;
  collect_url: string;
  created_at: string;
  /** Spec 2.5: the public recipe for a known provider host. */
  recipe?: Recipe;
  /** The call that asked: fulfilling approves it once (DECISIONS "Approvals"); null: any call. */
  call: PublicGrant["call"];
}

/** A need request with the requesting client's name, when the agent is a client. */
type NeedWithClient = NeedRequestRow & { client_label?: string | null };

/** Need requests joined to the name of the client that asked (spec 2.5 client_name). */
const selectNeeds = (db: Kysely<Database>) =>
  db
    .selectFrom("need_requests")
    .leftJoin("clients", (join) =>
      join
        .onRef("clients.id", "=", "need_requests.agent_id")
        .onRef("clients.organisation_id", "=", "need_requests.organisation_id"),
    )
    .selectAll("need_requests")
    .select("clients.name as client_label");

export function createNeedsService(deps: NeedsDeps) {
  const collectUrl = (id: string) => `${deps.baseUrl}/collect/${id}`;
  const view = (row: NeedWithClient): NeedView => ({
    need_id: row.id,
    kind: row.kind,
    status: row.status,
    environment: row.environment,
    host: row.host,
    suggested_name: row.suggested_name,
    client_name: row.client_label ?? row.agent_id,
    message: row.message,
    collect_url: collectUrl(row.id),
    created_at: row.created_at.toISOString(),
    call: toPublicCall(row),
    ...recipeFields(row.host),
  });

  async function loadNeed(db: Kysely<Database>, organisationId: string, id: string): Promise<NeedWithClient> {
    const row = await selectNeeds(db)
      .where("need_requests.organisation_id", "=", organisationId)
      .where("need_requests.id", "=", id)
      .executeTakeFirst();
    if (!row) throw new AppError("not_found", "no such request");
    return row;
  }

  /** pending -> `status` by a conditional UPDATE, so one answer wins; any later one is need_closed. */
  async function closePending(
    db: Kysely<Database>,
    organisationId: string,
    id: string,
    status: "fulfilled" | "denied",
  ): Promise<void> {
    const closed = await db
      .updateTable("need_requests")
      .set({ status, closed_at: deps.now() })
      .where("organisation_id", "=", organisationId)
      .where("id", "=", id)
      .where("status", "=", "pending")
      .executeTakeFirst();
    if (closed.numUpdatedRows !== 1n)
      throw new AppError("need_closed", "this request was just answered by someone else");
  }

  return {
    /** The agent's pending request for this host, or a new one (counted toward 30 per hour). */
    async requestNeed(input: {
      organisationId: string;
      environment: string;
      host: string;
      suggestedName: string;
      agentId: string;
      /** The agent's task description, shown in the Inbox (500 characters). */
      message?: string | undefined;
      /** The http_request that found nothing stored: what fulfilling approves once. */
      requestedCall?: RequestedCall | undefined;
    }): Promise<NeedView> {
      const now = deps.now();
      const row = await withOrganisationLock(deps.db, input.organisationId, async (trx) => {
        const existing = await trx
          .selectFrom("need_requests")
          .selectAll()
          .where("organisation_id", "=", input.organisationId)
          .where("environment", "=", input.environment)
          .where("host", "=", input.host)
          .where("agent_id", "=", input.agentId)
          .where("status", "=", "pending")
          .executeTakeFirst();
        if (existing) return existing;
        await checkRequestLimit(trx, input.organisationId, now);
        const fresh: NeedRequestRow = {
          id: newId("ned"),
          organisation_id: input.organisationId,
          environment: input.environment,
          kind: "secret",
          host: input.host,
          suggested_name: input.suggestedName,
          agent_id: input.agentId,
          message: input.message ? input.message.slice(0, MAX_TASK_DESCRIPTION) : null,
          status: "pending",
          item_id: null,
          created_at: now,
          closed_at: null,
          ...requestedCallColumns(input.requestedCall),
        };
        await trx.insertInto("need_requests").values(fresh).execute();
        return fresh;
      });
      return view(await loadNeed(deps.db, input.organisationId, row.id));
    },

    async getNeed(organisationId: string, id: string): Promise<NeedView> {
      return view(await loadNeed(deps.db, organisationId, id));
    },

    listPending: async (organisationId: string): Promise<NeedView[]> =>
      (
        await selectNeeds(deps.db)
          .where("need_requests.organisation_id", "=", organisationId)
          .where("need_requests.status", "=", "pending")
          .orderBy("need_requests.created_at", "desc")
          .execute()
      ).map(view),

    async fulfilNeed(
      organisationId: string,
      actor: string,
      id: string,
      body: Record<string, unknown>,
    ): Promise<{ item: ItemView; grant: PublicGrant }> {
      return deps.db.transaction().execute(async (trx) => {
        const need = await loadNeed(trx, organisationId, id);
        if (need.kind === "connect") {
          throw new AppError(
            "need_is_connect",
            "a connect request is answered from the inbox's connect card",
          );
        }
        if (need.status !== "pending")
          throw new AppError("need_closed", `this request is already ${need.status}`);
        // Claimed first: of simultaneous fulfils exactly one stores a value and activates an
        // approval; the others wait on the row and then find it closed.
        await closePending(trx, organisationId, id, "fulfilled");
        const { items, grants } = deps.servicesFor(trx);
        const item = await items.storeItem(organisationId, actor, {
          name: body.name ?? need.suggested_name,
          value: body.value,
          environment: need.environment,
          kind: body.kind ?? "secret",
          allowed_hosts: body.allowed_hosts ?? [need.host],
          inject: body.inject ?? "bearer",
          username: body.username,
        });
        const grant = await grants.createActiveGrant({
          organisationId,
          environment: need.environment,
          itemId: item.id,
          agentId: need.agent_id,
          toolId: HTTP_REQUEST_TOOL,
          actor,
          policy: body.always_allow === true ? "item_standing" : "prompt",
          // One call: the call that asked, as the collect page showed it. Always allow keeps the
          // whole item (a standing grant keeps the scope the operator gives it).
          ...(body.always_allow === true ? {} : { requestedCall: requestedCallOfRow(need) }),
        });
        await trx.updateTable("need_requests").set({ item_id: item.id }).where("id", "=", id).execute();
        return { item, grant };
      });
    },

    async denyNeed(organisationId: string, id: string): Promise<void> {
      const need = await loadNeed(deps.db, organisationId, id);
      if (need.status !== "pending")
        throw new AppError("need_closed", `this request is already ${need.status}`);
      await closePending(deps.db, organisationId, id, "denied");
    },
  };
}

export type NeedsService = ReturnType<typeof createNeedsService>;
