// Spreading calls over every proxy replica: grpc-js `round_robin` under a thin policy of ours that
// takes a replica out of the rotation while its grpc.health.v1 Check is not SERVING, or goes
// unanswered twice in a row (a stalled process, a silent link: no reset ever comes), grpc-js having
// no client-side health checking of its own; that asks the DNS resolver again every few seconds,
// so a replica added behind the service name starts getting calls without any connection
// dropping; and that reports each replica's state (serving, not serving, unreachable) to a watcher
// for the log and the `latch_egress_replicas` gauge (DECISIONS "Faults and isolation").
import { type ChannelOptions, connectivityState, experimental, status } from "@grpc/grpc-js";

/**
 * The trailer a proxy sets when it refused a call before reading its ticket (it is draining):
 * nothing was spent and nothing left, so the same ticket may go to another replica once.
 */
export const NOT_STARTED_TRAILER = "latch-call-not-started";

/**
 * Asks one replica (by its resolved `ip:port`) whether it serves: `serving`, `not_serving` (it
 * answered so: draining), or `silent` (no answer within the probe's deadline, or an error).
 */
export type ReplicaProbe = (address: string) => Promise<"serving" | "not_serving" | "silent">;

/** Where a replica stands for the balancer; only `serving` ones take calls. */
export type ReplicaState = "serving" | "not_serving" | "unreachable";

/** Told of every replica's state as it changes, and when the replica is gone from the answer. */
export interface ReplicaWatcher {
  onState(address: string, state: ReplicaState, reason: string): void;
  onGone(address: string): void;
}

/** What the channel option carries to the policy. */
export interface ReplicaSupervision {
  probe: ReplicaProbe;
  watcher?: ReplicaWatcher;
}

export const HEALTH_ROUND_ROBIN = "latch_health_round_robin";
/**
 * The channel option carrying the probe and the watcher (a ReplicaSupervision). Its prefix keeps it off the subchannels (grpc-js strips
 * `grpc.internal.no_subchannel*` before creating one), so replicas are still shared by address.
 */
export const PROBE_OPTION = "grpc.internal.no_subchannel.latch_replica_probe";
/** How often a connected replica is asked; a drained one leaves the rotation within this. */
const PROBE_INTERVAL_MS = 1_000;
/**
 * Unanswered probes in a row before a connected replica leaves the rotation: two, so that one
 * slow answer on a loaded host does not empty the rotation, and a stalled replica is still out
 * within 2 × (interval + deadline) < 5 s (DECISIONS "Faults and isolation").
 */
const SILENT_PROBES_TO_EJECT = 2;
/** How often the service name is resolved again (grpc-js only re-resolves when a connection drops). */
const RERESOLVE_INTERVAL_MS = 2_000;

class HealthRoundRobinConfig implements experimental.TypedLoadBalancingConfig {
  getLoadBalancerName(): string {
    return HEALTH_ROUND_ROBIN;
  }
  toJsonObject(): object {
    return { [HEALTH_ROUND_ROBIN]: {} };
  }
  static createFromJson(): HealthRoundRobinConfig {
    return new HealthRoundRobinConfig();
  }
}

/**
 * One replica (one resolved address) as the rotation sees it, kept by the policy across name
 * resolutions: grpc-js' round_robin rebuilds its children, and so our subchannel wrappers, on
 * every resolution (every 2 s here), and a verdict kept on a wrapper would be forgotten, putting a
 * stalled replica back into the rotation each time. The probe runs here, once per address.
 */
class ReplicaTracker {
  private readonly wrappers = new Set<ProbedSubchannel>();
  private timer: NodeJS.Timeout | undefined;
  private goneTimer: NodeJS.Timeout | undefined;
  private isProbing = false;
  private silentProbes = 0;
  private isReady = false;
  isServing = true;
  private reported: ReplicaState | undefined;

  private readonly address: string;
  private readonly supervision: () => ReplicaSupervision | undefined;
  private readonly onGone: () => void;

  constructor(address: string, supervision: () => ReplicaSupervision | undefined, onGone: () => void) {
    this.address = address;
    this.supervision = supervision;
    this.onGone = onGone;
  }

  attach(wrapper: ProbedSubchannel, state: connectivityState): void {
    clearTimeout(this.goneTimer);
    this.goneTimer = undefined;
    this.wrappers.add(wrapper);
    this.onConnectivity(state);
  }

  /** The wrapper let go; the replica is gone once no new wrapper took it up (resolutions swap them). */
  detach(wrapper: ProbedSubchannel): void {
    this.wrappers.delete(wrapper);
    if (this.wrappers.size > 0 || this.goneTimer) return;
    this.goneTimer = setTimeout(() => {
      if (this.wrappers.size > 0) return;
      this.stopProbing();
      this.onGone();
      this.supervision()?.watcher?.onGone(this.address);
    }, 1_000);
    this.goneTimer.unref();
  }

  onConnectivity(state: connectivityState): void {
    const isReady = state === connectivityState.READY;
    if (isReady === this.isReady) return;
    this.isReady = isReady;
    if (isReady) {
      this.startProbing();
    } else {
      this.stopProbing();
      // A reconnected replica starts healthy; its next Check decides.
      this.silentProbes = 0;
      this.setServing(true, "connection lost");
    }
    this.report(isReady ? "connected" : "connection lost");
  }

  /** The replica refused a call unread (it is draining): out of the rotation until a Check says SERVING. */
  markRefusing(): void {
    this.setServing(false, "refused a call: draining");
  }

  private setServing(isServing: boolean, reason: string): void {
    this.isServing = isServing;
    for (const wrapper of this.wrappers) wrapper.markServing(isServing);
    this.report(reason);
  }

  /** The state as the rotation sees it; the watcher hears each change once. */
  private report(reason: string): void {
    const state: ReplicaState = !this.isReady ? "unreachable" : this.isServing ? "serving" : "not_serving";
    if (state === this.reported) return;
    this.reported = state;
    this.supervision()?.watcher?.onState(this.address, state, reason);
  }

  private startProbing(): void {
    if (this.timer) return;
    const run = () => {
      const probe = this.supervision()?.probe;
      if (!probe || this.isProbing) return;
      this.isProbing = true;
      probe(this.address)
        .then((answer) => {
          if (!this.isReady) return;
          if (answer === "serving") {
            this.silentProbes = 0;
            this.setServing(true, "health check serving");
          } else if (answer === "not_serving") {
            this.silentProbes = 0;
            this.setServing(false, "health check not serving");
          } else if (++this.silentProbes >= SILENT_PROBES_TO_EJECT) {
            this.setServing(false, "health check unanswered");
          }
        })
        .finally(() => {
          this.isProbing = false;
        });
    };
    run();
    this.timer = setInterval(run, PROBE_INTERVAL_MS);
    this.timer.unref();
  }

  private stopProbing(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}

/** A subchannel that is out of the rotation while its replica's tracker says it does not serve. */
class ProbedSubchannel extends experimental.BaseSubchannelWrapper {
  private users = 0;
  readonly tracker: ReplicaTracker;
  private readonly onState = (
    _sub: experimental.SubchannelInterface,
    _previous: connectivityState,
    next: connectivityState,
  ) => this.tracker.onConnectivity(next);

  constructor(child: experimental.SubchannelInterface, tracker: ReplicaTracker) {
    super(child);
    this.tracker = tracker;
    // Before pick_first reads it: a replica found stalled stays out when round_robin rebuilds.
    this.setHealthy(tracker.isServing);
    child.addConnectivityStateListener(this.onState);
    tracker.attach(this, child.getConnectivityState());
  }

  /** In or out of the rotation (pick_first reads the health of the subchannel it picked). */
  markServing(isServing: boolean): void {
    this.setHealthy(isServing);
  }

  override ref(): void {
    super.ref();
    this.users += 1;
  }

  override unref(): void {
    super.unref();
    this.users -= 1;
    // The last user let go (a new resolution replaced this wrapper, or the channel closed).
    if (this.users <= 0) {
      this.child.removeConnectivityStateListener(this.onState);
      this.tracker.detach(this);
    }
  }
}

/**
 * round_robin's picker, watching how each call ends: a replica that refused a call unread leaves
 * the rotation at once, so the control plane's one retry of that call lands on another replica.
 */
class RefusalAwarePicker implements experimental.Picker {
  private readonly child: experimental.Picker;
  constructor(child: experimental.Picker) {
    this.child = child;
  }
  pick(args: experimental.PickArgs): experimental.PickResult {
    const result = this.child.pick(args);
    const subchannel = result.subchannel;
    if (!(subchannel instanceof ProbedSubchannel)) return result;
    const ended = result.onCallEnded;
    return {
      ...result,
      onCallEnded: (code, details, metadata) => {
        if (code === status.UNAVAILABLE && metadata?.get(NOT_STARTED_TRAILER)[0] === "1") {
          subchannel.tracker.markRefusing();
        }
        ended?.(code, details, metadata);
      },
    };
  }
}

class HealthRoundRobin implements experimental.LoadBalancer {
  private readonly child: experimental.ChildLoadBalancerHandler;
  private supervision: ReplicaSupervision | undefined;
  private readonly reresolve: NodeJS.Timeout;
  /** Every replica by address, kept across resolutions (see ReplicaTracker). */
  private readonly trackers = new Map<string, ReplicaTracker>();

  private trackerOf(address: string): ReplicaTracker {
    let tracker = this.trackers.get(address);
    if (!tracker) {
      tracker = new ReplicaTracker(
        address,
        () => this.supervision,
        () => this.trackers.delete(address),
      );
      this.trackers.set(address, tracker);
    }
    return tracker;
  }

  constructor(helper: experimental.ChannelControlHelper) {
    this.child = new experimental.ChildLoadBalancerHandler(
      experimental.createChildChannelControlHelper(helper, {
        createSubchannel: (address, args) =>
          new ProbedSubchannel(
            helper.createSubchannel(address, args),
            this.trackerOf(experimental.subchannelAddressToString(address)),
          ),
        updateState: (state, picker, message) =>
          helper.updateState(
            state,
            state === connectivityState.READY ? new RefusalAwarePicker(picker) : picker,
            message,
          ),
      }),
    );
    this.reresolve = setInterval(() => helper.requestReresolution(), RERESOLVE_INTERVAL_MS);
    this.reresolve.unref();
  }

  updateAddressList(
    endpoints: experimental.StatusOr<experimental.Endpoint[]>,
    _config: experimental.TypedLoadBalancingConfig,
    options: ChannelOptions,
    note: string,
  ): boolean {
    this.supervision = options[PROBE_OPTION] as ReplicaSupervision | undefined;
    return this.child.updateAddressList(
      endpoints,
      experimental.parseLoadBalancingConfig({ round_robin: {} }),
      options,
      note,
    );
  }
  exitIdle(): void {
    this.child.exitIdle();
  }
  resetBackoff(): void {
    this.child.resetBackoff();
  }
  destroy(): void {
    clearInterval(this.reresolve);
    this.child.destroy();
  }
  getTypeName(): string {
    return HEALTH_ROUND_ROBIN;
  }
}

/** Registers the policy once per process (grpc-js keeps one registry). */
export function registerHealthRoundRobin(): void {
  if (experimental.isLoadBalancerNameRegistered(HEALTH_ROUND_ROBIN)) return;
  experimental.registerLoadBalancerType(HEALTH_ROUND_ROBIN, HealthRoundRobin, HealthRoundRobinConfig);
}

/** The service config that selects the policy for a channel. */
export const BALANCED_SERVICE_CONFIG = JSON.stringify({
  loadBalancingConfig: [{ [HEALTH_ROUND_ROBIN]: {} }],
});
