// The control plane holds no key that opens a stored secret (DECISIONS "The two tiers"), enforced
// at start: in production it refuses to start a proxy of its own (that proxy would keep its
// keyring in the control plane's DATA_DIR, readable by its user) and refuses a DATA_DIR where a
// sealing keyring is readable; with a proxy of its own at EGRESS_URL it starts.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sealingKeyPath } from "../../egress-proxy/src/keys/sealing-keys.ts";
import {
  type ProductionProxy,
  startControlPlaneInProduction,
  startProductionProxy,
} from "./production-start.ts";

// PGlite: the database is not what these checks are about (database-role.int.test.ts is).
describe("the control plane in production", () => {
  let proxy: ProductionProxy;

  beforeAll(async () => {
    proxy = await startProductionProxy();
  }, 60_000);

  afterAll(async () => {
    await proxy?.stop();
  });

  it("refuses to start a proxy alongside, in one sentence", async () => {
    const refused = await startControlPlaneInProduction({});
    expect(refused.outcome).toBe(1);
    expect(refused.stderr.trim()).toBe(
      "Latch cannot start: the egress proxy runs as its own process in production; set EGRESS_URL.",
    );
  }, 60_000);

  it("refuses a DATA_DIR where it can read a sealing keyring, and starts once it is gone", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "latch-prod-shared-"));
    // Where a proxy sharing this DATA_DIR (npm start's) writes its keyring.
    const keyring = sealingKeyPath(dataDir);
    mkdirSync(dirname(keyring), { recursive: true });
    writeFileSync(keyring, '{"keys":["not-a-real-key"]}', { mode: 0o600 });
    const env = {
      DATA_DIR: dataDir,
      EGRESS_URL: proxy.address,
      TICKET_SIGNING_KEY_FILE: proxy.ticketKeyFile,
    };
    const refused = await startControlPlaneInProduction(env);
    expect(refused.outcome).toBe(1);
    expect(refused.stderr.trim()).toBe(
      "Latch cannot start: DATA_DIR holds the egress proxy's sealing keyring (egress/sealing-keys.json) and this process can read it, but the control plane never holds a key that opens a stored secret; keep the keyring on the proxies' own volume only.",
    );
    expect(refused.stderr).not.toContain("not-a-real-key");

    rmSync(keyring);
    const started = await startControlPlaneInProduction(env);
    expect(started.outcome, started.stderr).toBe("ready");
  }, 120_000);
});
