import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["{shared,egress-proxy,control-plane,proto,deploy}/**/*.test.ts"],
    exclude: ["**/node_modules/**"],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: "forks",
    globalSetup: ["control-plane/test/global-setup.ts"],
    reporters: ["default", "./control-plane/test/closing-line-reporter.ts"],
  },
});
