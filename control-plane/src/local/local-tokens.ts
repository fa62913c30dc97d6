// The two loopback bearers of `vault serve`: one for the operator API (/api/*), one for MCP.
// Created on first use and kept owner-only in DATA_DIR. The model token survives a restart (an MCP
// client's configuration holds it); the operator token is new at each `vault serve` start, so a
// console tab or a printed URL from an earlier run is worth nothing to a program that takes the
// freed port. Compared in constant time through their hashes.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { createPrivateFileExclusive, readPrivateJson, writePrivateFileAtomic } from "@latch/shared/files";
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
      operator: freshOperatorToken(),
      model: `lvm_${randomBytes(32).toString("base64url")}`,
    };
    // Exclusive: of two processes starting together, one writes and both read the same file.
    createPrivateFileExclusive(path, `${JSON.stringify(fresh)}\n`);
  }
  return tokensFile.parse(readPrivateJson(path));
}

/**
 * The tokens with a fresh operator token, written before the server listens (the caller holds
 * db.lock): the CLI's commands read the file anew, so they carry the new one. The model token is
 * kept as it was.
 */
export function rotateLocalOperatorToken(dataDir: string): LocalTokens {
  const rotated: LocalTokens = { ...loadOrCreateLocalTokens(dataDir), operator: freshOperatorToken() };
  writePrivateFileAtomic(localTokensPath(dataDir), `${JSON.stringify(rotated)}\n`);
  return rotated;
}

function freshOperatorToken(): string {
  return `lvo_${randomBytes(32).toString("base64url")}`;
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
