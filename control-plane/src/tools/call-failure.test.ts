// The agent's answer when the egress proxy never answered (DECISIONS "Faults and isolation"): an
// error result whose hint and next.for_model say whether the approval was kept, with a retry only
// where retrying cannot send the request twice on the same approval.
import { AppError } from "@latch/shared/errors";
import { describe, expect, it } from "vitest";
import type { HttpRequestArgs } from "../calls/calls.schemas.ts";
import { unansweredCallAnswer } from "./call-failure.ts";

const args: HttpRequestArgs = {
  method: "POST",
  path: "/v1/charges",
  item_name: "STRIPE_KEY",
  body: { amount: 1 },
  dry_run: false,
};
const unavailable = (approval: string, request = "not_sent") =>
  new AppError("egress_unavailable", "the egress proxy is not reachable", { extra: { approval, request } });

describe("the answer to a call whose proxy never answered", () => {
  it("kept: retry in a few seconds with the same arguments", () => {
    const answer = unansweredCallAnswer(unavailable("kept"), args, "grt_1")!;
    expect(answer.isError).toBe(true);
    expect(answer.payload).toMatchObject({
      error: { code: "egress_unavailable", message: "the egress proxy is not reachable" },
      grant_id: "grt_1",
      approval_kept: true,
      approval: "kept",
      next: {
        tool: "http_request",
        arguments: { method: "POST", path: "/v1/charges", item_name: "STRIPE_KEY" },
      },
    });
    expect(answer.payload.hint).toContain("your approval is kept");
    expect((answer.payload.next as { for_model: string }).for_model).toBe(answer.payload.hint);
    expect((answer.payload.next as { arguments: object }).arguments).not.toHaveProperty("dry_run");
  });

  it("spent: may have reached the API, so no ready-made retry", () => {
    const answer = unansweredCallAnswer(unavailable("spent"), args, "grt_1")!;
    expect(answer.payload.approval_kept).toBe(false);
    expect(answer.payload.hint).toContain("may have reached the API");
    expect(answer.payload.next).toEqual({ for_model: answer.payload.hint });
  });

  it("held: given back if the request never left; retry later", () => {
    const answer = unansweredCallAnswer(unavailable("held"), args, "grt_1")!;
    expect(answer.payload.approval_kept).toBe(false);
    expect(answer.payload.hint).toContain("held");
    expect(answer.payload.next).toHaveProperty("tool", "http_request");
  });

  it("lost: not sent, but not given back either; a retry asks the operator again", () => {
    const answer = unansweredCallAnswer(unavailable("lost"), args, "grt_1")!;
    expect(answer.payload).toMatchObject({ approval_kept: false, approval: "lost" });
    expect(answer.payload.hint).toContain("the request was not sent");
    expect(answer.payload.hint).toContain("asks the operator again");
    expect(answer.payload.next).toHaveProperty("tool", "http_request");
  });

  it("kept but may have left (a standing approval, a proxy took the ticket): check first, no ready-made retry", () => {
    for (const request of ["may_have_reached_api", "not_known_yet"]) {
      const answer = unansweredCallAnswer(unavailable("kept", request), args, "grt_1")!;
      expect(answer.payload).toMatchObject({ approval_kept: true, approval: "kept", request });
      expect(answer.payload.hint).not.toContain("was not sent");
      expect(answer.payload.hint).toContain("Do not retry blindly");
      expect(answer.payload.next).toEqual({ for_model: answer.payload.hint });
    }
    const notSent = unansweredCallAnswer(unavailable("kept", "not_sent"), args, "grt_1")!;
    expect(notSent.payload.request).toBe("not_sent");
    expect(notSent.payload.next).toHaveProperty("arguments");
  });

  it("is not this answer for any other failure", () => {
    expect(unansweredCallAnswer(unavailable("toString"), args, "grt_1")).toBeUndefined();
    expect(unansweredCallAnswer(new AppError("invalid_path", "bad"), args, "grt_1")).toBeUndefined();
    expect(unansweredCallAnswer(new Error("boom"), args, "grt_1")).toBeUndefined();
  });
});
