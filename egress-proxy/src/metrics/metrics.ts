// Counters the proxy exposes in Prometheus text format: calls by outcome, refusals by reason,
// tickets refused by reason and fences by outcome.
export interface Metrics {
  countCall(outcome: string): void;
  countDenial(reason: string): void;
  /** A ticket refused before or at its claim (signature, expiry, replayed or fenced, ...). */
  countTicketRefusal(reason: string): void;
  /** A Fence asked by the control plane: fenced, taken or unknown. */
  countFence(outcome: string): void;
  render(): string;
}

export function createMetrics(): Metrics {
  const calls = new Map<string, number>();
  const denials = new Map<string, number>();
  const ticketRefusals = new Map<string, number>();
  const fences = new Map<string, number>();
  const bump = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);
  const lines = (name: string, help: string, label: string, map: Map<string, number>) => [
    `# HELP ${name} ${help}`,
    `# TYPE ${name} counter`,
    ...[...map].map(([key, value]) => `${name}{${label}="${key}"} ${value}`),
  ];
  return {
    countCall: (outcome) => bump(calls, outcome),
    countDenial: (reason) => bump(denials, reason),
    countTicketRefusal: (reason) => bump(ticketRefusals, reason),
    countFence: (outcome) => bump(fences, outcome),
    render: () =>
      [
        ...lines("latch_egress_calls_total", "Execute calls by outcome.", "outcome", calls),
        ...lines("latch_egress_denials_total", "Refused calls by reason code.", "reason", denials),
        ...lines(
          "latch_egress_ticket_refusals_total",
          "Tickets refused by reason code (a fenced or replayed ticket is ticket_replayed).",
          "reason",
          ticketRefusals,
        ),
        ...lines(
          "latch_egress_fences_total",
          "Fences the control plane asked for, by outcome (fenced, taken, unknown).",
          "outcome",
          fences,
        ),
        "",
      ].join("\n"),
  };
}
