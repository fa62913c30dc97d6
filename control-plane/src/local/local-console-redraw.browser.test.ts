// The `vault serve` console in Chromium across its 5-second refresh: a request arriving redraws the
// approvals newest first, so the rows move. A pointer click on a decision that the redraw slid
// under the pointer a moment before decides nothing and says so; the keyboard focus stays on the
// same decision, and an open "Approve unread" question stays open with its focus.
import { chromium } from "playwright-core";
import { expect, it } from "vitest";
import { CHROMIUM, skipBrowserTests, watchPage } from "../../test/chromium.ts";
import { startEgressHarness } from "../../test/egress-harness.ts";
import {
  connectLocalAgent,
  LOCAL_TOKENS,
  localOperator,
  startLocalVault,
  toolPayload,
} from "../../test/local.ts";

const SOON = { timeout: 15_000, interval: 100 };

it.skipIf(skipBrowserTests)(
  "a redraw keeps focus and an open question, and a click on a decision it slid under the pointer decides nothing",
  async () => {
    const harness = await startEgressHarness();
    const local = await startLocalVault(harness);
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    const agents: Awaited<ReturnType<typeof connectLocalAgent>>[] = [];
    try {
      const stored = await localOperator(local, "POST", "/api/secrets", {
        name: "API_KEY",
        value: "sk_local_redraw_canary_9e2b",
        allowed_hosts: ["api.latch.test"],
      });
      expect(stored.status).toBe(201);
      /** A request from a new agent `name`, left waiting; its grant id. */
      const ask = async (name: string, body?: unknown): Promise<string> => {
        const agent = await connectLocalAgent(local.url, name);
        agents.push(agent);
        const asked = toolPayload(
          await agent.callTool({
            name: "http_request",
            arguments: body
              ? { item_name: "API_KEY", method: "POST", path: "/v1/same", body }
              : { item_name: "API_KEY", method: "GET", path: "/v1/same" },
          }),
        );
        expect(asked.status).toBe("pending");
        return String(asked.grant_id);
      };
      const statusOf = async (grantId: string) =>
        (
          await localOperator<{ grants: { grant_id: string; status: string }[] }>(local, "GET", "/api/grants")
        ).json.grants.find((g) => g.grant_id === grantId)?.status;
      const approveOnce = (name: string) =>
        page.getByRole("button", { name: `Approve once: API_KEY for ${name}`, exact: true });
      const focusedKey = () => page.evaluate('document.activeElement?.getAttribute("data-key")');

      const grantA = await ask("agent-a");
      const page = await browser.newPage();
      const problems = watchPage(page);
      await page.goto(`${local.url}/#token=${encodeURIComponent(LOCAL_TOKENS.operator)}`);
      await approveOnce("agent-a").waitFor({ state: "visible", timeout: SOON.timeout });

      // The keyboard on agent-a's Deny: a request arriving above moves it, the focus goes with it.
      await page.getByRole("button", { name: "Deny: API_KEY for agent-a", exact: true }).focus();
      const grantB = await ask("agent-b");
      await approveOnce("agent-b").waitFor({ state: "visible", timeout: SOON.timeout });
      expect(await focusedKey()).toBe(`${grantA}:deny`);

      // The pointer on agent-b's Approve once (the top row); agent-c's request takes that row.
      const box = await approveOnce("agent-b").boundingBox();
      if (!box) throw new Error("agent-b's Approve once is not on the screen");
      const x = box.x + box.width / 2;
      const y = box.y + box.height / 2;
      await page.mouse.move(x, y);
      const grantC = await ask("agent-c");
      await approveOnce("agent-c").waitFor({ state: "visible", timeout: SOON.timeout });
      const under = await page.evaluate(`document.elementFromPoint(${x}, ${y})?.getAttribute("aria-label")`);
      expect(under).toBe("Approve once: API_KEY for agent-c");
      await page.mouse.click(x, y);
      await expect
        .poll(() => page.locator("#status").textContent(), SOON)
        .toContain("The approvals changed just before that click: nothing was decided.");
      expect(await statusOf(grantC)).toBe("pending");
      expect(await statusOf(grantB)).toBe("pending");

      // An "Approve unread" question open (by keyboard, never held back) stays open across a redraw,
      // its Cancel still focused.
      const grantD = await ask("agent-d", { head: "Ship it", padding: "x".repeat(70 * 1024) });
      await approveOnce("agent-d").waitFor({ state: "visible", timeout: SOON.timeout });
      await approveOnce("agent-d").focus();
      await page.keyboard.press("Enter");
      const question = page.getByRole("group", {
        name: "Only the first 64 KiB of this request's body is shown. Approve it without reading the rest?",
      });
      await question.waitFor({ state: "visible" });
      expect(await focusedKey()).toBe(`${grantD}:once:cancel`);
      await ask("agent-e");
      await approveOnce("agent-e").waitFor({ state: "visible", timeout: SOON.timeout });
      expect(await question.isVisible()).toBe(true);
      expect(await focusedKey()).toBe(`${grantD}:once:cancel`);
      expect(await statusOf(grantD)).toBe("pending");
      expect(await statusOf(grantA)).toBe("pending");
      expect(problems).toEqual([]);
    } finally {
      for (const agent of agents) await agent.close();
      await browser.close();
      await local.app.close();
      await local.vault.close();
      await harness.close();
    }
  },
  120_000,
);
