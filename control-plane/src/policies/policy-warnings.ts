// What a saved list trusts that its author may not have meant (DECISIONS "Policies": `agents` are
// client names or ids). An allow rule naming an agent by name allows whoever carries that name:
// hosted, a client names itself when it registers, so any client admitted later under the same
// name is allowed too; locally, every agent shares the model token and names itself at MCP
// initialize. Said when the list is saved (PUT /api/policies answers it, `vault policy set` prints it).
import { isClientIdShaped } from "./policy-match.ts";
import type { PolicyRule } from "./policy-rules.ts";

export type PolicyVariant = "hosted" | "local";

export function policyWarnings(rules: readonly PolicyRule[], variant: PolicyVariant): string[] {
  const warnings: string[] = [];
  for (const rule of rules) {
    if (!rule.enabled || rule.effect !== "allow" || !rule.match.agents) continue;
    const names =
      variant === "hosted" ? rule.match.agents.filter((a) => !isClientIdShaped(a)) : rule.match.agents;
    if (names.length === 0) continue;
    const named = names.map((name) => JSON.stringify(name)).join(", ");
    warnings.push(
      variant === "hosted"
        ? `rule ${rule.id} allows by agent name (${named}): a client chooses its name when it registers, so any client admitted later under that name is allowed too; write the client's id (cli_…, on the Clients page) to trust that one client`
        : `rule ${rule.id} allows by agent name (${named}): locally an agent is the name its MCP client gives itself, so any program holding the model token can use that name`,
    );
  }
  return warnings;
}
