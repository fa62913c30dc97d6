import type { Ticket } from "@latch/proto/egress";
import { AppError } from "@latch/shared/errors";
import { describe, expect, it } from "vitest";
import { partOfKind } from "./ticket-kind.ts";

const base: Ticket = {
  id: "t1",
  issuer: "test",
  audience: "latch-egress",
  issuedAtMs: 0,
  expiresAtMs: 1,
  call: undefined,
  resolve: undefined,
  document: undefined,
  push: undefined,
  rewrap: undefined,
  organisationId: "",
};

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe("ticket_invalid");
    return (error as Error).message;
  }
  throw new Error("not refused");
}

describe("a ticket's kind", () => {
  it("gives the one part its RPC reads", () => {
    const rewrap = { values: [] };
    expect(partOfKind({ ...base, rewrap }, "rewrap", "none")).toBe(rewrap);
  });

  it("refuses a ticket without that part, with the RPC's sentence", () => {
    expect(refusal(() => partOfKind(base, "push", "the ticket carries no push message"))).toBe(
      "the ticket carries no push message",
    );
  });

  it("refuses a ticket that carries another kind beside it, whichever", () => {
    const withCall = { ...base, rewrap: { values: [] }, call: {} as NonNullable<Ticket["call"]> };
    expect(refusal(() => partOfKind(withCall, "rewrap", "none"))).toContain("carries a call");
    const withRewrap = { ...base, call: {} as NonNullable<Ticket["call"]>, rewrap: { values: [] } };
    expect(refusal(() => partOfKind(withRewrap, "call", "none"))).toContain("carries a rewrap");
    const withPush = {
      ...base,
      resolve: {} as NonNullable<Ticket["resolve"]>,
      push: {} as NonNullable<Ticket["push"]>,
    };
    expect(refusal(() => partOfKind(withPush, "resolve", "none"))).toContain("carries a push");
  });
});
