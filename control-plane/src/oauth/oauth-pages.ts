// The HTML oidc-provider answers itself: the device code pages of RFC 8628 (/device) and its error
// page. Same look as our pages (site.css), no script; every value HTML-escaped. Their headers (CSP
// "device") are set by oauth.routes.ts before oidc-provider writes the body.
import { escapeHtml } from "../pages/page-files.ts";
import { SELF_NAMED_NOTE } from "./client-display.ts";

function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <meta name="robots" content="noindex">
    <title>${escapeHtml(title)} · Latch</title>
    <link rel="stylesheet" href="/assets/site.css">
  </head>
  <body>
    <header class="site"><a class="brand" href="/"><img src="/mark.svg" alt="" width="28" height="28"> Latch</a></header>
    <main id="main">
${body}
    </main>
  </body>
</html>
`;
}

/**
 * oidc-provider's code field has only a placeholder and an inline onfocus (which our policy blocks
 * anyway): give it an id, a visible label, and no handler.
 */
function labelCodeField(form: string): string {
  return form.replace(
    /<input\b([^>]*\bname="user_code"[^>]*)>/,
    (_field, attributes: string) =>
      `<label for="user-code">Code</label>\n  <input id="user-code" ${attributes.replace(/\s+onfocus="[^"]*"/, "").trim()}>`,
  );
}

/**
 * Why the code page is shown again, in our words, from the re-render oidc-provider reports: a Deny
 * on the consent page is not a bad code (it ends as "the interaction was aborted").
 */
export function deviceProblem(error: unknown): string | undefined {
  if (!error) return undefined;
  switch ((error as { constructor?: { name?: string } }).constructor?.name) {
    case "AbortedError":
      return "You denied this device: it gets no access to Latch. To connect it after all, start again on the device for a new code.";
    case "ExpiredError":
      return "That code has expired. Ask your device for a new one.";
    case "AlreadyUsedError":
      return "That code was already used. Ask your device for a new one.";
    case "NoCodeError":
      return "Enter the code your device shows.";
    default:
      return "That code is not valid or has expired. Check it and try again.";
  }
}

/** Step 1: the operator types the code the device shows. `form` is oidc-provider's (xsrf inside). */
export function deviceInputPage(form: string, problem?: string): string {
  return page(
    "Connect a device",
    `      <h1>Connect a device to Latch</h1>
      <p>Enter the code your device or command line shows, for example <code>BCDF-GHJK</code>.</p>
      ${problem ? `<p class="status error" role="alert">${escapeHtml(problem)}</p>` : ""}
      <div class="card">
        ${labelCodeField(form)}
        <div class="actions"><button type="submit" form="op.deviceInputForm">Continue</button></div>
      </div>`,
  );
}

/** The client as the device page shows it (client-display.ts), like the consent page does. */
export interface DeviceClient {
  name: string;
  /** The host of its client metadata document; null when it registered itself. */
  publisher: string | null;
  /** Its registered redirects as shown: an https host, anything else whole. */
  redirectTargets: readonly string[];
}

/** Step 2: the operator checks the code and the client before going on to sign in and consent. */
export function deviceConfirmPage(form: string, client: DeviceClient, userCode: string): string {
  const redirects = client.redirectTargets.length
    ? `
        <dt>Registered redirects</dt>
        ${client.redirectTargets.map((target) => `<dd>${escapeHtml(target)}</dd>`).join("\n        ")}`
    : "";
  return page(
    "Confirm the device",
    `      <h1>Is this your device?</h1>
      <p><strong>${escapeHtml(client.name)}</strong> asks to act as an agent in Latch.</p>
      <dl>
        <dt>${client.publisher ? "Published by" : "Client"}</dt>
        <dd>${escapeHtml(client.publisher ?? SELF_NAMED_NOTE)}</dd>${redirects}
      </dl>
      <p>Code: <code>${escapeHtml(userCode)}</code>. Continue only if your device shows exactly this code.</p>
      <div class="card">
        ${form}
        <div class="actions"><button type="submit" form="op.deviceConfirmForm">Continue</button></div>
      </div>`,
  );
}

export function deviceSuccessPage(clientName: string): string {
  return page(
    "Device connected",
    `      <h1>Done</h1>
      <p role="status">${escapeHtml(clientName)} is connected. You can close this page and return to your device.</p>`,
  );
}

/** An authorization or device error, in one sentence; the code is OAuth's, the text is ours. */
export function oauthErrorPage(code: string, description: string): string {
  return page(
    "Authorization failed",
    `      <h1>This authorization cannot go on</h1>
      <p role="status">${escapeHtml(description || "The request was not valid.")} (${escapeHtml(code)})</p>
      <p>Start again from your agent or device. <a href="/console">Open the console</a></p>`,
  );
}

/** Too many device code attempts (spec 8: 10 per 15 minutes per address and browser). */
export function deviceLimitPage(sentence: string): string {
  return page(
    "Too many attempts",
    `      <h1>Too many attempts</h1>
      <p role="status">${escapeHtml(sentence)}. Wait, then enter the code again.</p>`,
  );
}

/** A code form posted without the session of the page that showed it (expired, or another browser). */
export function deviceSessionMissingPage(): string {
  return page(
    "Open the code page again",
    `      <h1>Open the code page again</h1>
      <p role="status">This form was not opened in this browser, or it has expired. Nothing was checked.</p>
      <p><a href="/device">Enter the code again</a></p>`,
  );
}
