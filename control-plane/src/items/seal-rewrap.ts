// `vault seal-rewrap`: every stored secret sealed again under the egress proxy's current key, as an
// envelope (ARCHITECTURE.md "Keys"). The control plane opens nothing: it hands the proxy a rewrap
// ticket of sealed values and stores the sealed values it answers, each by a conditional UPDATE
// (a value written since is kept). Safe to interrupt and run again: it only ever picks values not
// yet an envelope under the current key. Values written since envelopes exist are envelopes
// already; this is for values stored before, and after a rotation of the proxy's key.
import type { SealingPublicKey } from "@latch/shared/crypto/seal";
import type { EgressClient } from "../egress/egress-client.ts";
import type { TicketMinter } from "../egress/tickets.ts";
import { SEALED_TABLES, type SealedValuesRepo } from "./sealed-values.repo.ts";

/** Values read at a time, and at most per ticket (the proxy takes at most 500). */
const BATCH = 100;
/**
 * Sealed bytes per ticket at most: the proxy refuses a ticket over 2 MiB (verify.ts), and 100
 * values of up to 32 KiB (more once UTF-8 encoded) would pass it, refused on the same first rows at
 * every run. One value always goes, however large: a ticket is never empty.
 */
export const MAX_TICKET_SEALED_BYTES = 1024 * 1024;

/** Consecutive runs of `rows`, each under `maxBytes` of sealed values (or one value alone). */
export function splitBySealedBytes<T extends { sealedValue: Uint8Array }>(
  rows: T[],
  maxBytes: number,
): T[][] {
  const batches: T[][] = [];
  let batch: T[] = [];
  let bytes = 0;
  for (const row of rows) {
    if (batch.length > 0 && bytes + row.sealedValue.length > maxBytes) {
      batches.push(batch);
      batch = [];
      bytes = 0;
    }
    batch.push(row);
    bytes += row.sealedValue.length;
  }
  if (batch.length > 0) batches.push(batch);
  return batches;
}

export interface RewrapReport {
  keyId: string;
  /** Sealed again and stored. */
  rewrapped: number;
  /** Written by someone else meanwhile: left as they are (already sealed to the current key). */
  changedMeanwhile: number;
  /** The proxy could not open them (a key it no longer holds, a damaged value): left, reported. */
  unopened: number;
  /**
   * Counted again once the run is over: values still under an older key, the unopened ones and
   * those written during the run by a control plane or proxy that had not yet read the new key.
   * Zero is the all-clear to take the old keys out of the file.
   */
  left: number;
}

export async function rewrapSealedValues(deps: {
  repo: SealedValuesRepo;
  sealingKey(): Promise<SealingPublicKey>;
  minter: Pick<TicketMinter, "mintRewrapTicket">;
  egress: Pick<EgressClient, "rewrap">;
  progress(line: string): void;
}): Promise<RewrapReport> {
  const current = await deps.sealingKey();
  const report: RewrapReport = {
    keyId: current.keyId,
    rewrapped: 0,
    changedMeanwhile: 0,
    unopened: 0,
    left: 0,
  };
  for (const table of SEALED_TABLES) {
    const total = await deps.repo.countToRewrap(table, current.keyId);
    if (total === 0) continue;
    deps.progress(`${table}: ${total} value(s) to seal again under ${current.keyId}`);
    let after = "";
    let done = 0;
    for (;;) {
      const page = await deps.repo.findToRewrap(table, current.keyId, after, BATCH);
      if (page.length === 0) break;
      for (const rows of splitBySealedBytes(page, MAX_TICKET_SEALED_BYTES)) {
        const answer = await deps.egress.rewrap(
          deps.minter.mintRewrapTicket({
            values: rows.map((row) => ({
              itemName: row.name,
              keyId: row.keyId,
              sealedValue: Buffer.from(row.sealedValue),
              username: "",
            })),
          }),
        );
        if (answer.values.length !== rows.length) {
          throw new Error(`the egress proxy answered ${answer.values.length} values for ${rows.length}`);
        }
        for (const [i, row] of rows.entries()) {
          const value = answer.values[i]!;
          if (value.errorCode) {
            report.unopened++;
            deps.progress(
              `${table}: ${row.name} could not be opened by the proxy (${value.errorCode}); left as it is`,
            );
            continue;
          }
          if (value.keyId !== current.keyId) {
            // The proxy's key moved during the run: stop; a new run starts from the new key.
            throw new Error(
              `the egress proxy's sealing key changed during the run (${value.keyId}); run it again`,
            );
          }
          const isStored = await deps.repo.updateRewrapped(table, row.id, row.sealedValue, {
            keyId: value.keyId,
            sealedValue: value.sealedValue,
          });
          if (isStored) report.rewrapped++;
          else report.changedMeanwhile++;
        }
        done += rows.length;
      }
      after = page.at(-1)!.id;
      deps.progress(`${table}: ${done} of ${total}`);
    }
  }
  for (const table of SEALED_TABLES) report.left += await deps.repo.countToRewrap(table, current.keyId);
  return report;
}
