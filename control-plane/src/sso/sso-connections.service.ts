// An organisation's OpenID Connect connection (DECISIONS "Passkeys and single sign-on"): issuer,
// client ID, client secret (sealed to the egress proxy the moment it arrives, like any credential),
// email domains, the role a new address joins as (auditor unless set; never owner), and whether
// members of those domains must sign in with it. Saving checks the issuer's discovery document
// through the proxy, so a typo is refused at once rather than at the first sign-in. A listed
// domain counts (makes accounts of new addresses, routes "Sign in with SSO", is required of
// members) only once proven: the organisation publishes a TXT record with its token and
// verifyDomains finds it (domain-records.ts).
import { randomBytes } from "node:crypto";
import type { SealingPublicKey } from "@latch/shared/crypto/seal";
import { sealValue } from "@latch/shared/crypto/seal";
import { AppError } from "@latch/shared/errors";
import { checkHostname } from "@latch/shared/requests/host";
import { refuseUnsafeText } from "@latch/shared/text/safe-string";
import type { AuditEvent } from "../audit/audit.repo.ts";
import type { SsoConnectionRow } from "../db/schema.ts";
import { type TxtLookup, verificationRecord } from "./domain-records.ts";
import type { RelyingParty } from "./oidc-relying-party.ts";
import type { SsoRepo } from "./sso.repo.ts";

/** The roles a connection may give a new address: least privilege by default, never owner. */
export const SSO_ROLES = ["admin", "approver", "auditor"] as const;
const MAX_DOMAINS = 20;

export interface ConnectionView {
  issuer: string;
  client_id: string;
  client_secret_last4: string;
  email_domains: string[];
  default_role: string;
  require_sso: boolean;
  /** What the identity provider must list as this client's redirect URI. */
  redirect_uri: string;
  /** Where the organisation's members sign in. */
  sign_in_url: string;
  updated_at: string;
  /**
   * Each listed domain, whether it is proven, the TXT record that proves it, and how many of the
   * daily checks in a row missed that record (domain-recheck.ts; a proven domain lapses at 3).
   */
  domains: {
    domain: string;
    verified: boolean;
    record: { name: string; value: string };
    missed_checks: number;
  }[];
}

/** One domain's check: found, or why not. */
export interface DomainCheck {
  domain: string;
  verified: boolean;
  /** Why it is not (no record, or the DNS could not be read). */
  reason?: string;
}

export interface ConnectionInput {
  issuer?: unknown;
  client_id?: unknown;
  client_secret?: unknown;
  email_domains?: unknown;
  default_role?: unknown;
  require_sso?: unknown;
}

/** The repo and the audit append of one transaction. */
export interface SsoTransaction {
  repo: SsoRepo;
  recordEvent(event: AuditEvent): Promise<void>;
}

export interface SsoConnectionsDeps {
  repo: SsoRepo;
  relyingParty: Pick<RelyingParty, "serverMetadata">;
  sealingKey(): Promise<SealingPublicKey>;
  /** One transaction: its repo, and its audit append (the row commits with the change, or neither). */
  inTransaction<T>(fn: (tx: SsoTransaction) => Promise<T>): Promise<T>;
  /** The TXT records at a name, read through the egress proxy (domain-records.ts). */
  lookUpTxt: TxtLookup;
  baseUrl: string;
  now: () => Date;
}

function text(field: string, raw: unknown, max: number): string {
  refuseUnsafeText(field, raw);
  const value = typeof raw === "string" ? raw.trim() : "";
  if (value.length < 1 || value.length > max) {
    throw new AppError("invalid_request", `${field} is 1 to ${max} characters`);
  }
  return value;
}

/** An issuer as a person pastes it: an https URL on port 443, no query or fragment. */
function checkIssuer(raw: unknown): string {
  const value = text("issuer", raw, 500);
  const url = URL.parse(value);
  if (
    url?.protocol !== "https:" ||
    (url.port && url.port !== "443") ||
    url.search ||
    url.hash ||
    url.username
  ) {
    throw new AppError(
      "invalid_request",
      "issuer is the provider's https address, with no query or fragment",
    );
  }
  const host = checkHostname(url.hostname);
  if (!host.ok) throw new AppError("invalid_request", `issuer: ${host.message}`);
  return value.replace(/\/+$/, "");
}

function checkDomains(raw: unknown): string[] {
  if (!Array.isArray(raw) || raw.length < 1 || raw.length > MAX_DOMAINS) {
    throw new AppError(
      "invalid_request",
      `email_domains lists 1 to ${MAX_DOMAINS} domains, such as ["example.com"]`,
    );
  }
  const domains = raw.map((entry, index) => {
    const host = checkHostname(typeof entry === "string" ? entry.trim().toLowerCase() : "");
    if (!host.ok || !host.host.includes(".")) {
      throw new AppError("invalid_request", `email_domains[${index}] is not a domain name`);
    }
    return host.host;
  });
  return [...new Set(domains)];
}

export function createSsoConnectionsService(deps: SsoConnectionsDeps) {
  const redirectUri = `${deps.baseUrl}/sso/callback`;

  function viewOf(row: SsoConnectionRow, slug: string): ConnectionView {
    return {
      issuer: row.issuer,
      client_id: row.client_id,
      client_secret_last4: row.client_secret_last4,
      email_domains: row.email_domains,
      default_role: row.default_role,
      require_sso: row.require_sso,
      redirect_uri: redirectUri,
      sign_in_url: `${deps.baseUrl}/sso/${slug}`,
      updated_at: row.updated_at.toISOString(),
      domains: row.email_domains.map((domain) => ({
        domain,
        verified: row.verified_domains.includes(domain),
        record: verificationRecord(domain, row.domain_token),
        missed_checks: row.verified_domains.includes(domain) ? (row.domain_misses[domain] ?? 0) : 0,
      })),
    };
  }

  return {
    redirectUri,

    async get(organisationId: string, slug: string): Promise<ConnectionView | null> {
      const row = await deps.repo.findConnection(organisationId);
      return row ? viewOf(row, slug) : null;
    },

    /** Adds or replaces the connection (the secret is kept when none is sent); audited. */
    async put(
      organisationId: string,
      slug: string,
      actor: string,
      input: ConnectionInput,
    ): Promise<ConnectionView> {
      const existing = await deps.repo.findConnection(organisationId);
      const issuer = checkIssuer(input.issuer);
      const clientId = text("client_id", input.client_id, 256);
      const hasSecret = input.client_secret !== undefined && input.client_secret !== "";
      if (!hasSecret && !existing)
        throw new AppError("invalid_request", "client_secret is needed for a new connection");
      // The kept secret is the old provider's: it must never be sent to another issuer's token
      // endpoint, nor under another client id.
      if (
        !hasSecret &&
        existing &&
        (existing.issuer.replace(/\/+$/, "") !== issuer || existing.client_id !== clientId)
      ) {
        throw new AppError(
          "invalid_request",
          "client_secret is needed when the issuer or client_id changes: the saved one is the old provider's",
        );
      }
      const emailDomains = checkDomains(input.email_domains);
      const defaultRole = input.default_role ?? "auditor";
      if (typeof defaultRole !== "string" || !(SSO_ROLES as readonly string[]).includes(defaultRole)) {
        throw new AppError(
          "invalid_request",
          "default_role is admin, approver or auditor (an owner is never made by a sign-in)",
        );
      }
      const requireSso = input.require_sso ?? false;
      if (typeof requireSso !== "boolean")
        throw new AppError("invalid_request", "require_sso is true or false");
      // The discovery document names the issuer exactly; it is kept as the provider spells it.
      const metadata = await deps.relyingParty
        .serverMetadata(issuer, organisationId)
        .catch((error: unknown) => {
          const why = error instanceof AppError ? error.message : "it could not be read";
          throw new AppError("invalid_request", `the issuer's discovery document was refused: ${why}`);
        });
      let secret: { sealed: Uint8Array; keyId: string; last4: string } | undefined;
      if (hasSecret) {
        const value = text("client_secret", input.client_secret, 4096);
        const sealed = await sealValue(await deps.sealingKey(), value);
        secret = {
          sealed: sealed.sealed,
          keyId: sealed.keyId,
          last4: value.length >= 12 ? value.slice(-4) : "",
        };
      }
      const at = deps.now();
      await deps.inTransaction(async ({ repo, recordEvent }) => {
        await repo.upsertConnection({
          organisationId,
          issuer: metadata.issuer,
          clientId,
          ...(secret ? { secret } : {}),
          emailDomains,
          defaultRole,
          requireSso,
          // Kept across edits of the same provider (its records stay valid); a domain no longer
          // listed stops counting; another issuer or client starts anew (sso.repo.ts).
          domainToken: randomBytes(18).toString("base64url"),
          at,
        });
        await recordEvent({
          organisationId,
          actor,
          action: "sso_connection_changed",
          detail: {
            issuer: metadata.issuer,
            client_id: clientId,
            email_domains: emailDomains,
            default_role: defaultRole,
            require_sso: requireSso,
            client_secret_changed: hasSecret,
          },
        });
      });
      const row = await deps.repo.findConnection(organisationId);
      return viewOf(row!, slug);
    },

    /**
     * Looks for each listed, unproven domain's TXT record (its name and value in the view) and
     * counts the domains whose record carries this connection's token; audited per domain.
     */
    async verifyDomains(
      organisationId: string,
      slug: string,
      actor: string,
    ): Promise<{ connection: ConnectionView; checked: DomainCheck[] }> {
      const row = await deps.repo.findConnection(organisationId);
      if (!row) throw new AppError("not_found", "this organisation has no single sign-on connection");
      const unproven = row.email_domains.filter((domain) => !row.verified_domains.includes(domain));
      const checked = await Promise.all(
        unproven.map(async (domain): Promise<DomainCheck> => {
          const record = verificationRecord(domain, row.domain_token);
          try {
            const texts = await deps.lookUpTxt(record.name, organisationId);
            if (texts.includes(record.value)) return { domain, verified: true };
            return {
              domain,
              verified: false,
              reason: texts.length
                ? `the TXT records at ${record.name} do not carry ${record.value}`
                : `no TXT record at ${record.name} yet (DNS changes may take a while to show)`,
            };
          } catch (error) {
            const why = error instanceof AppError ? error.message : "the DNS could not be read";
            return { domain, verified: false, reason: why };
          }
        }),
      );
      const proven = checked.filter((check) => check.verified).map((check) => check.domain);
      if (proven.length > 0) {
        await deps.inTransaction(async ({ repo, recordEvent }) => {
          if (!(await repo.updateDomainsVerified(organisationId, row.domain_token, proven))) {
            throw new AppError(
              "stale_version",
              "the connection was removed or made again while its domains were checked: check again",
            );
          }
          for (const domain of proven) {
            await recordEvent({ organisationId, actor, action: "sso_domain_verified", detail: { domain } });
          }
        });
      }
      const after = await deps.repo.findConnection(organisationId);
      if (!after) throw new AppError("not_found", "this organisation has no single sign-on connection");
      return { connection: viewOf(after, slug), checked };
    },

    async remove(organisationId: string, actor: string): Promise<void> {
      await deps.inTransaction(async ({ repo, recordEvent }) => {
        if (!(await repo.deleteConnection(organisationId))) {
          throw new AppError("not_found", "this organisation has no single sign-on connection");
        }
        await recordEvent({ organisationId, actor, action: "sso_connection_removed", detail: {} });
      });
    },
  };
}

export type SsoConnectionsService = ReturnType<typeof createSsoConnectionsService>;
