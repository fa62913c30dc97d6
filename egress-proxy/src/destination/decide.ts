// The decision over one DNS answer: classify every address, refuse the whole answer if one is
// refused, else pick the address to dial. Pure, so the policy is tested without DNS.
import { type Cidr, classifyAddress, type DeniedVerdict } from "./classify.ts";

/** The addresses one lookup returned, per family, in the resolver's order. */
export interface DnsAnswer {
  v4: readonly string[];
  v6: readonly string[];
}

/**
 * What a later call needs of the decision, and nothing more: the resolver keeps up to a thousand
 * of them, so a decision holds no verdict per address (an answer may list 64 of them).
 */
export type DestinationDecision =
  | { allowed: true; address: string; family: 4 | 6 }
  | { allowed: false; refused: DeniedVerdict };

/**
 * Classifies the answers in order, IPv4 first, then decides:
 * - one refused address refuses the whole answer (the first refusal is named), because an
 *   attacker who controls DNS returns one public and one private address and hopes the dialer
 *   picks the private one;
 * - otherwise the first IPv4 answer, else the first IPv6 one (IPv4 first: the path most origins
 *   serve and test).
 * An empty answer decides nothing: the resolver reports it as `dns_no_address` before this runs.
 *
 * @example decideDestination({ v4: ["93.184.216.34", "10.0.0.1"], v6: [] }, [])
 *   // { allowed: false, refused: { reason: "private_range", address: "10.0.0.1", ... } }
 */
export function decideDestination(answer: DnsAnswer, allowCidrs: readonly Cidr[]): DestinationDecision {
  // The first refusal decides, so the addresses after it are not classified.
  for (const address of answer.v4) {
    const verdict = classifyAddress(address, allowCidrs);
    if (!verdict.allowed) return { allowed: false, refused: verdict };
  }
  for (const address of answer.v6) {
    const verdict = classifyAddress(address, allowCidrs);
    if (!verdict.allowed) return { allowed: false, refused: verdict };
  }
  const [first4] = answer.v4;
  if (first4 !== undefined) return { allowed: true, address: first4, family: 4 };
  const [first6] = answer.v6;
  if (first6 !== undefined) return { allowed: true, address: first6, family: 6 };
  return {
    allowed: false,
    refused: { allowed: false, reason: "reserved_range", address: "", range: "an empty DNS answer" },
  };
}
