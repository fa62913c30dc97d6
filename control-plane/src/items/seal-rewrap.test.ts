// How `vault seal-rewrap` cuts its tickets: by count and by sealed bytes, so no ticket reaches the
// proxy's 2 MiB cap, and a value larger than the bound still goes, alone.
import { describe, expect, it } from "vitest";
import { MAX_TICKET_SEALED_BYTES, splitBySealedBytes } from "./seal-rewrap.ts";

const row = (name: string, bytes: number) => ({ name, sealedValue: new Uint8Array(bytes) });

describe("rewrap tickets bounded by sealed bytes", () => {
  it("cuts a page of large values into tickets under the bound, in order, losing none", () => {
    const page = Array.from({ length: 100 }, (_, i) => row(`V${i}`, 33_000));
    const batches = splitBySealedBytes(page, MAX_TICKET_SEALED_BYTES);
    expect(batches.length).toBe(4);
    for (const batch of batches) {
      expect(batch.reduce((sum, r) => sum + r.sealedValue.length, 0)).toBeLessThanOrEqual(
        MAX_TICKET_SEALED_BYTES,
      );
    }
    expect(batches.flat()).toEqual(page);
  });

  it("keeps small values in one ticket, and sends a value over the bound alone", () => {
    const small = Array.from({ length: 100 }, (_, i) => row(`S${i}`, 100));
    expect(splitBySealedBytes(small, MAX_TICKET_SEALED_BYTES)).toEqual([small]);
    const huge = row("HUGE", MAX_TICKET_SEALED_BYTES + 1);
    expect(splitBySealedBytes([small[0]!, huge, small[1]!], MAX_TICKET_SEALED_BYTES)).toEqual([
      [small[0]],
      [huge],
      [small[1]],
    ]);
    expect(splitBySealedBytes([], MAX_TICKET_SEALED_BYTES)).toEqual([]);
  });
});
