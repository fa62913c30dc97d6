// Rewrap's ticket rules: a signed rewrap ticket, at most 500 values, refused before it is spent.
import type { Ticket } from "@latch/proto/egress";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { createRewrap, MAX_REWRAP_VALUES } from "./rewrap.ts";

function rewrapWith(ticket: Partial<Ticket>) {
  const spent: string[] = [];
  const rewrap = createRewrap({
    checkTicket: async () => ({ id: "t".repeat(22), ...ticket }) as Ticket,
    spendTicket: async (t) => {
      spent.push(t.id);
    },
    keyring: {
      rewrap: (keyId, sealed) => {
        if (keyId === "sk_gone") throw Object.assign(new Error("x"), { code: "credential_unavailable" });
        return { keyId: "sk_now", sealed: Uint8Array.from([...sealed, 1]) };
      },
    },
    logger: pino({ level: "silent" }),
  });
  return { rewrap, spent };
}

const value = (keyId: string) => ({ itemName: "X", keyId, sealedValue: Buffer.from([7]), username: "" });

describe("Rewrap", () => {
  it("answers each value sealed again in its place, and a value that does not open by its code", async () => {
    const { rewrap, spent } = rewrapWith({ rewrap: { values: [value("sk_old"), value("sk_gone")] } });
    const answer = await rewrap(undefined);
    expect(answer.values[0]).toMatchObject({ keyId: "sk_now", errorCode: "" });
    expect([...answer.values[0]!.sealedValue]).toEqual([7, 1]);
    expect(answer.values[1]).toMatchObject({ keyId: "", errorCode: "internal" });
    expect(spent).toHaveLength(1);
  });

  it("refuses a ticket without a rewrap request, or with too many values, spending nothing", async () => {
    for (const ticket of [
      {},
      { rewrap: { values: Array.from({ length: MAX_REWRAP_VALUES + 1 }, () => value("k")) } },
    ]) {
      const { rewrap, spent } = rewrapWith(ticket);
      await expect(rewrap(undefined)).rejects.toMatchObject({ code: "ticket_invalid" });
      expect(spent).toEqual([]);
    }
  });
});
