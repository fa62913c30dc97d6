// Whether an edit widens a credential: lets the approvals that already cover it send it somewhere
// new, or place it somewhere new. Standing approvals cover the item as it is at call time (a
// whole-credential one covers every host it lists), so a widening edit is itself a standing
// decision (DECISIONS "Teams"). Pure; items.service decides what follows.
//
// Only the host list and the inject mode decide where and how the value leaves: `username` is the
// public half sent beside it to the same hosts, `kind` is not read by the call path (an app
// credential is its inject mode), a new value is a rotation, a rename or another environment keeps
// the item's id, which its approvals are bound to, and a move into a folder is judged as a move.

export interface ItemReach {
  allowed_hosts: readonly string[];
  inject: string;
}

export interface Widening {
  /** Hosts the credential may now be sent to that it could not before. */
  addedHosts: string[];
  /** The inject mode changed: the value is placed elsewhere (a header, a query, a signature ...). */
  isInjectChanged: boolean;
}

/**
 * What `after` adds to `before`, or undefined when it adds nothing (removing hosts narrows).
 * @example findWidening({ allowed_hosts: ["a.example"], inject: "bearer" },
 *   { allowed_hosts: ["a.example", "b.example"], inject: "bearer" }) // { addedHosts: ["b.example"], isInjectChanged: false }
 */
export function findWidening(before: ItemReach, after: ItemReach): Widening | undefined {
  const addedHosts = after.allowed_hosts.filter((host) => !before.allowed_hosts.includes(host));
  const isInjectChanged = after.inject !== before.inject;
  return addedHosts.length > 0 || isInjectChanged ? { addedHosts, isInjectChanged } : undefined;
}
