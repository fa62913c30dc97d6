// deploy/compose.yaml checked statically (no container engine is needed, nor run here): every
// service hardened (no capabilities, no new privileges, read-only root, memory and process limits),
// started only once what it needs is healthy, the database and the tiers' link on internal
// networks, the console on loopback unless the operator says otherwise, each tier with only its
// own database role, keys and certificate; and the Dockerfile's Node as package.json pins it.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";

const here = (path: string) => new URL(path, import.meta.url);
// biome-ignore lint/suspicious/noExplicitAny: compose.yaml is whatever it says.
const compose = parse(readFileSync(here("./compose.yaml"), "utf8"), { merge: true }) as any;
const services = compose.services as Record<
  string,
  Record<string, unknown> & { environment?: Record<string, string> }
>;
const volumesOf = (name: string) => (services[name]!.volumes as string[]) ?? [];

describe("compose.yaml", () => {
  it("hardens every service: no capabilities beyond the database's own, no new privileges, read-only, limits", () => {
    for (const [name, service] of Object.entries(services)) {
      expect(service.cap_drop, name).toEqual(["ALL"]);
      expect(service.security_opt, name).toContain("no-new-privileges:true");
      expect(service.read_only, name).toBe(true);
      expect(service.mem_limit, name).toBeTruthy();
      expect(service.pids_limit, name).toBeGreaterThan(0);
      if (name !== "postgres") expect(service.cap_add, name).toBeUndefined();
    }
  });

  it("starts each service once what it needs is healthy", () => {
    for (const [name, service] of Object.entries(services)) {
      for (const [needed, how] of Object.entries(
        (service.depends_on ?? {}) as Record<string, { condition: string }>,
      )) {
        expect(how.condition, `${name} on ${needed}`).toBe("service_healthy");
      }
    }
    // The proxies wait for the control plane: its migrations make their table.
    expect(Object.keys(services["egress-1"]!.depends_on as object)).toContain("control-plane");
  });

  it("keeps the database and the tiers' link off the internet, and the console on loopback by default", () => {
    expect(compose.networks.database.internal).toBe(true);
    expect(compose.networks.tiers.internal).toBe(true);
    expect(services.postgres!.networks).toEqual(["database"]);
    expect(services["control-plane"]!.networks).not.toContain("internet");
    // Its one network with a route out is `mail`, and the README keeps that to the SMTP server.
    const routed = (services["control-plane"]!.networks as string[]).filter(
      (name) => compose.networks[name]?.internal !== true,
    );
    expect(routed).toEqual(["mail"]);
    const readme = readFileSync(here("../README.md"), "utf8");
    expect(readme).toContain("iptables -I DOCKER-USER -s <the latch_mail subnet> -j DROP");
    expect(readme).toContain(
      "iptables -I DOCKER-USER -s <the latch_mail subnet> -d <your SMTP server> -p tcp --dport <its port> -j ACCEPT",
    );
    // biome-ignore lint/suspicious/noTemplateCurlyInString: compose's own interpolation, as written.
    expect(services["control-plane"]!.ports).toEqual(["${LATCH_BIND:-127.0.0.1}:${LATCH_PORT:-8787}:8787"]);
  });

  it("gives each tier only its own database role, keys and certificate", () => {
    for (const name of ["egress-1", "egress-2"]) {
      const env = JSON.stringify(services[name]!.environment);
      expect(env).toContain("postgres://latch_egress:${LATCH_EGRESS_PASSWORD");
      expect(env).not.toContain("POSTGRES_PASSWORD");
      expect(volumesOf(name)).toEqual([
        "./secrets/certs/egress:/run/latch/certs:ro",
        "./secrets/keys/egress:/run/latch/keys:ro",
      ]);
      expect(services[name]!.environment!.EGRESS_CLIENT_IDENTITY).toBe("latch-control-plane");
    }
    const plane = JSON.stringify(services["control-plane"]!.environment);
    expect(plane).not.toContain("LATCH_EGRESS_PASSWORD");
    // Not the image's superuser (POSTGRES_USER), which production refuses: its own role.
    expect(plane).toContain("postgres://latch_control:${LATCH_CONTROL_PASSWORD");
    expect(plane).not.toContain("POSTGRES_PASSWORD");
    expect(readFileSync(here("./postgres-init/20-latch-control-role.sh"), "utf8")).toContain(
      "CREATE ROLE latch_control LOGIN NOSUPERUSER",
    );
    expect(volumesOf("control-plane").some((v) => v.includes("egress"))).toBe(false);
    expect(volumesOf("control-plane")).toContain("./secrets/certs/control-plane:/run/latch/certs:ro");
    // The proxies' role is made on the database's first start; the migration grants its table.
    expect(volumesOf("postgres")).toContain("./postgres-init:/docker-entrypoint-initdb.d:ro");
    expect(readFileSync(here("./postgres-init/10-latch-egress-role.sh"), "utf8")).toContain(
      "CREATE ROLE latch_egress LOGIN PASSWORD",
    );
    const bootstrap = readFileSync(here("./bootstrap.sh"), "utf8");
    expect(bootstrap).toContain('"$CERTS/control-plane" "$CERTS/egress"');
    expect(bootstrap).toContain("set_default LATCH_EGRESS_PASSWORD");
    expect(bootstrap).toContain("set_default LATCH_CONTROL_PASSWORD");
  });

  it("builds with the Node that package.json pins", () => {
    const lock = JSON.parse(readFileSync(here("../package-lock.json"), "utf8"));
    const pinned = lock.packages["node_modules/node"].version as string;
    const dockerfile = readFileSync(here("./Dockerfile"), "utf8");
    expect(dockerfile).toContain(`ARG NODE_BUILD_IMAGE=node:${pinned}-bookworm-slim`);
    expect(dockerfile).toMatch(new RegExp(`nodejs${pinned.split(".")[0]}-debian`));
  });
});
