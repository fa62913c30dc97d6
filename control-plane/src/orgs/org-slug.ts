// An organisation's slug (DECISIONS "Passkeys and single sign-on"): lowercase [a-z0-9-] made from
// its name, unique, kept when the organisation is renamed (an SSO address must not move). Pure.

/** The longest slug made from a name; a number added to make it unique may follow. */
export const SLUG_BASE_MAX = 40;

/**
 * The slug a name gives: letters without their accents, lowercase, every other run of characters
 * one `-`, none at either end; "org" when nothing is left.
 * @example slugOf("Acme Café, Ltd.") // "acme-cafe-ltd"
 */
export function slugOf(name: string): string {
  const slug = name
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, SLUG_BASE_MAX)
    .replace(/-+$/, "");
  return slug || "org";
}

/**
 * Slugs no organisation gets: `/sso/callback` is the single sign-on's own return address, so an
 * organisation named "Callback" would have a sign-in address that never reaches it.
 */
const RESERVED_SLUGS = ["callback"];

/**
 * The first of `base`, `base-2`, `base-3`, ... that is neither taken nor reserved.
 * @example uniqueSlug("acme", ["acme", "acme-2"]) // "acme-3"
 */
export function uniqueSlug(base: string, taken: Iterable<string>): string {
  const used = new Set([...taken, ...RESERVED_SLUGS]);
  let slug = base;
  for (let n = 2; used.has(slug); n++) slug = `${base}-${n}`;
  return slug;
}
