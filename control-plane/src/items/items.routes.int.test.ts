import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  Browser,
  type HostedHarness,
  lastCodeFor,
  readyOperator,
  startHosted,
  uniqueEmail,
} from "../../test/hosted.ts";

const VALUE = "sk_live_hostedcanary_0123456789";
let h: HostedHarness;

beforeAll(async () => {
  h = await startHosted();
}, 60_000);
afterAll(async () => {
  await h.close();
});

const item = {
  name: "STRIPE_KEY",
  value: VALUE,
  environment: "production",
  kind: "secret",
  allowed_hosts: ["api.stripe.com"],
  inject: "bearer",
};

describe("hosted items", () => {
  it("creates, lists without values, refuses duplicates and empty values", async () => {
    const op = await readyOperator(h);
    const created = await op.request("POST", "/api/items", item);
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json().item).toMatchObject({
      name: "STRIPE_KEY",
      last4: "6789",
      allowed_hosts: ["api.stripe.com"],
    });
    expect((await op.request("POST", "/api/items", item)).statusCode).toBe(409);
    expect((await op.request("POST", "/api/items", { ...item, name: "OTHER", value: "" })).statusCode).toBe(
      400,
    );
    const listed = await op.request("GET", "/api/items");
    expect(listed.json().items).toHaveLength(1);
    expect(listed.body).not.toContain(VALUE);
    expect((await op.request("GET", "/api/items?environment=staging")).json().items).toEqual([]);
  });

  it("edits metadata keeping the value when it is blank, rotates the value, deletes", async () => {
    const op = await readyOperator(h);
    const id = (await op.request("POST", "/api/items", item)).json().item.id;
    const sealedBefore = await h.plane.database.db
      .selectFrom("items")
      .select("sealed_value")
      .where("id", "=", id)
      .executeTakeFirstOrThrow();
    const edited = await op.request("POST", `/api/items/${id}/meta`, {
      allowed_hosts: ["api.stripe.com", "files.stripe.com"],
      value: "",
    });
    expect(edited.statusCode, edited.body).toBe(200);
    expect(edited.json().item).toMatchObject({
      allowed_hosts: ["api.stripe.com", "files.stripe.com"],
      last4: "6789",
    });
    const sealedAfter = await h.plane.database.db
      .selectFrom("items")
      .select("sealed_value")
      .where("id", "=", id)
      .executeTakeFirstOrThrow();
    expect(Buffer.from(sealedAfter.sealed_value).equals(Buffer.from(sealedBefore.sealed_value))).toBe(true);
    const rotated = await op.request("POST", `/api/items/${id}/rotate`, {
      value: "sk_live_rotated_value_abcd",
    });
    expect(rotated.json().item.last4).toBe("abcd");
    expect((await op.request("POST", `/api/items/${id}/rotate`, { value: "" })).statusCode).toBe(400);
    expect((await op.request("DELETE", `/api/items/${id}`)).statusCode).toBe(200);
    expect((await op.request("GET", "/api/items")).json().items).toEqual([]);
  });

  it("answers 404 for another organisation's item ids", async () => {
    const mine = await readyOperator(h);
    const theirs = await readyOperator(h);
    const id = (await mine.request("POST", "/api/items", item)).json().item.id;
    for (const [method, path, body] of [
      ["POST", `/api/items/${id}`, { allowed_hosts: ["evil.example.com"] }],
      ["POST", `/api/items/${id}/rotate`, { value: "stolen-value-xyz1" }],
      ["DELETE", `/api/items/${id}`, undefined],
    ] as const) {
      expect((await theirs.request(method, path, body)).statusCode, path).toBe(404);
    }
    expect((await mine.request("GET", "/api/items")).json().items[0]).toMatchObject({ id, last4: "6789" });
  });

  it("refuses inject refresh (spec 2.2: the local variant only), stored or edited in (Connect alone stores one)", async () => {
    const op = await readyOperator(h);
    const refresh = {
      name: "SPOTIFY_REFRESH",
      value: VALUE,
      environment: "production",
      allowed_hosts: ["api.spotify.com", "accounts.spotify.com"],
      inject: "refresh",
    };
    const refused = await op.request("POST", "/api/items", refresh);
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error.code).toBe("invalid_inject");
    expect(refused.json().error.message).toMatch(/Connect/);
    const stored = await op.request("POST", "/api/items", { ...refresh, inject: "bearer" });
    expect(stored.statusCode, stored.body).toBe(201);
    const edited = await op.request("POST", `/api/items/${stored.json().item.id}`, { inject: "refresh" });
    expect(edited.statusCode).toBe(400);
    expect(edited.json().error.code).toBe("invalid_inject");
    expect((await op.request("GET", "/api/items")).json().items[0].inject).toBe("bearer");
  });

  it("creates folders and files items in them", async () => {
    const op = await readyOperator(h);
    const folder = await op.request("POST", "/api/folders", { environment: "staging", name: "payments" });
    expect(folder.statusCode).toBe(201);
    const created = await op.request("POST", "/api/items", {
      ...item,
      environment: "staging",
      folder_name: "payments",
    });
    expect(created.json().item).toMatchObject({ folder_name: "payments", environment: "staging" });
  });

  it("keeps folder names that look alike one folder: trimmed, NFC, no invisible characters", async () => {
    const op = await readyOperator(h);
    const store = (name: string, folder_name: string) =>
      op.request("POST", "/api/items", { ...item, name, environment: "staging", folder_name });
    const spaced = await store("SPACED_KEY", "  Caf\u0065\u0301 ");
    expect(spaced.statusCode, spaced.body).toBe(201);
    expect(spaced.json().item.folder_name).toBe("Caf\u00e9");
    const folder = await op.request("POST", "/api/folders", { environment: "staging", name: "Caf\u00e9 " });
    expect(folder.json().folder).toMatchObject({ name: "Caf\u00e9", id: expect.any(String) });
    const edited = await op.request("POST", `/api/items/${spaced.json().item.id}`, { folder_name: " ops " });
    expect(edited.json().item.folder_name).toBe("ops");
    expect((await store("BLANK_KEY", "   ")).json().error).toEqual({
      code: "invalid_request",
      message: "invalid folder_name: a folder name is 1 to 128 characters",
    });
    for (const hidden of ["apis\u202egnp.exe", "ap\u200bis", "\ufeffapis", "apis\u2028", "apis\u2029"]) {
      for (const refused of [
        await store("HIDDEN_KEY", hidden),
        await op.request("POST", `/api/items/${spaced.json().item.id}/meta`, { folder_name: hidden }),
        await op.request("POST", "/api/folders", { environment: "staging", name: hidden }),
      ]) {
        expect(refused.statusCode, JSON.stringify(hidden)).toBe(400);
        expect(refused.json().error).toMatchObject({ code: "invalid_request" });
        expect(refused.json().error.message).toMatch(/name/);
      }
    }
    const names = (await op.request("GET", "/api/items")).json().items.map((i: { name: string }) => i.name);
    expect(names).not.toContain("HIDDEN_KEY");
  });

  it("refuses a body its schema does not fit as 400 naming the field, in the error envelope", async () => {
    const op = await readyOperator(h);
    const wrongType = await op.request("POST", "/api/items", { ...item, allowed_hosts: "api.stripe.com" });
    expect(wrongType.statusCode).toBe(400);
    expect(wrongType.json()).toEqual({
      error: { code: "invalid_request", message: expect.stringContaining("allowed_hosts") },
    });
    const secretish = await op.request("POST", "/api/items", { ...item, value: 12345678 });
    expect(secretish.json().error).toEqual({
      code: "invalid_request",
      message: "invalid value: not a string of the allowed length",
    });
  });

  it("judges the caller before the body: a session short of the authenticator step is 403, not 400", async () => {
    const pending = new Browser(h.app);
    const email = uniqueEmail("pending");
    await pending.request("POST", "/api/auth/otp/send", { email });
    await pending.request("POST", "/api/auth/otp/verify", { email, otp: lastCodeFor(h.inbox, email) });
    const refused = await pending.request("POST", "/api/items", { name: 42 });
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toMatchObject({ error: "mfa_required" });
    const noCsrf = await pending.request("POST", "/api/items", { name: 42 }, { "x-csrf-token": "wrong" });
    expect(noCsrf.json().error.code).toBe("csrf_failed");
  });
});

describe("the value limit", () => {
  it("names 32 KiB when a value is longer, on create, rotate and edit, and takes exactly 32 KiB", async () => {
    const op = await readyOperator(h);
    const long = "v".repeat(32 * 1024 + 1);
    const created = await op.request("POST", "/api/items", { ...item, name: "LONG_KEY", value: long });
    expect(created.statusCode).toBe(400);
    expect(created.json().error.message).toMatch(/32 KiB \(32,768 characters\)/);
    expect(created.body).not.toContain(long.slice(0, 64));
    const fits = await op.request("POST", "/api/items", {
      ...item,
      name: "FULL_KEY",
      value: "v".repeat(32 * 1024),
    });
    expect(fits.statusCode, fits.body).toBe(201);
    const id = fits.json().item.id as string;
    for (const [path, body] of [
      [`/api/items/${id}/rotate`, { value: long }],
      [`/api/items/${id}`, { value: long }],
    ] as const) {
      const refused = await op.request("POST", path, body);
      expect(refused.statusCode, path).toBe(400);
      expect(refused.json().error.message, path).toMatch(/32 KiB/);
    }
  });
});
