// The operator's inbox at the edge: the approvals waiting and the requests for credentials.
import { z } from "zod";
import { pendingApproval } from "../grants/grants.schemas.ts";
import { needView } from "../needs/needs.schemas.ts";

export const inboxAnswer = z.object({ approvals: z.array(pendingApproval), requests: z.array(needView) });
