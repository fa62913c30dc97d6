// The decision over one DNS answer: classify every address, refuse the whole answer if one is
// refused, else pick the address to dial. Pure, so the policy is tested without DNS.
import { type AddressVerdict, type Cidr, classifyAddress, type DeniedVerdict } from "./classify.ts";

/** The addresses one lookup returned, per family, in the resolver's order. */
export interface DnsAnswer {
  v4: readonly string[];
  v6: readonly string[];
}

export type DestinationDecision =
  | { allowed: true; address: string; family: 4 | 6; verdicts: AddressVerdict[] }
  | { allowed: false; refused: DeniedVerdict; verdicts: AddressVerdict[] };

/**
 * Classifies every answer, then decides:
 * - one refused address refuses the whole answer (the first refusal is named), because an
 *   attacker who controls DNS returns one public and one private address and hopes the dialer
 *   picks the private one;
 * - otherwise the first IPv4 answer, else the first IPv6 one (IPv4 first: the path most origins
 *   serve and test).
 * An empty answer decides nothing: the resolver reports it as `dns_no_address` before this runs.
 *
 * @example decideDestination({ v4: ["93.184.216.34", "10.0.0.1"], v6: [] }, [])
 *   // { allowed: false, refused: { reason: "private_range", address: "10.0.0.1", ... }, verdicts: [...] }
 */
export function decideDestination(answer: DnsAnswer, allowCidrs: readonly Cidr[]): DestinationDecision {
  const v4 = answer.v4.map((address) => classifyAddress(address, allowCidrs));
  const v6 = answer.v6.map((address) => classifyAddress(address, allowCidrs));
  const verdicts = [...v4, ...v6];
  const refused = verdicts.find((verdict): verdict is DeniedVerdict => !verdict.allowed);
  if (refused) return { allowed: false, refused, verdicts };
  const [first4] = v4;
  if (first4) return { allowed: true, address: first4.address, family: 4, verdicts };
  const [first6] = v6;
  if (first6) return { allowed: true, address: first6.address, family: 6, verdicts };
  return {
    allowed: false,
    refused: { allowed: false, reason: "reserved_range", address: "", range: "an empty DNS answer" },
    verdicts,
  };
}
