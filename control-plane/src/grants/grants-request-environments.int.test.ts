// Hosted POST /api/grants/request by an operator (spec 4.3): with only item_name it looks in every
// environment the plane serves; one match wins, several are 409 ambiguous naming the environments;
// an optional environment picks one and must be one the plane serves.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Browser, type HostedHarness, readyOperator, startHosted } from "../../test/hosted.ts";

let h: HostedHarness;

beforeAll(async () => {
  h = await startHosted();
}, 60_000);

afterAll(async () => {
  await h?.close();
});

async function store(op: Browser, name: string, environment: string) {
  const stored = await op.request("POST", "/api/items", {
    name,
    value: `value_for_${name.toLowerCase()}_0123456789`,
    environment,
    allowed_hosts: ["api.latch.test"],
  });
  expect(stored.statusCode, stored.body).toBe(201);
}

describe("POST /api/grants/request by an operator, across environments", () => {
  it("finds an item stored only in production without being told the environment", async () => {
    const op = await readyOperator(h);
    await store(op, "PROD_ONLY_TOKEN", "production");
    const asked = await op.request("POST", "/api/grants/request", { item_name: "PROD_ONLY_TOKEN" });
    expect(asked.statusCode, asked.body).toBe(201);
    expect(asked.json().grant).toMatchObject({
      item_name: "PROD_ONLY_TOKEN",
      environment_id: "production",
      status: "pending",
    });
  });

  it("answers 409 ambiguous naming both environments when the name is in each, and takes environment", async () => {
    const op = await readyOperator(h);
    await store(op, "TWICE_TOKEN", "staging");
    await store(op, "TWICE_TOKEN", "production");
    const ambiguous = await op.request("POST", "/api/grants/request", { item_name: "TWICE_TOKEN" });
    expect(ambiguous.statusCode, ambiguous.body).toBe(409);
    const error = ambiguous.json().error;
    expect(error.code).toBe("ambiguous");
    expect(error.environments).toEqual(["staging", "production"]);
    expect(error.message).toContain("staging");
    expect(error.message).toContain("production");
    expect(error.message).toContain("environment");
    // Nothing was asked of the operator for an ambiguous request.
    expect((await op.request("GET", "/api/inbox")).json().approvals).toEqual([]);

    const picked = await op.request("POST", "/api/grants/request", {
      item_name: "TWICE_TOKEN",
      environment: "production",
    });
    expect(picked.statusCode, picked.body).toBe(201);
    expect(picked.json().grant).toMatchObject({ item_name: "TWICE_TOKEN", environment_id: "production" });
  });

  it("checks environment against the environments the plane serves", async () => {
    const op = await readyOperator(h);
    await store(op, "STAGED_TOKEN", "staging");
    const unknown = await op.request("POST", "/api/grants/request", {
      item_name: "STAGED_TOKEN",
      environment: "development",
    });
    expect(unknown.statusCode, unknown.body).toBe(404);
    expect(unknown.json().error.message).toContain("development");
    const wrongType = await op.request("POST", "/api/grants/request", {
      item_name: "STAGED_TOKEN",
      environment: 7,
    });
    expect(wrongType.statusCode, wrongType.body).toBe(400);
    expect(wrongType.json().error.message).toContain("environment");
    // Named but not there: 404 naming where it looked.
    const elsewhere = await op.request("POST", "/api/grants/request", {
      item_name: "STAGED_TOKEN",
      environment: "production",
    });
    expect(elsewhere.statusCode).toBe(404);
    expect(elsewhere.json().error.message).toContain("production");
    // Nowhere at all: 404 naming every environment searched.
    const missing = await op.request("POST", "/api/grants/request", { item_name: "NOWHERE_TOKEN" });
    expect(missing.statusCode).toBe(404);
    expect(missing.json().error.message).toMatch(/staging.*production/);
  });
});
