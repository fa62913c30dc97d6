// The shapes of the need-item API at the edge (spec 4.3 "Items and collect"): the collect page's
// fulfil, and the request as the operator reads it. The fulfil body is permissive on content: the
// request's own state (need_is_connect, need_closed) is judged first, then the item as any stored
// item is (items.service: invalid_name, empty_value, invalid_host ...).
import { safeString } from "@latch/shared/text/safe-string";
import { z } from "zod";
import { bodyView, publicGrant } from "../grants/grants.schemas.ts";
import { ITEM_KINDS, itemView } from "../items/items.schemas.ts";

/** What the collect page sends; everything but the value has a default from the request. */
export const needFulfilment = z.object({
  value: z.string().optional(),
  name: safeString().optional(),
  kind: z.enum(ITEM_KINDS).optional(),
  allowed_hosts: z.array(safeString()).optional(),
  inject: safeString().optional(),
  username: safeString().nullish(),
  /** An item_standing approval instead of one call. */
  always_allow: z.boolean().optional(),
  /**
   * With always_allow: path_prefix covers the request's method and host under its path's prefix;
   * credential (or none) the whole credential.
   */
  scope: z.enum(["path_prefix", "credential"]).optional(),
});

export const needView = z.object({
  need_id: z.string(),
  kind: z.string(),
  status: z.string(),
  environment: z.string(),
  /** Null when the agent named only the credential: the operator names the host when storing it. */
  host: z.string().nullable(),
  suggested_name: z.string(),
  client_name: z.string(),
  message: z.string().nullable(),
  collect_url: z.string(),
  created_at: z.string(),
  /** Spec 2.5: the public recipe for a known provider host. */
  recipe: z.object({ steps: z.array(z.string()), next: z.string() }).optional(),
  call: publicGrant.shape.call,
  body: bodyView.nullable(),
  /** A connect request's provider (spec 2.5 kind connect): the console's connect card starts it. */
  provider: z.string().optional(),
});

export const needAnswer = z.object({ need: needView });
export const fulfilledNeed = z.object({ item: itemView, grant: publicGrant });
