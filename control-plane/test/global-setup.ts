// Once per test run: a migrated PGlite data directory that every worker copies (opening a copy
// takes well under a second; creating a PGlite database takes several), and one temporary folder
// for the whole run. TMPDIR points into it, so every worker and every process a test starts makes
// its files there, and the run removes them all when it ends: a PGlite copy is 40 MB per test file,
// and a full run left gigabytes behind on the machine.
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { openDatabase } from "../src/db/database.ts";

declare module "vitest" {
  export interface ProvidedContext {
    pgliteTemplate: string;
  }
}

export default async function setup(project: TestProject): Promise<() => void> {
  const runRoot = mkdtempSync(join(tmpdir(), "latch-test-"));
  // Others may pass through, not list: the multi-host test's PostgreSQL runs as the postgres user
  // in a folder of its own inside.
  chmodSync(runRoot, 0o711);
  process.env.TMPDIR = runRoot;
  const root = mkdtempSync(join(runRoot, "pglite-template-"));
  if (!process.env.DATABASE_URL) {
    const database = await openDatabase({ dataDir: root });
    await database.close();
  } else {
    // Migrate once up front so workers do not race for the migration lock.
    const database = await openDatabase({ databaseUrl: process.env.DATABASE_URL, dataDir: root });
    await database.close();
  }
  project.provide("pgliteTemplate", join(root, "pgdata"));
  return () => rmSync(runRoot, { recursive: true, force: true });
}
