import { describe, expect, it } from "vitest";
import type { GrantsRepo, GrantWithItem } from "../grants/grants.repo.ts";
import type { ItemTokensRepo } from "../items/item-tokens.repo.ts";
import type { ItemsRepo, ItemWithFolder } from "../items/items.repo.ts";
import { createReadCache, MAX_ENTRIES } from "./read-cache.ts";

// The repos behind the cache: rows in plain arrays, every call counted, writes that change them.
function fakeRepos() {
  const calls: string[] = [];
  let item: ItemWithFolder | undefined = {
    id: "itm_1",
    name: "API_KEY",
    allowed_hosts: ["api.example.com"],
    sealed_value: Uint8Array.of(1, 2, 3),
  } as unknown as ItemWithFolder;
  let grants: GrantWithItem[] = [];
  // A gate the test closes to hold a read (after it has read its row) until it has run a write.
  let gate: Promise<void> | undefined;
  let openGate = () => {};
  const items = {
    async findItemByName() {
      calls.push("findItemByName");
      const found = item;
      if (gate) await gate;
      return found;
    },
    async findItemsByHost() {
      calls.push("findItemsByHost");
      return item ? [item] : [];
    },
    async deleteItem() {
      calls.push("deleteItem");
      item = undefined;
      return true;
    },
    async findOrInsertFolder() {
      calls.push("findOrInsertFolder");
      return "fld_1";
    },
  } as unknown as ItemsRepo;
  const grantsRepo = {
    async findUsableGrants(_scope: unknown, now: Date) {
      calls.push("findUsableGrants");
      return grants.filter((g) => g.expires_at === null || g.expires_at > now);
    },
    async updateGrantRevoked() {
      calls.push("updateGrantRevoked");
      grants = [];
      return "active" as const;
    },
  } as unknown as GrantsRepo;
  return {
    calls,
    items,
    grants: grantsRepo,
    setGrants: (rows: GrantWithItem[]) => {
      grants = rows;
    },
    holdReads: () => {
      gate = new Promise((resolve) => {
        openGate = resolve;
      });
    },
    releaseReads: () => {
      gate = undefined;
      openGate();
    },
  };
}

const scope = { organisationId: "org_1", itemId: "itm_1", agentId: "agent", toolId: "http_request" };
const grant = (id: string, expiresAt: Date | null) =>
  ({ id, policy: "session", status: "active", expires_at: expiresAt }) as unknown as GrantWithItem;

describe("local read cache", () => {
  it("answers a repeated lookup from memory until a write through either repo", async () => {
    const fake = fakeRepos();
    const cache = createReadCache();
    const items = cache.items(fake.items);
    const grants = cache.grants(fake.grants);

    expect((await items.findItemByName("org_1", "production", "API_KEY"))?.id).toBe("itm_1");
    expect((await items.findItemByName("org_1", "production", "API_KEY"))?.id).toBe("itm_1");
    expect(fake.calls).toEqual(["findItemByName"]);

    // A grant write empties the item lookups too (a deleted item takes its grants with it).
    await grants.updateGrantRevoked("org_1", "grt_1", new Date(), "local");
    await items.deleteItem("org_1", "itm_1");
    expect(await items.findItemByName("org_1", "production", "API_KEY")).toBeUndefined();
    expect(await items.findItemsByHost("org_1", "production", "api.example.com")).toEqual([]);
    expect(fake.calls).toEqual([
      "findItemByName",
      "updateGrantRevoked",
      "deleteItem",
      "findItemByName",
      "findItemsByHost",
    ]);
  });

  it("empties the item lookups when a connected item's refresh token is rotated in place", async () => {
    const fake = fakeRepos();
    const cache = createReadCache();
    const items = cache.items(fake.items);
    const calls: string[] = [];
    const tokens = cache.tokens({
      findAccessToken: async () => {
        calls.push("findAccessToken");
        return undefined;
      },
      findSealedValue: async () => {
        calls.push("findSealedValue");
        return undefined;
      },
      updateRotatedValue: async () => {
        calls.push("updateRotatedValue");
        return true;
      },
    } as unknown as ItemTokensRepo);

    await items.findItemByName("org_1", "production", "API_KEY");
    // Reading a minted token or the stored value changes nothing: the item stays remembered.
    await tokens.findAccessToken("itm_1", new Date());
    await tokens.findSealedValue("itm_1");
    await items.findItemByName("org_1", "production", "API_KEY");
    expect(fake.calls).toEqual(["findItemByName"]);
    // The rotation rewrites the item's sealed value: the next lookup reads the database.
    await tokens.updateRotatedValue("itm_1", Uint8Array.of(1), {
      sealedValue: Uint8Array.of(2),
      sealingKeyId: "sk_1",
      last4: "",
    });
    await items.findItemByName("org_1", "production", "API_KEY");
    expect(fake.calls).toEqual(["findItemByName", "findItemByName"]);
    expect(calls).toEqual(["findAccessToken", "findSealedValue", "updateRotatedValue"]);
  });

  it("keeps at most MAX_ENTRIES lookups: an agent naming ever new items cannot grow it without end", async () => {
    const fake = fakeRepos();
    const items = createReadCache().items(fake.items);
    for (let i = 0; i < MAX_ENTRIES; i++) await items.findItemByName("org_1", "production", `MISSING_${i}`);
    await items.findItemByName("org_1", "production", "MISSING_0");
    expect(fake.calls).toHaveLength(MAX_ENTRIES);
    // The next new name empties the full map before it is kept: the first name is read again.
    await items.findItemByName("org_1", "production", "ONE_MORE");
    await items.findItemByName("org_1", "production", "MISSING_0");
    expect(fake.calls).toHaveLength(MAX_ENTRIES + 2);
  });

  it("treats a find that writes (findOrInsertFolder) as a write", async () => {
    const fake = fakeRepos();
    const items = createReadCache().items(fake.items);
    await items.findItemByName("org_1", "production", "API_KEY");
    await items.findOrInsertFolder("org_1", "production", "team", "fld_new");
    await items.findItemByName("org_1", "production", "API_KEY");
    expect(fake.calls.filter((c) => c === "findItemByName")).toHaveLength(2);
  });

  it("does not keep a read that was in flight while a write ran", async () => {
    const fake = fakeRepos();
    const items = createReadCache().items(fake.items);
    fake.holdReads();
    const stale = items.findItemByName("org_1", "production", "API_KEY");
    await items.deleteItem("org_1", "itm_1");
    fake.releaseReads();
    // The read that started before the delete answers what it read, but is not remembered.
    expect((await stale)?.id).toBe("itm_1");
    expect(await items.findItemByName("org_1", "production", "API_KEY")).toBeUndefined();
  });

  it("drops a grant from a remembered answer once it has expired", async () => {
    const fake = fakeRepos();
    const grants = createReadCache().grants(fake.grants);
    const t0 = new Date("2026-11-23T12:00:00Z");
    fake.setGrants([grant("grt_short", new Date(t0.getTime() + 1_000)), grant("grt_standing", null)]);

    expect((await grants.findUsableGrants(scope, t0)).map((g) => g.id)).toEqual([
      "grt_short",
      "grt_standing",
    ]);
    const later = new Date(t0.getTime() + 1_000);
    expect((await grants.findUsableGrants(scope, later)).map((g) => g.id)).toEqual(["grt_standing"]);
    expect(fake.calls).toEqual(["findUsableGrants"]);

    // A clock that went back is not answered from memory.
    await grants.findUsableGrants(scope, new Date(t0.getTime() - 1));
    expect(fake.calls).toEqual(["findUsableGrants", "findUsableGrants"]);
  });

  it("keeps its own copies: a caller changing a row changes nothing remembered", async () => {
    const fake = fakeRepos();
    const cache = createReadCache();
    const items = cache.items(fake.items);
    const grants = cache.grants(fake.grants);
    fake.setGrants([grant("grt_1", null)]);

    const first = await items.findItemByName("org_1", "production", "API_KEY");
    first!.allowed_hosts.push("evil.example");
    first!.name = "CHANGED";
    const again = await items.findItemByName("org_1", "production", "API_KEY");
    expect(again?.allowed_hosts).toEqual(["api.example.com"]);
    expect(again?.name).toBe("API_KEY");

    const [row] = await grants.findUsableGrants(scope, new Date());
    row!.status = "revoked";
    const [kept] = await grants.findUsableGrants(scope, new Date());
    expect(kept?.status).toBe("active");
  });
});
