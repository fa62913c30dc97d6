// The shapes of an item at the edges: what an operator sends, what any caller may see.
import { safeString } from "@latch/shared/text/safe-string";
import { z } from "zod";
import { ENVIRONMENTS } from "../config.ts";

/** Spec 2.1: [A-Z][A-Z0-9_]{0,127}. */
export const ITEM_NAME = /^[A-Z][A-Z0-9_]{0,127}$/;
export const ITEM_KINDS = ["secret", "client_secret", "login"] as const;
/** Longer than any API key, PEM private key or JWT in use; the JSON body limit is 128 KiB. */
export const MAX_VALUE_LENGTH = 32 * 1024;
export const MAX_ALLOWED_HOSTS = 20;

/** An item to store. Field rules beyond shape (name, hosts, inject, kind) live in items.service. */
export const itemInput = z.strictObject({
  name: safeString().max(256),
  value: z.string().max(MAX_VALUE_LENGTH, `a value is at most ${MAX_VALUE_LENGTH} characters`),
  environment: z.enum(ENVIRONMENTS).optional(),
  kind: z.enum(ITEM_KINDS).default("secret"),
  allowed_hosts: z.array(safeString().max(300)).max(MAX_ALLOWED_HOSTS).default([]),
  inject: safeString().max(300).default("bearer"),
  username: safeString().max(512).nullish(),
  folder_name: safeString().min(1).max(128).nullish(),
});
export type ItemInput = z.input<typeof itemInput>;

/** An item as listings show it: everything but the value, plus its last four characters. */
export interface ItemView {
  id: string;
  name: string;
  kind: string;
  environment: string;
  allowed_hosts: string[];
  inject: string;
  username: string | null;
  folder_name: string | null;
  last4: string;
  created_at: string;
  updated_at: string;
}
