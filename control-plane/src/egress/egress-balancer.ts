// Spreading calls over every proxy replica: grpc-js `round_robin` under a thin policy of ours that
// takes a replica out of the rotation while its grpc.health.v1 Check is not SERVING (grpc-js has no
// client-side health checking of its own) and asks the DNS resolver again every few seconds, so a
// replica added behind the service name starts getting calls without any connection dropping.
import { type ChannelOptions, connectivityState, experimental, status } from "@grpc/grpc-js";

/**
 * The trailer a proxy sets when it refused a call before reading its ticket (it is draining):
 * nothing was spent and nothing left, so the same ticket may go to another replica once.
 */
export const NOT_STARTED_TRAILER = "latch-call-not-started";

/** Asks one replica (by its resolved `ip:port`) whether it serves; false on any failure. */
export type ReplicaProbe = (address: string) => Promise<boolean>;

export const HEALTH_ROUND_ROBIN = "latch_health_round_robin";
/**
 * The channel option carrying the probe. Its prefix keeps it off the subchannels (grpc-js strips
 * `grpc.internal.no_subchannel*` before creating one), so replicas are still shared by address.
 */
export const PROBE_OPTION = "grpc.internal.no_subchannel.latch_replica_probe";
/** How often a connected replica is asked; a drained one leaves the rotation within this. */
const PROBE_INTERVAL_MS = 1_000;
/** How often the service name is resolved again (grpc-js only re-resolves when a connection drops). */
const RERESOLVE_INTERVAL_MS = 5_000;

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

/** A subchannel that reports unhealthy while its replica's health Check says so. */
class ProbedSubchannel extends experimental.BaseSubchannelWrapper {
  private timer: NodeJS.Timeout | undefined;
  private isProbing = false;
  private users = 0;
  private readonly onState = (
    _sub: experimental.SubchannelInterface,
    _previous: connectivityState,
    next: connectivityState,
  ) => {
    if (next === connectivityState.READY) this.startProbing();
    else this.stopProbing();
  };

  private readonly address: string;
  private readonly probe: () => ReplicaProbe | undefined;

  constructor(
    child: experimental.SubchannelInterface,
    address: string,
    probe: () => ReplicaProbe | undefined,
  ) {
    super(child);
    this.address = address;
    this.probe = probe;
    child.addConnectivityStateListener(this.onState);
    if (child.getConnectivityState() === connectivityState.READY) this.startProbing();
  }

  private startProbing(): void {
    if (this.timer) return;
    const run = () => {
      const probe = this.probe();
      if (!probe || this.isProbing) return;
      this.isProbing = true;
      probe(this.address)
        .then((isServing) => this.setHealthy(isServing))
        .finally(() => {
          this.isProbing = false;
        });
    };
    run();
    this.timer = setInterval(run, PROBE_INTERVAL_MS);
    this.timer.unref();
  }

  /** The replica refused a call unread (it is draining): out of the rotation until a Check says SERVING. */
  markRefusing(): void {
    this.setHealthy(false);
  }

  private stopProbing(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    // A reconnected replica starts healthy; its next Check decides.
    this.setHealthy(true);
  }

  override ref(): void {
    super.ref();
    this.users += 1;
  }

  override unref(): void {
    super.unref();
    this.users -= 1;
    // The last user let go (the replica left the DNS answer or the channel closed).
    if (this.users <= 0) {
      this.stopProbing();
      this.child.removeConnectivityStateListener(this.onState);
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
          subchannel.markRefusing();
        }
        ended?.(code, details, metadata);
      },
    };
  }
}

class HealthRoundRobin implements experimental.LoadBalancer {
  private readonly child: experimental.ChildLoadBalancerHandler;
  private probe: ReplicaProbe | undefined;
  private readonly reresolve: NodeJS.Timeout;

  constructor(helper: experimental.ChannelControlHelper) {
    this.child = new experimental.ChildLoadBalancerHandler(
      experimental.createChildChannelControlHelper(helper, {
        createSubchannel: (address, args) =>
          new ProbedSubchannel(
            helper.createSubchannel(address, args),
            experimental.subchannelAddressToString(address),
            () => this.probe,
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
    this.probe = options[PROBE_OPTION] as ReplicaProbe | undefined;
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
