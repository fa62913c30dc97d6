// handleSummary for every bench script: the whole summary as JSON at __ENV.SUMMARY_PATH, which
// the node side (loadtest/lib/k6.ts) reads back. Replaces k6's end-of-test text summary.
export function writeSummary(data) {
  return { [__ENV.SUMMARY_PATH]: JSON.stringify(data, null, 2) };
}

/** A required __ENV value, as a string. */
export function env(name) {
  const value = __ENV[name];
  if (value === undefined || value === "") throw new Error(`missing -e ${name}=...`);
  return value;
}

/** One scenario running `iterations` iterations across `vus` VUs, each iteration run once. */
export function sharedIterations(name) {
  return {
    [name]: {
      executor: "shared-iterations",
      vus: Number(env("VUS")),
      iterations: Number(env("ITERATIONS")),
      maxDuration: "5m",
    },
  };
}
