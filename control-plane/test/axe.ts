// axe-core in a playwright Page: the WCAG 2.0 and 2.1 A and AA rules plus axe's best practices,
// and the serious or critical violations written out so a failing expect says what to fix. The
// pages forbid inline and eval'd script (CSP), so axe is not added as a <script>: playwright's
// evaluate goes through the DevTools protocol, which the page's policy does not govern.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type { AxeResults } from "axe-core";
import type { Page } from "playwright-core";

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
const TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"];

/** The serious and critical violations of the page as it is now, one readable line per element. */
export async function seriousViolations(page: Page): Promise<string[]> {
  const loaded = await page.evaluate("typeof window.axe === 'object'");
  if (!loaded) await page.evaluate(AXE_SOURCE);
  const options = { runOnly: { type: "tag", values: TAGS }, resultTypes: ["violations"] };
  const results = (await page.evaluate(`axe.run(document, ${JSON.stringify(options)})`)) as AxeResults;
  return results.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .flatMap((v) =>
      v.nodes.map(
        (node) =>
          `${v.impact} ${v.id}: ${v.help} at ${node.target.join(" ")}` +
          (node.failureSummary ? ` (${node.failureSummary.replace(/\s+/g, " ").trim()})` : ""),
      ),
    );
}
