import { ENVELOPE_HEADER, splitEnvelope } from "@latch/shared/crypto/envelope";
import { deriveSealingKeyId, readySodium } from "@latch/shared/crypto/seal";
import { AppError } from "@latch/shared/errors";
import { beforeAll, describe, expect, it } from "vitest";
import { newTestOrganisation, testDatabase } from "../../test/database.ts";
import { createAuditRepo } from "../audit/audit.repo.ts";
import type { OpenDatabase } from "../db/database.ts";
import { createItemsRepo } from "./items.repo.ts";
import { createItemsService, type ItemsService } from "./items.service.ts";

let database: OpenDatabase;
let items: ItemsService;
let serviceDeps: Parameters<typeof createItemsService>[0];
let proxyKeys: { publicKey: Uint8Array; privateKey: Uint8Array };

beforeAll(async () => {
  database = await testDatabase();
  const sodium = await readySodium();
  proxyKeys = sodium.crypto_box_keypair();
  const audit = createAuditRepo(database.db);
  serviceDeps = {
    repo: createItemsRepo(database.db),
    sealingKey: async () => ({
      keyId: deriveSealingKeyId(proxyKeys.publicKey),
      publicKey: proxyKeys.publicKey,
    }),
    recordEvent: audit.insertAuditEvent,
    environments: ["staging", "production"],
    defaultEnvironment: "production",
  };
  items = createItemsService(serviceDeps);
});

const VALUE = "ghp_canaryvalue0123456789abcdef";
const base = { name: "GITHUB_TOKEN", value: VALUE, allowed_hosts: ["api.github.com"] };

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return "resolved";
  } catch (error) {
    return error instanceof AppError ? error.code : `unexpected ${String(error)}`;
  }
}

describe("storing an item", () => {
  it("seals the value to the proxy's key and keeps only last4 in clear", async () => {
    const org = await newTestOrganisation(database);
    const view = await items.storeItem(org, "operator", {
      ...base,
      allowed_hosts: ["API.GitHub.com.", "api.github.com"],
      inject: "header:X-Api-Key",
    });
    expect(view).toMatchObject({
      name: "GITHUB_TOKEN",
      kind: "secret",
      environment: "production",
      allowed_hosts: ["api.github.com"],
      inject: "header:X-Api-Key",
      last4: "cdef",
      username: null,
    });
    expect(JSON.stringify(view)).not.toContain(VALUE);

    const row = await database.db
      .selectFrom("items")
      .selectAll()
      .where("organisation_id", "=", org)
      .executeTakeFirstOrThrow();
    expect(Buffer.from(row.sealed_value).includes(Buffer.from(VALUE))).toBe(false);
    expect(row.sealing_key_id).toBe(deriveSealingKeyId(proxyKeys.publicKey));
    // An envelope: the value under its own data key, only the data key sealed to the proxy.
    const sodium = await readySodium();
    const parts = splitEnvelope(new Uint8Array(row.sealed_value));
    if (!parts) throw new Error("the stored value is not an envelope");
    const dataKey = sodium.crypto_box_seal_open(
      parts.sealedDataKey,
      proxyKeys.publicKey,
      proxyKeys.privateKey,
    );
    const opened = sodium.crypto_aead_xchacha20poly1305_ietf_decrypt(
      null,
      parts.ciphertext,
      ENVELOPE_HEADER,
      parts.nonce,
      dataKey,
    );
    expect(new TextDecoder().decode(opened)).toBe(VALUE);
  });

  it("answers 409 duplicate_name for a name already used in the environment, and replaces on request", async () => {
    const org = await newTestOrganisation(database);
    const first = await items.storeItem(org, "operator", base);
    expect(await codeOf(items.storeItem(org, "operator", base))).toBe("duplicate_name");
    // The same name in another environment is another credential.
    await items.storeItem(org, "operator", { ...base, environment: "staging" });
    const replaced = await items.storeItem(
      org,
      "operator",
      { ...base, value: "ghp_secondvalue_9999", allowed_hosts: ["uploads.github.com"] },
      { replace: true },
    );
    expect(replaced.id).toBe(first.id);
    expect(replaced).toMatchObject({ last4: "9999", allowed_hosts: ["uploads.github.com"] });
    expect(await items.listItems(org)).toHaveLength(2);
  });

  it("answers the stored item even when a rename lands right after the write", async () => {
    const org = await newTestOrganisation(database);
    const repo = createItemsRepo(database.db);
    // Another operator renames the credential the moment it is written: the answer is the row the
    // store wrote, read in its own transaction, never a lookup by a name that is gone (a 500).
    const renaming = createItemsService({
      ...serviceDeps,
      repo: {
        ...repo,
        async insertItem(row) {
          await repo.insertItem(row);
          await repo.updateItem(row.organisation_id, row.id, { name: "RENAMED_TOKEN" });
        },
      },
    });
    const stored = await renaming.storeItem(org, "operator", base);
    expect(stored).toMatchObject({ name: "RENAMED_TOKEN", allowed_hosts: ["api.github.com"], last4: "cdef" });
  });

  it("answers duplicate_name when an edit renames a credential onto another one's name", async () => {
    const org = await newTestOrganisation(database);
    await items.storeItem(org, "operator", base);
    const second = await items.storeItem(org, "operator", { ...base, name: "SECOND_TOKEN" });
    expect(await codeOf(items.updateItem(org, "operator", second.id, { name: base.name }))).toBe(
      "duplicate_name",
    );
    expect((await items.listItems(org)).map((i) => i.name).sort()).toEqual([base.name, "SECOND_TOKEN"]);
  });

  it("lets exactly one of two simultaneous stores of one name win", async () => {
    const org = await newTestOrganisation(database);
    const outcomes = await Promise.all([
      codeOf(items.storeItem(org, "operator", base)),
      codeOf(items.storeItem(org, "operator", base)),
    ]);
    expect(outcomes.sort()).toEqual(["duplicate_name", "resolved"]);
  });

  it.each([
    ["an empty value", { value: "" }, "empty_value"],
    ["a value with a newline", { value: "abc\ndef" }, "invalid_request"],
    ["a lowercase name", { name: "github_token" }, "invalid_name"],
    ["a name starting with a digit", { name: "1TOKEN" }, "invalid_name"],
    ["a name of 129 characters", { name: `A${"B".repeat(128)}` }, "invalid_name"],
    ["a name with a dash", { name: "GITHUB-TOKEN" }, "invalid_name"],
    ["no host", { allowed_hosts: [] }, "invalid_host"],
    ["an IPv4 host", { allowed_hosts: ["127.0.0.1"] }, "ip_literal"],
    ["an octal host", { allowed_hosts: ["0177.1"] }, "ip_literal"],
    ["an IPv6 host", { allowed_hosts: ["[::1]"] }, "ip_literal"],
    ["a host with a port", { allowed_hosts: ["api.github.com:443"] }, "invalid_host"],
    ["an unknown inject mode", { inject: "smoke-signal" }, "invalid_inject"],
    ["a header inject overriding Host", { inject: "header:Host" }, "invalid_inject"],
    ["client_secret without a client id", { kind: "client_secret" }, "invalid_request"],
    ["basic without a user", { inject: "basic" }, "invalid_request"],
    [
      "sigv4 without an access key id",
      { inject: "sigv4", allowed_hosts: ["sqs.eu-west-1.amazonaws.com"] },
      "invalid_request",
    ],
    ["sigv4 for a host that is not AWS", { inject: "sigv4", username: "AKIDEXAMPLE" }, "invalid_inject"],
    [
      "client_credentials for a host of no provider",
      { inject: "client_credentials", username: "cid", allowed_hosts: ["api.example.com"] },
      "invalid_inject",
    ],
    ["client_credentials without the client id", { inject: "client_credentials" }, "invalid_request"],
    [
      "client_credentials as a login",
      { inject: "client_credentials", username: "cid", kind: "login" },
      "invalid_request",
    ],
    ["refresh on a name that is not <ITEM>_REFRESH", { inject: "refresh" }, "invalid_inject"],
    ["an unknown field", { colour: "blue" }, "invalid_request"],
    ["a value that is not a string", { value: 42 }, "invalid_request"],
  ])("refuses %s", async (_label, change, code) => {
    const org = await newTestOrganisation(database);
    expect(await codeOf(items.storeItem(org, "operator", { ...base, ...change }))).toBe(code);
    expect(await items.listItems(org)).toEqual([]);
  });

  it("never repeats a refused value in the error", async () => {
    const org = await newTestOrganisation(database);
    const error = await items.storeItem(org, "operator", { ...base, value: ["x", VALUE] }).catch((e) => e);
    expect(error).toBeInstanceOf(AppError);
    expect(JSON.stringify((error as AppError).toBody())).not.toContain(VALUE);
  });

  it("answers not_found for an environment the plane does not serve", async () => {
    const database2 = database;
    const stagingOnly = createItemsService({
      repo: createItemsRepo(database2.db),
      sealingKey: async () => ({
        keyId: deriveSealingKeyId(proxyKeys.publicKey),
        publicKey: proxyKeys.publicKey,
      }),
      recordEvent: async () => {},
      environments: ["staging"],
      defaultEnvironment: "staging",
    });
    const org = await newTestOrganisation(database);
    expect(await codeOf(stagingOnly.storeItem(org, "operator", { ...base, environment: "production" }))).toBe(
      "not_found",
    );
    expect(await codeOf(stagingOnly.listItems(org, "production"))).toBe("not_found");
  });
});

describe("organisations are walls", () => {
  it("hides one organisation's items from another, by list, name, host and id", async () => {
    const mine = await newTestOrganisation(database);
    const theirs = await newTestOrganisation(database);
    const item = await items.storeItem(mine, "operator", { ...base, folder_name: "ci" });
    expect(item.folder_name).toBe("ci");
    expect(await items.listItems(theirs)).toEqual([]);
    expect(await items.findCallableByName(theirs, "production", "GITHUB_TOKEN")).toBeUndefined();
    expect(await items.findCallableByHost(theirs, "production", "api.github.com")).toEqual([]);
    expect(await codeOf(items.deleteItem(theirs, "operator", item.id))).toBe("not_found");
    expect(await items.findCallableByHost(mine, "production", "api.github.com")).toHaveLength(1);
    await items.deleteItem(mine, "operator", item.id);
    expect(await items.listItems(mine)).toEqual([]);
  });

  it("audits stores and deletes by name, never by value", async () => {
    const org = await newTestOrganisation(database);
    const item = await items.storeItem(org, "operator", base);
    await items.deleteItem(org, "operator", item.id);
    const events = await createAuditRepo(database.db).findAuditEvents(org);
    expect(events.map((e) => e.action)).toEqual(["item_deleted", "item_created"]);
    expect(events[1]).toMatchObject({ item_name: "GITHUB_TOKEN", actor: "operator" });
    expect(JSON.stringify(events)).not.toContain(VALUE);
  });
});
