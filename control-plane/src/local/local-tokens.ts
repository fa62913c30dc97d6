// The two loopback bearers of `vault serve`: one for the operator API (/api/*), one for MCP.
// Created on first use and kept owner-only in DATA_DIR, so an MCP client's configuration survives
// a restart. Compared in constant time through their hashes.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { createPrivateFileExclusive, readPrivateJson } from "@latch/shared/files";
import { z } from "zod";

export interface LocalTokens {
  operator: string;
  model: string;
}

export type LocalRole = "operator" | "model";

const tokensFile = z.object({
  operator: z.string().startsWith("lvo_"),
  model: z.string().startsWith("lvm_"),
});

export function localTokensPath(dataDir: string): string {
  return join(dataDir, "local", "tokens.json");
}

export function loadOrCreateLocalTokens(dataDir: string): LocalTokens {
  const path = localTokensPath(dataDir);
  if (!existsSync(path)) {
    const fresh: LocalTokens = {
      operator: `lvo_${randomBytes(32).toString("base64url")}`,
      model: `lvm_${randomBytes(32).toString("base64url")}`,
    };
    // Exclusive: of two processes starting together, one writes and both read the same file.
    createPrivateFileExclusive(path, `${JSON.stringify(fresh)}\n`);
  }
  return tokensFile.parse(readPrivateJson(path));
}

const digest = (value: string) => createHash("sha256").update(value).digest();

/** Which role a presented bearer belongs to, if any. */
export function createTokenChecker(
  tokens: LocalTokens,
): (presented: string | undefined) => LocalRole | undefined {
  const operator = digest(tokens.operator);
  const model = digest(tokens.model);
  return (presented) => {
    if (!presented) return undefined;
    const hash = digest(presented);
    if (timingSafeEqual(hash, operator)) return "operator";
    if (timingSafeEqual(hash, model)) return "model";
    return undefined;
  };
}
