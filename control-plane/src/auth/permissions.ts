// Roles as data (DECISIONS "Teams"): the four roles of an organisation, the actions a route
// declares, and the one table from role to the actions it may perform. The principal hook
// (operator-guard.ts) reads the route's action against this table; no handler compares roles.
import { AppError } from "@latch/shared/errors";

export const ROLES = ["owner", "admin", "approver", "auditor"] as const;
export type Role = (typeof ROLES)[number];

/**
 * What a member may do, one row of DECISIONS' table each, with the words a refusal uses
 * ("approving, denying or revoking approvals needs ...").
 */
export const ACTIONS = {
  /** See the vault (names, hosts, last4), inbox, grants, clients, audit, access and members. */
  "org.read": "seeing this organisation",
  /** Approve, deny, revoke approvals (prompt, session, item_standing); deny a credential request. */
  "approvals.decide": "approving, denying or revoking approvals",
  /** Approve folder_standing (spec 2.4: owner only). */
  "approvals.decide_folder": "approving a folder-standing approval",
  /** Store, edit, delete credentials; fulfil a credential request; connect providers. */
  "credentials.write": "storing, changing or deleting credentials",
  /** Issue, rotate, revoke clients (an OAuth consent issues one). */
  "clients.write": "issuing, rotating or revoking clients",
  /** Edit the organisation's policy rules (a preview is a read). */
  "policies.write": "changing the organisation's policies",
  /** Export the audit. */
  "audit.export": "exporting the audit",
  /** Invite, remove, change roles (and end another member's session). */
  "members.write": "inviting or removing members and changing roles",
  /** Rename or delete the organisation, change its settings, transfer ownership. */
  "org.manage": "changing, deleting or handing over the organisation",
} as const;
export type Action = keyof typeof ACTIONS;

/**
 * What a route declares in its Fastify `config.action`: an action of the table, checked against
 * the member's role in the session's organisation; or "account", the caller's own account (sign-in
 * steps, creating or switching organisations, accepting an invitation), which needs no role.
 */
export type RouteAction = Action | "account";

/** The table: each role's actions (DECISIONS "Teams"). */
export const PERMISSIONS: Readonly<Record<Role, readonly Action[]>> = {
  owner: [
    "org.read",
    "approvals.decide",
    "approvals.decide_folder",
    "credentials.write",
    "clients.write",
    "policies.write",
    "audit.export",
    "members.write",
    "org.manage",
  ],
  admin: [
    "org.read",
    "approvals.decide",
    "credentials.write",
    "clients.write",
    "policies.write",
    "audit.export",
    "members.write",
  ],
  approver: ["org.read", "approvals.decide"],
  auditor: ["org.read", "audit.export"],
};

/**
 * Whose membership a role may touch (invite as, remove, change to or from): an admin never
 * touches an owner or makes one; approvers and auditors touch nobody.
 */
export const MANAGED_ROLES: Readonly<Record<Role, readonly Role[]>> = {
  owner: ROLES,
  admin: ["admin", "approver", "auditor"],
  approver: [],
  auditor: [],
};

export function isRole(value: unknown): value is Role {
  return typeof value === "string" && (ROLES as readonly string[]).includes(value);
}

/** Whether a member of `role` (none: not a member) may perform `action`. */
export function mayPerform(role: Role | null | undefined, action: Action): boolean {
  return role ? PERMISSIONS[role].includes(action) : false;
}

/** The roles that may perform `action`, most powerful first. */
export function rolesFor(action: Action): Role[] {
  return ROLES.filter((role) => PERMISSIONS[role].includes(action));
}

/** Every action `role` may perform (the console shows only the controls these allow). */
export function actionsOf(role: Role | null | undefined): Action[] {
  return role ? [...PERMISSIONS[role]] : [];
}

/** "owner", "owner or admin", "owner, admin or approver". */
function listRoles(roles: readonly Role[]): string {
  return roles.length < 2 ? (roles[0] ?? "") : `${roles.slice(0, -1).join(", ")} or ${roles.at(-1)}`;
}

/**
 * 403 `forbidden_role` naming the roles that may, or undefined when `role` may perform `action`.
 * @example roleRefusal("auditor", "approvals.decide")?.message
 * // "approving, denying or revoking approvals needs the owner, admin or approver role; you are an auditor here"
 */
export function roleRefusal(role: Role, action: Action): AppError | undefined {
  if (mayPerform(role, action)) return undefined;
  const needed = rolesFor(action);
  // Every role's name starts with a vowel: "an owner", "an admin", "an approver", "an auditor".
  return new AppError(
    "forbidden_role",
    `${ACTIONS[action]} needs the ${listRoles(needed)} role; you are an ${role} here`,
    { extra: { required_roles: needed, role } },
  );
}

/** Throws `forbidden_role` unless `role` may perform `action` (a check a body decides, such as folder_standing). */
export function requirePermission(role: Role, action: Action): void {
  const refusal = roleRefusal(role, action);
  if (refusal) throw refusal;
}

/**
 * Throws `forbidden_role` unless a member of `actor` may touch a membership of `target`: invite
 * as it, remove it, change it, or change another role into it.
 */
export function requireManagedRole(actor: Role, target: Role, doing: string): void {
  requirePermission(actor, "members.write");
  if (MANAGED_ROLES[actor].includes(target)) return;
  const needed = ROLES.filter((role) => MANAGED_ROLES[role].includes(target));
  throw new AppError(
    "forbidden_role",
    `${doing} an ${target} needs the ${listRoles(needed)} role; you are an ${actor} here`,
    { extra: { required_roles: needed, role: actor } },
  );
}
