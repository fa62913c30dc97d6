// oidc-provider's storage adapter over Kysely (PostgreSQL or PGlite). Every artifact is keyed by the
// SHA-256 of its id and its payload is stored without the id: a refresh token's or authorization
// code's id is the token itself, a session's or interaction's id is its cookie, so none of them is
// ever in the database in plaintext. Consuming is one conditional UPDATE, so two replicas spending
// the same refresh token at once cannot both win (the loser is reuse: the whole grant is revoked).
// A device code is the one id the adapter must give back from another key (its user code): it is
// stored encrypted under a key the database does not hold, bound to its own row. Expired rows are
// deleted by the hourly prune (oauth-expiry.repo.ts).
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from "node:crypto";
import { sha256Hex } from "@latch/shared/crypto/hash";
import type { Kysely } from "kysely";
import { type Adapter, type AdapterPayload, errors } from "oidc-provider";
import type { Database } from "../db/schema.ts";

/** Artifacts that are ours, not oidc-provider's: stored like its own, keyed by a hash. */
const INTERACTION_CLIENT = "InteractionClient";
const GRANT_SIGN_IN = "GrantSignIn";
/** The one decision an interaction is answered with (consent.routes.ts): claimed once by its uid. */
const CONSENT_DECISION = "ConsentDecision";

/** Models whose artifacts belong to a grant (revoking the grant destroys them). */
const GRANT_BOUND = new Set([
  "AccessToken",
  "AuthorizationCode",
  "RefreshToken",
  "DeviceCode",
  "Grant",
  GRANT_SIGN_IN,
]);

const hashOf = (value: string) => sha256Hex(value);

const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * Seals and opens a device code's id under a key derived from `secret` (the OAuth server's cookie
 * key, which lives in its key file, never in the database), bound to the row's id hash.
 */
function deviceCodeSealer(secret: string) {
  const key = Buffer.from(hkdfSync("sha256", secret, Buffer.alloc(0), "latch oauth device code id", 32));
  return {
    seal(id: string, idHash: string): string {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv("aes-256-gcm", key, iv);
      cipher.setAAD(Buffer.from(idHash));
      const body = Buffer.concat([cipher.update(id, "utf8"), cipher.final()]);
      return Buffer.concat([iv, cipher.getAuthTag(), body]).toString("base64url");
    },
    /** The id, or undefined when the sealed text does not open under this key for this row. */
    open(sealed: string, idHash: string): string | undefined {
      try {
        const bytes = Buffer.from(sealed, "base64url");
        const decipher = createDecipheriv("aes-256-gcm", key, bytes.subarray(0, IV_BYTES));
        decipher.setAAD(Buffer.from(idHash));
        decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
        const id = Buffer.concat([decipher.update(bytes.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]);
        const text = id.toString("utf8");
        return hashOf(text) === idHash ? text : undefined;
      } catch {
        return undefined;
      }
    },
  };
}

/**
 * The client an interaction was started for, as oidc-provider resolved it at /oauth/authorize (or
 * /device) in its own request, with spec 8's limits: the consent page reads it from here and never
 * resolves the client again (a client metadata document would be fetched again outside the limits'
 * request, and on another replica, whose cache is its own).
 */
export interface InteractionClient {
  clientId: string;
  clientName: string | undefined;
  /**
   * A client metadata document client's metadata as resolved then: the resume of the interaction
   * (after /consent) resolves the client from this, never from the document fetched again.
   */
  document?: Record<string, unknown> | undefined;
}

/**
 * How the session that consented to a grant was signed in: `ssoOrganisationId`, the organisation
 * whose single sign-on began it, or null (an email code, a passkey). Where an organisation requires
 * its single sign-on of the operator's address, only a grant given through that sign-on lives.
 */
export interface GrantSignIn {
  ssoOrganisationId: string | null;
}

export interface OAuthArtifactsRepo {
  adapterFor(model: string): Adapter;
  /** Keeps the client of interaction `uid` for as long as the interaction lives. */
  saveInteractionClient(uid: string, client: InteractionClient, expiresIn: number): Promise<void>;
  findInteractionClient(uid: string): Promise<InteractionClient | undefined>;
  /**
   * Claims the one decision interaction `uid` may take (approve or deny), for as long as the
   * interaction lives: true for the first claim, false when it was claimed already. One insert that
   * conflicts on the uid's hash, so two requests at once (a double click, two tabs, a replayed
   * form), on one replica or two, cannot both take it.
   */
  claimDecision(uid: string, expiresIn: number): Promise<boolean>;
  /** Gives the claim back: the decision failed before anything of it was kept. */
  releaseDecision(uid: string): Promise<void>;
  /** Keeps how the consenting session signed in with grant `grantId` (ended with the grant). */
  saveGrantSignIn(grantId: string, signIn: GrantSignIn, expiresIn: number): Promise<void>;
  /** How the consent of grant `grantId` was signed in; undefined when none was recorded. */
  findGrantSignIn(grantId: string): Promise<GrantSignIn | undefined>;
  /** Destroys every artifact of a grant (its refresh tokens, codes and the grant itself). */
  destroyGrant(grantId: string): Promise<void>;
  /** Whether the grant still exists (not revoked, not expired). */
  isGrantLive(grantId: string, now: Date): Promise<boolean>;
  /** Destroys the operator's OAuth sign-in sessions (sign-out ends them too). */
  destroySessionsOf(accountId: string): Promise<void>;
}

export interface OAuthArtifactsOptions {
  /** The secret a device code's id is sealed under (the OAuth server's first cookie key). */
  deviceCodeSecret: string;
  /**
   * Told of a grant ended because a code or refresh token was spent twice in a race (the loser's
   * consume), which oidc-provider does not report as `grant.revoked`; the Access ledger marks it
   * (spec 6).
   */
  onReuseRevoked?: (grantId: string) => void;
}

export function createOAuthArtifactsRepo(
  db: Kysely<Database>,
  now: () => Date,
  options: OAuthArtifactsOptions,
): OAuthArtifactsRepo {
  const onReuseRevoked = options.onReuseRevoked ?? (() => undefined);
  if (!options.deviceCodeSecret) throw new Error("the OAuth key file holds no cookie key");
  const deviceCodes = deviceCodeSealer(options.deviceCodeSecret);
  const destroyGrant = async (grantId: string) => {
    await db.deleteFrom("oauth_artifacts").where("grant_id", "=", grantId).execute();
  };

  const rowToPayload = (row: { payload: Record<string, unknown>; consumed_at: Date | null }, id: string) => {
    const payload = { ...row.payload } as AdapterPayload;
    if (row.payload._jti === true) payload.jti = id;
    delete (payload as Record<string, unknown>)._jti;
    delete (payload as Record<string, unknown>)._jti_sealed;
    if (row.consumed_at) payload.consumed = Math.floor(row.consumed_at.getTime() / 1000);
    return payload;
  };

  function adapterFor(model: string): Adapter {
    const live = () =>
      db
        .selectFrom("oauth_artifacts")
        .select(["payload", "consumed_at", "expires_at", "id_hash"])
        .where("model", "=", model)
        .where((eb) => eb.or([eb("expires_at", "is", null), eb("expires_at", ">", now())]));

    return {
      async upsert(id: string, payload: AdapterPayload, expiresIn: number) {
        const {
          jti,
          userCode,
          uid,
          consumed: _consumed,
          ...rest
        } = payload as AdapterPayload & {
          userCode?: string;
        };
        // The id is never stored; a marker says the payload had one so find() puts it back. A device
        // code's is stored sealed too: the user-code lookup has no id to start from, and someone
        // reading the database must not be able to poll for the tokens an operator approves.
        const idHash = hashOf(id);
        const stored: Record<string, unknown> = { ...rest, ...(jti !== undefined ? { _jti: true } : {}) };
        if (model === "DeviceCode" && typeof jti === "string")
          stored._jti_sealed = deviceCodes.seal(jti, idHash);
        if (uid !== undefined) stored.uid = uid;
        const values = {
          model,
          id_hash: idHash,
          payload: JSON.stringify(stored),
          grant_id: GRANT_BOUND.has(model) ? (payload.grantId ?? (model === "Grant" ? id : null)) : null,
          user_code_hash: userCode ? hashOf(userCode) : null,
          uid_hash: uid ? hashOf(uid) : null,
          account_id: typeof payload.accountId === "string" ? payload.accountId : null,
          expires_at: expiresIn ? new Date(now().getTime() + expiresIn * 1000) : null,
          consumed_at: null,
        };
        await db
          .insertInto("oauth_artifacts")
          .values(values)
          .onConflict((oc) =>
            oc.columns(["model", "id_hash"]).doUpdateSet({
              payload: values.payload,
              grant_id: values.grant_id,
              user_code_hash: values.user_code_hash,
              uid_hash: values.uid_hash,
              account_id: values.account_id,
              expires_at: values.expires_at,
            }),
          )
          .execute();
      },

      async find(id: string) {
        const row = await live().where("id_hash", "=", hashOf(id)).executeTakeFirst();
        return row ? rowToPayload(row, id) : undefined;
      },

      async findByUserCode(userCode: string) {
        const row = await live().where("user_code_hash", "=", hashOf(userCode)).executeTakeFirst();
        if (!row) return undefined;
        const sealed = row.payload._jti_sealed;
        const id = typeof sealed === "string" ? deviceCodes.open(sealed, row.id_hash) : undefined;
        // Sealed under another key (the key file was replaced): the code cannot be saved again.
        if (id === undefined) return undefined;
        return { ...rowToPayload(row, id), userCode };
      },

      async findByUid(uid: string) {
        const row = await live().where("uid_hash", "=", hashOf(uid)).executeTakeFirst();
        return row ? { ...row.payload, uid } : undefined;
      },

      async consume(id: string) {
        const spent = await db
          .updateTable("oauth_artifacts")
          .set({ consumed_at: now() })
          .where("model", "=", model)
          .where("id_hash", "=", hashOf(id))
          .where("consumed_at", "is", null)
          .returning("grant_id")
          .executeTakeFirst();
        if (spent) return;
        // Spent already: a second use of a code or a refresh token revokes everything it granted.
        const row = await db
          .selectFrom("oauth_artifacts")
          .select("grant_id")
          .where("model", "=", model)
          .where("id_hash", "=", hashOf(id))
          .executeTakeFirst();
        if (row?.grant_id) {
          await destroyGrant(row.grant_id);
          onReuseRevoked(row.grant_id);
        }
        throw new errors.InvalidGrant("grant request is invalid");
      },

      async destroy(id: string) {
        await db
          .deleteFrom("oauth_artifacts")
          .where("model", "=", model)
          .where("id_hash", "=", hashOf(id))
          .execute();
      },

      async revokeByGrantId(grantId: string) {
        await db
          .deleteFrom("oauth_artifacts")
          .where("model", "=", model)
          .where("grant_id", "=", grantId)
          .execute();
      },
    };
  }

  const interactionClients = adapterFor(INTERACTION_CLIENT);
  const grantSignIns = adapterFor(GRANT_SIGN_IN);

  return {
    adapterFor,
    destroyGrant,
    async saveInteractionClient(uid, client, expiresIn) {
      await interactionClients.upsert(
        uid,
        {
          client_id: client.clientId,
          client_name: client.clientName,
          ...(client.document ? { document: client.document } : {}),
        } as AdapterPayload,
        expiresIn,
      );
    },
    async findInteractionClient(uid) {
      const found = (await interactionClients.find(uid)) as
        | { client_id?: unknown; client_name?: unknown; document?: unknown }
        | undefined;
      if (typeof found?.client_id !== "string") return undefined;
      const { document } = found;
      return {
        clientId: found.client_id,
        clientName: typeof found.client_name === "string" ? found.client_name : undefined,
        document:
          typeof document === "object" && document !== null && !Array.isArray(document)
            ? (document as Record<string, unknown>)
            : undefined,
      };
    },
    async claimDecision(uid, expiresIn) {
      const claimed = await db
        .insertInto("oauth_artifacts")
        .values({
          model: CONSENT_DECISION,
          id_hash: hashOf(uid),
          payload: JSON.stringify({}),
          grant_id: null,
          user_code_hash: null,
          uid_hash: null,
          account_id: null,
          expires_at: new Date(now().getTime() + expiresIn * 1000),
          consumed_at: null,
        })
        .onConflict((oc) => oc.columns(["model", "id_hash"]).doNothing())
        .returning("id_hash")
        .executeTakeFirst();
      return claimed !== undefined;
    },
    async releaseDecision(uid) {
      await db
        .deleteFrom("oauth_artifacts")
        .where("model", "=", CONSENT_DECISION)
        .where("id_hash", "=", hashOf(uid))
        .execute();
    },
    async saveGrantSignIn(grantId, signIn, expiresIn) {
      await grantSignIns.upsert(
        grantId,
        { grantId, sso_organisation_id: signIn.ssoOrganisationId } as AdapterPayload,
        expiresIn,
      );
    },
    async findGrantSignIn(grantId) {
      const found = (await grantSignIns.find(grantId)) as { sso_organisation_id?: unknown } | undefined;
      if (!found) return undefined;
      const sso = found.sso_organisation_id;
      return { ssoOrganisationId: typeof sso === "string" ? sso : null };
    },
    async isGrantLive(grantId, at) {
      const row = await db
        .selectFrom("oauth_artifacts")
        .select("model")
        .where("model", "=", "Grant")
        .where("id_hash", "=", hashOf(grantId))
        .where((eb) => eb.or([eb("expires_at", "is", null), eb("expires_at", ">", at)]))
        .executeTakeFirst();
      return row !== undefined;
    },
    async destroySessionsOf(accountId) {
      await db
        .deleteFrom("oauth_artifacts")
        .where("model", "=", "Session")
        .where("account_id", "=", accountId)
        .execute();
    },
  };
}
