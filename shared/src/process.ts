// What the egress proxy and the control plane that spawns it (npm start, vault serve) agree on
// about the child process.

/** Set in the spawned proxy's environment: its parent reports a refused start in its own words. */
export const SPAWNED_BY_CONTROL_PLANE = "LATCH_EGRESS_SPAWNED";

/** The proxy's exit code when its listen address is taken. */
export const EXIT_ADDRESS_IN_USE = 3;

/** The proxy's exit code when it refused its settings, after saying why in one sentence. */
export const EXIT_START_REFUSED = 4;
