// Test fixture: separate "hosts" on one machine. Each host is a network namespace with one address
// on a /24, joined to the others by a veth pair into a bridge that lives in a namespace of its
// own; the test process's namespace is one more host (the origin, the DNS server, the agent).
// Root only (iproute2). Everything it makes is named with a random id and removed by `close`.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";

export interface Host {
  name: string;
  namespace: string;
  ip: string;
}

export interface HostProcess {
  child: ChildProcess;
  lines: string[];
  exited: Promise<number | null>;
}

export interface Network {
  /** The first three octets of the network's /24, random per run (two runs never share one). */
  subnet: string;
  /** The test process's own address on the network. */
  selfIp: string;
  addHost(name: string, lastOctet: number, options?: { nameserver?: string }): Host;
  /** Runs `command` inside the host's namespace, its environment exactly `env`. */
  spawnIn(host: Host, command: string[], env: NodeJS.ProcessEnv): HostProcess;
  close(): void;
}

const ip = (...args: string[]) => execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] });

/** Whether this process may make namespaces (root with iproute2). */
export function canMakeNamespaces(): boolean {
  if (process.getuid?.() !== 0) return false;
  try {
    execFileSync("ip", ["netns", "list"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

export function createNetwork(): Network {
  const id = randomBytes(2).toString("hex");
  const [a, b] = randomBytes(2);
  const subnet = `10.${200 + (a! % 50)}.${b}`;
  const switchNs = `lmh${id}sw`;
  const namespaces: string[] = [];
  const etcDirs: string[] = [];
  const processes: ChildProcess[] = [];
  let index = 0;

  ip("netns", "add", switchNs);
  namespaces.push(switchNs);
  ip("-n", switchNs, "link", "add", "br0", "type", "bridge");
  ip("-n", switchNs, "link", "set", "br0", "up");

  /** A veth pair: `inside` stays where the caller puts it, the peer joins the bridge. */
  function plug(): { inside: string } {
    const n = index++;
    const inside = `lmh${id}v${n}`;
    const peer = `lmh${id}p${n}`;
    ip("link", "add", inside, "type", "veth", "peer", "name", peer);
    ip("link", "set", peer, "netns", switchNs);
    ip("-n", switchNs, "link", "set", peer, "master", "br0");
    ip("-n", switchNs, "link", "set", peer, "up");
    return { inside };
  }

  // The test process's host.
  const self = plug();
  const selfIp = `${subnet}.1`;
  ip("addr", "add", `${selfIp}/24`, "dev", self.inside);
  ip("link", "set", self.inside, "up");

  return {
    subnet,
    selfIp,
    addHost(name, lastOctet, options = {}) {
      const namespace = `lmh${id}${name}`;
      ip("netns", "add", namespace);
      namespaces.push(namespace);
      const { inside } = plug();
      ip("link", "set", inside, "netns", namespace);
      const address = `${subnet}.${lastOctet}`;
      ip("-n", namespace, "addr", "add", `${address}/24`, "dev", inside);
      ip("-n", namespace, "link", "set", inside, "up");
      ip("-n", namespace, "link", "set", "lo", "up");
      if (options.nameserver) {
        // `ip netns exec` puts /etc/netns/<namespace>/resolv.conf over /etc/resolv.conf: the host's
        // processes resolve names through getaddrinfo and this server, as in a cluster.
        const dir = `/etc/netns/${namespace}`;
        mkdirSync(dir, { recursive: true });
        writeFileSync(
          `${dir}/resolv.conf`,
          `nameserver ${options.nameserver}\noptions timeout:1 attempts:2\n`,
        );
        etcDirs.push(dir);
      }
      return { name, namespace, ip: address };
    },
    spawnIn(host, command, env) {
      const child = spawn("ip", ["netns", "exec", host.namespace, ...command], {
        env,
        stdio: ["ignore", "pipe", "pipe"],
      });
      processes.push(child);
      const lines: string[] = [];
      const collect = (chunk: Buffer) => lines.push(...chunk.toString().split("\n").filter(Boolean));
      child.stdout!.on("data", collect);
      child.stderr!.on("data", collect);
      const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
      return { child, lines, exited };
    },
    close() {
      for (const child of processes) {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      }
      for (const namespace of namespaces.reverse()) {
        try {
          ip("netns", "del", namespace);
        } catch {
          // already gone
        }
      }
      for (const dir of etcDirs) rmSync(dir, { recursive: true, force: true });
    },
  };
}
