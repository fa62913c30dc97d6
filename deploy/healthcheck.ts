// The images' HEALTHCHECK (distroless: no shell, no curl): GET one URL on loopback, exit 0 on a
// 2xx answer within 2 seconds, 1 otherwise. Usage: node deploy/healthcheck.ts http://127.0.0.1:8787/health
const url = process.argv[2];
if (!url?.startsWith("http://127.0.0.1:")) {
  process.stderr.write("usage: healthcheck.ts http://127.0.0.1:<port>/<path>\n");
  process.exit(2);
}
try {
  const response = await fetch(url, { signal: AbortSignal.timeout(2_000) });
  process.exit(response.ok ? 0 : 1);
} catch {
  process.exit(1);
}
