// A plain closing line after vitest's own summary: "Tests: N passed, N failed, N skipped".
// CI's readers of a run know pytest, go test, node's test runner and that plain line, not vitest's
// coloured table; without it, schemathesis's pytest-style banners were the only closing lines they
// found, and a run of 3,000 tests was judged to have run none.
import type { Reporter, TestModule } from "vitest/node";

export default class ClosingLineReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = unhandledErrors.length;
    let skipped = 0;
    for (const testModule of testModules) {
      // A file that failed to load has no tests to count: it counts as one failure.
      if (testModule.state() === "failed" && testModule.errors().length > 0) failed += 1;
      for (const test of testModule.children.allTests()) {
        const state = test.result().state;
        if (state === "passed") passed += 1;
        else if (state === "failed") failed += 1;
        else skipped += 1;
      }
    }
    process.stdout.write(`\nTests: ${passed} passed, ${failed} failed, ${skipped} skipped\n`);
  }
}
