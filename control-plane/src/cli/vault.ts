#!/usr/bin/env node
// `vault`: the local variant's command line (spec 4.4, DECISIONS.md). Each command is a small
// function over a LocalOperator; `serve` and `mcp` keep the vault open.
import { once } from "node:events";
import { homedir } from "node:os";
import { resolve } from "node:path";
import { type ParseArgsOptionsConfig, parseArgs } from "node:util";
import { AppError } from "@latch/shared/errors";
import { logProcessFaults } from "@latch/shared/process";
import pino from "pino";
import { describeGrantBody, describeGrantCall, grantDetail } from "../grants/approval-text.ts";
import { logDestination } from "../http/human-log.ts";
import { serializeLoggedError } from "../http/logging.ts";
import { LOCAL_PORT } from "../local/local-server.ts";
import { runAuditRotateKeys, runAuditVerify, writeLedgerExport } from "./audit-ledger.command.ts";
import { runKekRotate } from "./kek-rotate.command.ts";
import { connectLocalOperator, type LocalOperator } from "./local-operator.ts";
import { runMcpStdio } from "./mcp-stdio.ts";
import { runOAuthRotateKeys } from "./oauth-rotate-keys.command.ts";
import { runPolicyCommand } from "./policy.command.ts";
import { readSecretValue } from "./read-secret.ts";
import { runResetPasskeys } from "./reset-passkeys.command.ts";
import { runSealRewrap } from "./seal-rewrap.command.ts";
import { runServe } from "./serve.ts";

const HELP = `vault: Latch's local credential vault for AI agents

Usage: vault <command> [options]

  serve [--port N]              run the vault on 127.0.0.1:${LOCAL_PORT}: operator API, console, MCP over HTTP
  mcp                           MCP over stdio (for an agent that starts it as a subprocess)
  set NAME --host HOST [--host HOST ...] [--inject MODE] [--username U] [--kind KIND]
                                store or replace a credential; the value comes from standard input
                                or a prompt that does not echo, never from the command line; without
                                --host it is stored but sent nowhere until set again with hosts
  list                          credentials: names, hosts, inject mode, last 4 characters; no values
  rm NAME                       delete a credential and its approvals
  grants [GRANT_ID]             approvals, pending first; with an id, that one in full: the request
                                and the whole body it would send
  approve GRANT_ID [--session]  approve a pending request: one call, or 8 hours with --session
  revoke GRANT_ID               revoke an approval (it stays listed)
  audit [--item NAME] [--limit N]  recent activity; names and hosts, never values
  audit export [--since-seq N] [--output FILE]
                                the tamper-evident ledger as JSON Lines (every row with seq, prev_hash
                                and hash, and signed checkpoints), for vault audit verify
  audit verify FILE [--keys URL|FILE] [--not-before TIME]
                                check a ledger export offline (this vault's or a hosted service's):
                                exit 0 when the chain holds, 1 naming the first bad seq; with --keys
                                (the service's https /.well-known/latch-audit-keys.json, no redirect,
                                or a copy of it) checkpoints too;
                                with --not-before (the time of the newest row you know it holds) a
                                file whose last checkpoint is older is refused (cut back to an
                                earlier checkpoint)
  kek-rotate [--stage | --retire]
                                hosted service: a new key-encryption key, every authenticator secret
                                re-wrapped (reads the same DATA_DIR / DATABASE_URL as npm start;
                                safe to interrupt and rerun). On PostgreSQL in three steps, rolling
                                the control plane with the new kek.json after each: --stage, then
                                no flag (switch and re-wrap), then --retire
  reset-passkeys --email ADDRESS [--even-the-last-factor]
                                hosted service: an operator lost their passkey (every step-up takes
                                it): remove the account's passkeys, end its sessions, audit it and
                                mail them; they sign in with the authenticator app and add a new one.
                                Check who is asking by another way than that account first
  seal-rewrap [--local]         every stored secret sealed again, as an envelope, under the egress
                                proxy's current key (values stored before envelopes, and after the
                                proxy's key file put a new key first); the hosted service's, or with
                                --local this vault's (stop vault serve first); safe to rerun
  oauth-rotate-keys             hosted service: a new OAuth signing key (DATA_DIR/oauth/jwks.json) signs
                                new access tokens; the old one stays listed until its tokens expired;
                                then restart or roll the control plane
  policy get                    the policy rules as JSON ({version, rules}): first match decides, allow
                                sends without an approval, ask as today, deny refuses whatever the grants
  policy set FILE               save a file of rules ({"version": N, "rules": [...]} from policy get,
                                or a bare list); a version that moved on is refused, nothing saved
  policy preview FILE           what a file's rules would have decided for the last 7 days of calls
  audit-rotate-keys [--local]   a new audit checkpoint key (DATA_DIR/audit/signing-keys.json) of the
                                hosted service, or with --local of this vault; old keys stay published

Inject modes: bearer (default), basic (with --username), header:<Name>, query:<param>, cookie:<name>,
sigv4 (AWS; --username is the access key id), hmac:stripe_sig, hmac:slack_sig, hmac:github_sig,
client_credentials (a provider app credential; --username is the client id), refresh (for
<ITEM>_REFRESH: a user refresh token, with the client secret stored as <ITEM>_SECRET or <ITEM>).
Data lives in DATA_DIR (default ~/.latch), owner-only. LOG_LEVEL sets the log level (stderr).
`;

class UsageError extends Error {}

function dataDirOf(env: NodeJS.ProcessEnv): string {
  const raw = env.DATA_DIR?.trim();
  return resolve(raw ? raw.replace(/^~(?=$|\/)/, homedir()) : resolve(homedir(), ".latch"));
}

function progress(line: string): void {
  process.stderr.write(`${line}\n`);
}

function table(rows: string[][]): string {
  if (rows.length === 0) return "";
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length)));
  return `${rows
    .map((r) =>
      r
        .map((c, i) => c.padEnd(widths[i]!))
        .join("  ")
        .trimEnd(),
    )
    .join("\n")}\n`;
}

async function withOperator<T>(
  dataDir: string,
  logger: pino.Logger,
  run: (op: LocalOperator) => Promise<T>,
): Promise<T> {
  const operator = await connectLocalOperator(dataDir, logger, progress);
  try {
    return await run(operator);
  } finally {
    await operator.close();
  }
}

async function main(argv: string[]): Promise<number> {
  process.umask(0o077);
  const [command, ...rest] = argv;
  if (!command || command === "help" || command === "--help" || command === "-h") {
    process.stdout.write(HELP);
    return command ? 0 : 2;
  }
  const dataDir = dataDirOf(process.env);
  // The proxy child inherits the level: quiet for one-shot commands, informative for servers.
  process.env.LOG_LEVEL ??= command === "serve" || command === "mcp" ? "info" : "warn";
  const logger = pino(
    // As the request logger: a raw database error (which quotes parameters) is never written whole.
    { name: "vault", level: process.env.LOG_LEVEL, serializers: { err: serializeLoggedError } },
    logDestination(2),
  );
  logProcessFaults(logger);
  if (rest.includes("--help") || rest.includes("-h")) {
    process.stdout.write(HELP);
    return 0;
  }
  const parse = <O extends ParseArgsOptionsConfig>(options: O) =>
    parseArgs({ args: rest, options, allowPositionals: true, strict: true });

  switch (command) {
    case "serve": {
      const { values } = parse({ port: { type: "string" } });
      const port = values.port === undefined ? LOCAL_PORT : Number(values.port);
      if (!Number.isInteger(port) || port < 0 || port > 65535)
        throw new UsageError("--port takes a port number");
      await runServe(dataDir, port, logger);
      return -1;
    }
    case "mcp":
      parse({});
      await runMcpStdio(dataDir, logger);
      return 0;
    case "set": {
      const { values, positionals } = parse({
        host: { type: "string", multiple: true },
        inject: { type: "string" },
        username: { type: "string" },
        kind: { type: "string" },
        value: { type: "string" },
      });
      if (values.value !== undefined || positionals.length > 1) {
        throw new UsageError(
          "vault set never takes the value on the command line (it would stay in shell history and the process list); pipe it in or type it at the prompt",
        );
      }
      const name = positionals[0];
      if (!name) throw new UsageError("usage: vault set NAME --host HOST [--inject MODE] [--username U]");
      // Hosts are optional, as on POST /api/secrets (spec 4.4): such a credential is refused at
      // call time, naming this command, until it is set again with --host.
      const hosts = (values.host as string[] | undefined) ?? [];
      const value = await readSecretValue(`Value for ${name} (input hidden): `);
      const item = await withOperator(dataDir, logger, (op) =>
        op.storeItem({
          name,
          value,
          allowed_hosts: hosts,
          inject: values.inject as string | undefined,
          username: values.username as string | undefined,
          kind: values.kind as string | undefined,
        }),
      );
      const stored = `inject ${item.inject}${item.last4 ? `, ends in ${item.last4}` : ""}`;
      process.stdout.write(
        item.allowed_hosts.length > 0
          ? `Stored ${item.name} for ${item.allowed_hosts.join(", ")} (${stored}).\n`
          : `Stored ${item.name} with no allowed host (${stored}): agents cannot use it until you run vault set ${item.name} --host HOST.\n`,
      );
      return 0;
    }
    case "list": {
      parse({});
      const items = await withOperator(dataDir, logger, (op) => op.listItems());
      if (items.length === 0) {
        process.stdout.write("No credentials stored. Add one with: vault set NAME --host HOST\n");
        return 0;
      }
      process.stdout.write(
        table([
          ["NAME", "HOSTS", "INJECT", "USERNAME", "LAST4"],
          ...items.map((i) => [
            i.name,
            i.allowed_hosts.join(",") || "(none)",
            i.inject,
            i.username ?? "",
            i.last4,
          ]),
        ]),
      );
      return 0;
    }
    case "rm": {
      const { positionals } = parse({});
      const name = positionals[0];
      if (!name || positionals.length > 1) throw new UsageError("usage: vault rm NAME");
      await withOperator(dataDir, logger, (op) => op.deleteItem(name));
      process.stdout.write(`Deleted ${name} and its approvals.\n`);
      return 0;
    }
    case "grants": {
      const { positionals } = parse({});
      if (positionals.length > 1) throw new UsageError("usage: vault grants [GRANT_ID]");
      const id = positionals[0];
      if (id !== undefined) {
        const grant = await withOperator(dataDir, logger, (op) => op.findGrant(id));
        process.stdout.write(grantDetail(grant));
        return 0;
      }
      const grants = await withOperator(dataDir, logger, (op) => op.listGrants());
      const order = ["pending", "active"];
      grants.sort((a, b) => (order.indexOf(a.status) + 1 || 9) - (order.indexOf(b.status) + 1 || 9));
      process.stdout.write(
        grants.length === 0
          ? "No approvals yet.\n"
          : table([
              ["GRANT", "STATUS", "POLICY", "CREDENTIAL", "AGENT", "REQUEST", "BODY", "EXPIRES"],
              // The exact request an approval covers (DECISIONS "Approvals"), so the operator
              // approves what will be sent.
              ...grants.map((g) => [
                g.grant_id,
                g.status,
                g.policy,
                g.item_name,
                g.agent_id,
                describeGrantCall(g),
                describeGrantBody(g),
                g.expires_at ?? "",
              ]),
            ]),
      );
      return 0;
    }
    case "approve": {
      const { values, positionals } = parse({ session: { type: "boolean" } });
      const id = positionals[0];
      if (!id || positionals.length > 1) throw new UsageError("usage: vault approve GRANT_ID [--session]");
      const grant = await withOperator(dataDir, logger, (op) =>
        op.approveGrant(id, values.session ? "session" : "once"),
      );
      process.stdout.write(
        `Approved ${grant.grant_id}: ${grant.agent_id} may use ${grant.item_name} ${grant.policy === "session" ? `until ${grant.expires_at}` : "for one call"}${grant.call ? `: ${describeGrantCall(grant)} (${describeGrantBody(grant)})${grant.policy === "session" ? " and calls under its path" : ""}` : ""}.\n`,
      );
      return 0;
    }
    case "revoke": {
      const { positionals } = parse({});
      const id = positionals[0];
      if (!id || positionals.length > 1) throw new UsageError("usage: vault revoke GRANT_ID");
      const grant = await withOperator(dataDir, logger, (op) => op.revokeGrant(id));
      process.stdout.write(`Revoked ${grant.grant_id}.\n`);
      return 0;
    }
    case "audit": {
      if (rest[0] === "verify") {
        const { values, positionals } = parse({ keys: { type: "string" }, "not-before": { type: "string" } });
        const file = positionals[1];
        if (!file || positionals.length > 2)
          throw new UsageError("usage: vault audit verify FILE [--keys URL|FILE] [--not-before TIME]");
        const notBefore = values["not-before"] as string | undefined;
        if (notBefore !== undefined && !isRfc3339(notBefore))
          throw new UsageError("--not-before: give a time as RFC 3339, e.g. 2026-11-27T09:00:00Z");
        return runAuditVerify(
          file,
          values.keys as string | undefined,
          (line) => process.stdout.write(`${line}\n`),
          notBefore === undefined ? {} : { notBefore: new Date(notBefore) },
        );
      }
      if (rest[0] === "export") {
        const { values, positionals } = parse({
          "since-seq": { type: "string" },
          output: { type: "string" },
        });
        if (positionals.length > 1)
          throw new UsageError("usage: vault audit export [--since-seq N] [--output FILE]");
        const sinceSeq = values["since-seq"] === undefined ? 0 : Number(values["since-seq"]);
        if (!Number.isSafeInteger(sinceSeq) || sinceSeq < 0)
          throw new UsageError("--since-seq takes a seq (0 or more)");
        const output = values.output as string | undefined;
        await withOperator(dataDir, logger, async (op) => {
          if (output) return writeLedgerExport(output, op.exportLedger(sinceSeq));
          for await (const text of op.exportLedger(sinceSeq)) {
            if (!process.stdout.write(text)) await once(process.stdout, "drain");
          }
        });
        if (output) progress(`wrote ${output}; check it with: vault audit verify ${output}`);
        return 0;
      }
      const { values } = parse({ item: { type: "string" }, limit: { type: "string" } });
      const limit = values.limit === undefined ? 50 : Number(values.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 200)
        throw new UsageError("--limit takes 1 to 200");
      const events = await withOperator(dataDir, logger, (op) =>
        op.listAudit({ itemName: values.item as string | undefined, limit }),
      );
      process.stdout.write(
        table([
          ["WHEN", "WHO", "ACTION", "CREDENTIAL", "HOST", "REASON"],
          ...events.map((e) => [e.at, e.actor, e.action, e.item_name ?? "", e.host ?? "", e.reason ?? ""]),
        ]),
      );
      return 0;
    }
    case "policy": {
      const { positionals } = parse({});
      const [action, file, ...extra] = positionals;
      const usage = "usage: vault policy get | vault policy set FILE | vault policy preview FILE";
      if (!["get", "set", "preview"].includes(action ?? "") || extra.length > 0) throw new UsageError(usage);
      if (action !== "get" && !file) throw new UsageError(usage);
      if (action === "get" && file) throw new UsageError(usage);
      return withOperator(dataDir, logger, (op) =>
        runPolicyCommand(op, action, file, {
          stdout: (text) => process.stdout.write(text),
          stderr: (text) => process.stderr.write(text),
        }),
      );
    }
    case "kek-rotate": {
      const { values } = parse({ stage: { type: "boolean" }, retire: { type: "boolean" } });
      if (values.stage && values.retire) throw new UsageError("usage: vault kek-rotate [--stage | --retire]");
      return runKekRotate(
        process.env,
        progress,
        values.stage ? "stage" : values.retire ? "retire" : "rotate",
      );
    }
    case "reset-passkeys": {
      const { values, positionals } = parse({
        email: { type: "string" },
        "even-the-last-factor": { type: "boolean" },
      });
      if (!values.email || positionals.length > 0) {
        throw new UsageError("usage: vault reset-passkeys --email ADDRESS [--even-the-last-factor]");
      }
      return runResetPasskeys(
        process.env,
        { email: values.email, isLastFactorAllowed: values["even-the-last-factor"] === true },
        logger,
        progress,
      );
    }
    case "seal-rewrap": {
      const { values } = parse({ local: { type: "boolean" } });
      return runSealRewrap(process.env, values.local ? dataDir : undefined, logger, progress);
    }
    case "oauth-rotate-keys":
      parse({});
      return runOAuthRotateKeys(process.env, progress);
    case "audit-rotate-keys": {
      const { values } = parse({ local: { type: "boolean" } });
      return runAuditRotateKeys(process.env, values.local ? dataDir : undefined, progress);
    }
    default:
      throw new UsageError(`unknown command ${JSON.stringify(command.slice(0, 40))}; see vault --help`);
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (error: unknown) => {
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")) {
      process.stderr.write(`vault: ${(error as Error).message}\n`);
      process.exitCode = 2;
      return;
    }
    const message = error instanceof AppError || error instanceof Error ? error.message : String(error);
    process.stderr.write(`vault: ${message}\n`);
    process.exitCode = 1;
  },
);

/** An RFC 3339 date-time with its offset (Z or ±hh:mm), e.g. 2026-11-27T09:00:00Z. */
function isRfc3339(text: string): boolean {
  return (
    /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i.test(text) &&
    !Number.isNaN(Date.parse(text))
  );
}
