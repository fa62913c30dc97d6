// CPU profiles for the benches: V8's sampling profiler (the one behind `node --cpu-prof`) started
// and stopped around the measured runs only, through node:inspector, and a short text summary of
// where the time went (self time by function and by package).
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";

/** The parts of a V8 .cpuprofile the summary reads. */
export interface CpuProfile {
  nodes: {
    id: number;
    callFrame: { functionName: string; url: string; lineNumber: number };
    children?: number[];
  }[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface Profiler {
  /** Starts sampling (again): samples of every started window go into one profile. */
  resume(): Promise<void>;
  /** Stops sampling until the next resume. */
  pause(): Promise<void>;
  /** Stops, writes the merged profile to `path` (Chrome DevTools opens it) and returns it. */
  finish(path: string): Promise<CpuProfile | undefined>;
}

/**
 * A profiler of this process. Sampling only runs between resume() and pause(), so the profile
 * holds the measured runs and not the warm-ups, ticket minting or start-up between them.
 */
export async function createProfiler(sampleIntervalUs = 200): Promise<Profiler> {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: sampleIntervalUs });
  const windows: CpuProfile[] = [];
  let isRunning = false;
  async function pause(): Promise<void> {
    if (!isRunning) return;
    const { profile } = (await session.post("Profiler.stop")) as { profile: CpuProfile };
    windows.push(profile);
    isRunning = false;
  }
  return {
    async resume() {
      if (isRunning) return;
      await session.post("Profiler.start");
      isRunning = true;
    },
    pause,
    async finish(path) {
      await pause();
      session.disconnect();
      const merged = mergeProfiles(windows);
      if (merged) writeFileSync(path, JSON.stringify(merged));
      return merged;
    },
  };
}

/** Several windows as one profile: node ids renumbered, the gaps between windows dropped. */
function mergeProfiles(profiles: readonly CpuProfile[]): CpuProfile | undefined {
  const first = profiles[0];
  if (!first) return undefined;
  const merged: CpuProfile = {
    nodes: [],
    samples: [],
    timeDeltas: [],
    startTime: first.startTime,
    endTime: 0,
  };
  let elapsed = first.startTime;
  for (const profile of profiles) {
    const offset = merged.nodes.length === 0 ? 0 : Math.max(...merged.nodes.map((n) => n.id));
    for (const node of profile.nodes) {
      merged.nodes.push({
        ...node,
        id: node.id + offset,
        ...(node.children ? { children: node.children.map((c) => c + offset) } : {}),
      });
    }
    for (const [i, sample] of profile.samples.entries()) {
      merged.samples.push(sample + offset);
      // The first delta of a window is measured from its own start; the gap is not counted.
      const delta = i === 0 ? 0 : (profile.timeDeltas[i] ?? 0);
      merged.timeDeltas.push(delta);
      elapsed += delta;
    }
  }
  merged.endTime = elapsed;
  return merged;
}

/** Where a frame's code lives: a package, a folder of ours, or what V8 calls it. */
function placeOf(url: string, functionName: string): string {
  if (url === "") return `(${functionName || "native"})`;
  const inModules = url.lastIndexOf("node_modules/");
  if (inModules !== -1) {
    const rest = url.slice(inModules + "node_modules/".length).split("/");
    return rest[0]?.startsWith("@") ? `${rest[0]}/${rest[1]}` : (rest[0] ?? url);
  }
  if (url.startsWith("node:")) return url;
  const ours = url.match(/\/(egress-proxy|control-plane|shared|proto|loadtest)\/(?:src\/|gen\/)?([^/]+)/);
  if (ours) return `${ours[1]}/${ours[2]}`;
  return url.split("/").slice(-2).join("/");
}

/**
 * Self time by function and by place (package, node: module, folder of ours), largest first,
 * with the share of all sampled time that was not idle.
 */
export function summarizeProfile(profile: CpuProfile, top = 30): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  for (const [i, sample] of profile.samples.entries()) {
    // The delta before sample i+1 is the time sample i stood for.
    const us = profile.timeDeltas[i + 1] ?? 0;
    selfUs.set(sample, (selfUs.get(sample) ?? 0) + us);
  }
  const byFunction = new Map<string, number>();
  const byPlace = new Map<string, number>();
  let busy = 0;
  let idle = 0;
  for (const [id, us] of selfUs) {
    const frame = byId.get(id)?.callFrame;
    if (!frame) continue;
    if (frame.functionName === "(idle)" || frame.functionName === "(program)") {
      idle += frame.functionName === "(idle)" ? us : 0;
      if (frame.functionName === "(idle)") continue;
    }
    busy += us;
    const place = placeOf(frame.url, frame.functionName);
    const name = `${frame.functionName || "(anonymous)"} ${place}${frame.url ? `:${frame.lineNumber + 1}` : ""}`;
    byFunction.set(name, (byFunction.get(name) ?? 0) + us);
    byPlace.set(place, (byPlace.get(place) ?? 0) + us);
  }
  const pct = (us: number) => `${((100 * us) / busy).toFixed(1).padStart(5)} %`;
  const lines = [
    `busy ${(busy / 1000).toFixed(0)} ms, idle ${(idle / 1000).toFixed(0)} ms`,
    "by place (self):",
  ];
  for (const [place, us] of [...byPlace].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    lines.push(`  ${pct(us)}  ${place}`);
  }
  lines.push("by function (self):");
  for (const [name, us] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    lines.push(`  ${pct(us)}  ${name}`);
  }
  lines.push("our functions and pino (total: self and everything they called):");
  for (const [name, us] of [...inclusiveOf(profile, selfUs)].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    lines.push(`  ${pct(us)}  ${name}`);
  }
  return lines.join("\n");
}

/** Time under each function of ours (and pino's), counted once per sample however deep it recurs. */
function inclusiveOf(profile: CpuProfile, selfUs: ReadonlyMap<number, number>): Map<string, number> {
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const totals = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = byId.get(at)?.callFrame;
      if (!frame || frame.functionName === "(idle)") break;
      const place = placeOf(frame.url, frame.functionName);
      if (!/^(egress-proxy|control-plane|shared|loadtest)\/|^pino/.test(place)) continue;
      const name = `${frame.functionName || "(anonymous)"} ${place}:${frame.lineNumber + 1}`;
      if (seen.has(name)) continue;
      seen.add(name);
      totals.set(name, (totals.get(name) ?? 0) + us);
    }
  }
  return totals;
}
