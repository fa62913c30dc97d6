// Counters the proxy exposes in Prometheus text format: calls by outcome, refusals by reason.
export interface Metrics {
  countCall(outcome: string): void;
  countDenial(reason: string): void;
  render(): string;
}

export function createMetrics(): Metrics {
  const calls = new Map<string, number>();
  const denials = new Map<string, number>();
  const bump = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);
  const lines = (name: string, help: string, label: string, map: Map<string, number>) => [
    `# HELP ${name} ${help}`,
    `# TYPE ${name} counter`,
    ...[...map].map(([key, value]) => `${name}{${label}="${key}"} ${value}`),
  ];
  return {
    countCall: (outcome) => bump(calls, outcome),
    countDenial: (reason) => bump(denials, reason),
    render: () =>
      [
        ...lines("latch_egress_calls_total", "Execute calls by outcome.", "outcome", calls),
        ...lines("latch_egress_denials_total", "Refused calls by reason code.", "reason", denials),
        "",
      ].join("\n"),
  };
}
