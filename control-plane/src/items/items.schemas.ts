// The shapes of an item at the edges: what an operator sends, what any caller may see.
import { safeString } from "@latch/shared/text/safe-string";
import { z } from "zod";
import { ENVIRONMENTS } from "../config.ts";

/** Spec 2.1: [A-Z][A-Z0-9_]{0,127}. */
export const ITEM_NAME = /^[A-Z][A-Z0-9_]{0,127}$/;
export const ITEM_KINDS = ["secret", "client_secret", "login"] as const;
/** Longer than any API key, PEM private key or JWT in use; the JSON body limit is 128 KiB. */
export const MAX_VALUE_LENGTH = 32 * 1024;
/** The value limit as people read it, in every refusal of a longer one. */
export const VALUE_TOO_LONG = `a value is at most 32 KiB (${MAX_VALUE_LENGTH.toLocaleString("en")} characters)`;
export const MAX_ALLOWED_HOSTS = 20;

/**
 * Characters that make two folder names look alike while they differ: format characters (bidi
 * controls such as U+202E, zero-width ones, U+FEFF) and the line and paragraph separators. A folder
 * decides which folder_standing approvals cover a credential, so the name an owner confirms must be
 * the name they see.
 */
const INVISIBLE_IN_NAMES = /[\p{Cf}\p{Zl}\p{Zp}]/u;

/** A folder name as typed: safe text without invisible characters (the service trims and NFC-normalises it). */
export function folderNameText() {
  return safeString().refine(
    (name) => !INVISIBLE_IN_NAMES.test(name),
    "contains an invisible formatting character (a bidi control, a zero-width character) or a line or paragraph separator",
  );
}

/**
 * The folder name stored and compared: trimmed and NFC-normalised, so "apis " and "apis", or a
 * composed and a decomposed "é", are one folder. Undefined when nothing is left or it is too long.
 * @example normaliseFolderName(" Cafe\u0301 ") // "Café"
 */
export function normaliseFolderName(name: string): string | undefined {
  const normalised = name.trim().normalize("NFC");
  return normalised.length >= 1 && normalised.length <= 128 ? normalised : undefined;
}

/** An item to store. Field rules beyond shape (name, hosts, inject, kind) live in items.service. */
export const itemInput = z.strictObject({
  name: safeString().max(256),
  value: z.string().max(MAX_VALUE_LENGTH, VALUE_TOO_LONG),
  environment: z.enum(ENVIRONMENTS).optional(),
  kind: z.enum(ITEM_KINDS).default("secret"),
  allowed_hosts: z.array(safeString().max(300)).max(MAX_ALLOWED_HOSTS).default([]),
  inject: safeString().max(300).default("bearer"),
  username: safeString().max(512).nullish(),
  folder_name: folderNameText().min(1).max(128).nullish(),
});
export type ItemInput = z.input<typeof itemInput>;

/**
 * An edit (POST /api/items/:id and /meta): any field of an item, none required; a blank or missing
 * value keeps the stored one. No defaults here: a field left out keeps its stored value.
 */
export const itemEdit = z.object({
  name: safeString().max(256).optional(),
  value: z.string().max(MAX_VALUE_LENGTH, VALUE_TOO_LONG).nullish(),
  environment: z.enum(ENVIRONMENTS).optional(),
  kind: z.enum(ITEM_KINDS).optional(),
  allowed_hosts: z.array(safeString().max(300)).max(MAX_ALLOWED_HOSTS).optional(),
  inject: safeString().max(300).optional(),
  username: safeString().max(512).nullish(),
  folder_name: folderNameText().max(128).nullish(),
});

/** POST /api/items/:id/rotate: the new value only. */
export const itemRotation = z.object({ value: z.string().max(MAX_VALUE_LENGTH, VALUE_TOO_LONG) });

/** POST /api/folders. The name's length is the service's rule (1 to 128 after trimming). */
export const folderInput = z.object({
  environment: safeString().optional(),
  name: folderNameText(),
});

export const itemsQuery = z.object({ environment: z.string().optional() });

/**
 * An item as listings show it: everything but the value, plus its last four characters. Answers
 * are checked against their schemas, and the handler's own value is sent (http/route-schemas.ts).
 */
export const itemView = z.object({
  id: z.string(),
  name: z.string(),
  kind: z.string(),
  environment: z.string(),
  allowed_hosts: z.array(z.string()),
  inject: z.string(),
  username: z.string().nullable(),
  folder_name: z.string().nullable(),
  last4: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
  /** When a call last went out with it (within a minute); null: never. */
  last_used_at: z.string().nullable(),
});
export type ItemView = z.infer<typeof itemView>;
export const itemAnswer = z.object({ item: itemView });
/** Hosted listings also say which provider an app credential can connect (local has no connect). */
export const itemList = z.object({
  items: z.array(itemView.extend({ connect_provider: z.string().nullable().optional() })),
});
export const folderAnswer = z.object({
  folder: z.object({ id: z.string(), name: z.string(), environment: z.string() }),
});
