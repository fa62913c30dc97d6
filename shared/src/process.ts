// What the egress proxy and the control plane that spawns it (npm start, vault serve) agree on
// about the child process, and the last-resort handlers each process installs for its own faults.

/** Set in the spawned proxy's environment: its parent reports a refused start in its own words. */
export const SPAWNED_BY_CONTROL_PLANE = "LATCH_EGRESS_SPAWNED";

/** The proxy's exit code when its listen address is taken. */
export const EXIT_ADDRESS_IN_USE = 3;

/** The proxy's exit code when it refused its settings, after saying why in one sentence. */
export const EXIT_START_REFUSED = 4;

/** What a process logs its own faults with: pino's two levels, by shape. */
export interface FaultLog {
  error(fields: { err: unknown }, message: string): void;
  fatal(fields: { err: unknown }, message: string): void;
}

/**
 * Installs the process's last-resort handlers, each logging through `log` (so its error serializer
 * decides what is written: never a raw database error, whose text quotes values).
 * - A promise that failed with nobody waiting for it is logged at error, and the process goes on:
 *   Node's default ends the process, so one request reaching such a path would stop every other
 *   caller's calls with it.
 * - An exception nobody caught leaves the process in a state nobody knows: logged at fatal, then
 *   `beforeExit` (to write what a logger holds) and exit 1.
 *
 * @example logProcessFaults(logger, () => flush());
 */
export function logProcessFaults(log: FaultLog, beforeExit: () => void = () => undefined): void {
  process.on("unhandledRejection", (reason) => {
    log.error({ err: reason }, "a promise failed with nothing waiting for it; the process goes on");
  });
  process.on("uncaughtException", (error) => {
    log.fatal({ err: error }, "an exception was not caught; the process stops");
    beforeExit();
    process.exit(1);
  });
}
