// The hosted sign-in pages and the console shell (spec 4.3 "Sign-in and account"). Plain HTML with
// no inline script or style: the behaviour lives in /assets/auth.js and /assets/console.js, served
// from this server, so the Content-Security-Policy can forbid everything else. Every value put
// into a page goes through escapeHtml.

/** Sent with every page: only our own script, style and fetches; images from us or data: (the QR). */
export const PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

const HTML_ESCAPES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
}

interface Layout {
  title: string;
  page: string;
  /** Our own scripts under /assets/, run in this order (classic scripts sharing one global scope). */
  scripts: readonly string[];
  body: string;
  attributes?: Record<string, string>;
  /** Markup at the end of the site header (the console's sign-out button). */
  headerEnd?: string;
}

function layout(parts: Layout): string {
  const attributes = Object.entries({ page: parts.page, ...parts.attributes })
    .map(([name, value]) => ` data-${name}="${escapeHtml(value)}"`)
    .join("");
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>${escapeHtml(parts.title)} · Latch</title>
<link rel="stylesheet" href="/assets/site.css">
</head>
<body${attributes}>
<a class="skip" href="#main">Skip to content</a>
<header class="site"><p class="brand">Latch</p>${parts.headerEnd ?? ""}</header>
<main id="main">
${parts.body}
<noscript><p class="notice">This page needs JavaScript from this site. Turn it on and reload.</p></noscript>
<p id="status" class="status" role="status" aria-live="polite"></p>
</main>
${parts.scripts.map((name) => `<script src="/assets/${escapeHtml(name)}.js"></script>\n`).join("")}</body>
</html>
`;
}

function emailSignInPage(mode: "sign-in" | "sign-up"): string {
  const isSignUp = mode === "sign-up";
  return layout({
    title: isSignUp ? "Create an account" : "Sign in",
    page: mode,
    scripts: ["auth"],
    body: `<h1>${isSignUp ? "Create your Latch account" : "Sign in to Latch"}</h1>
<p>We email you an 8-digit code. ${isSignUp ? "Your account is created when you enter it." : "No password needed."}</p>
<form id="email-form" class="card" novalidate>
<label for="email">Email address</label>
<input id="email" name="email" type="email" autocomplete="email" required spellcheck="false">
<button type="submit">Email me a code</button>
</form>
<form id="code-form" class="card" hidden novalidate>
<p id="code-sent"></p>
<label for="otp">8-digit code from the email</label>
<input id="otp" name="otp" type="text" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{8}" maxlength="8" required>
<div class="actions">
<button type="submit">${isSignUp ? "Create account" : "Sign in"}</button>
<button type="button" id="resend" class="secondary">Send a new code</button>
<button type="button" id="change-email" class="secondary">Use another email</button>
</div>
</form>
<p>${isSignUp ? 'Already have an account? <a href="/sign-in">Sign in</a>' : 'New to Latch? <a href="/sign-up">Create an account</a>'}</p>`,
  });
}

export const signInPage = (): string => emailSignInPage("sign-in");
export const signUpPage = (): string => emailSignInPage("sign-up");

/** `isReenrolment`: an authenticator is active, so a new one needs a current code first. */
export function enrollPage(options: { isReenrolment: boolean }): string {
  return layout({
    title: "Set up your authenticator",
    page: "enroll-totp",
    scripts: ["auth"],
    attributes: { reenroll: String(options.isReenrolment) },
    body: `<h1>${options.isReenrolment ? "Replace your authenticator" : "Set up your authenticator app"}</h1>
<section id="reenroll" class="card" hidden aria-labelledby="reenroll-heading">
<h2 id="reenroll-heading">Confirm it is you</h2>
<p>An authenticator app is already set up. Enter a current code from it to start over with a new one.</p>
<form id="current-form" novalidate>
<label for="current-code">6-digit code from your current app</label>
<input id="current-code" name="current_code" type="text" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6" required>
<button type="submit">Start with a new authenticator</button>
</form>
<p><a href="/console">Back to the console</a></p>
</section>
<section id="setup" class="card" hidden aria-labelledby="setup-heading">
<h2 id="setup-heading">Scan the code</h2>
<ol>
<li>Open an authenticator app on your phone (for example one that supports "TOTP").</li>
<li>Scan the QR code below, or type the setup key by hand.</li>
<li>Enter the 6-digit code the app shows.</li>
</ol>
<figure class="qr"><img id="qr" alt="QR code to add Latch to your authenticator app" width="220" height="220"></figure>
<dl class="secret">
<dt id="secret-label">Setup key (to type by hand)</dt>
<dd><code id="secret" aria-labelledby="secret-label"></code></dd>
<dt>Account</dt>
<dd id="account"></dd>
</dl>
<p id="expires" class="hint"></p>
<form id="confirm-form" novalidate>
<label for="code">6-digit code from the app</label>
<input id="code" name="code" type="text" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6" required>
<button type="submit">Confirm</button>
</form>
</section>
<p id="restart-row" hidden><button type="button" id="restart">Start again</button></p>
<section id="backup" class="card" hidden aria-labelledby="backup-heading">
<h2 id="backup-heading" tabindex="-1">Save your backup codes</h2>
<p>Each code signs you in once if you lose your phone. They are shown <strong>only this once</strong>: write them down or store them in a password manager now.</p>
<ol id="backup-codes" class="codes"></ol>
<p><a id="continue" class="button" href="/console">Continue to console</a></p>
</section>`,
  });
}

export function verifyPage(): string {
  return layout({
    title: "Authenticator code",
    page: "verify-totp",
    scripts: ["auth"],
    body: `<h1>Enter your authenticator code</h1>
<form id="verify-form" class="card" novalidate>
<label for="code">Code from your authenticator app, or a backup code</label>
<input id="code" name="code" type="text" autocomplete="one-time-code" autocapitalize="characters" spellcheck="false" maxlength="32" required aria-describedby="code-hint">
<p id="code-hint" class="hint">A 6-digit code from the app, or one of your backup codes (like ABCDE-FGHJK). A backup code works once.</p>
<button type="submit">Continue</button>
</form>
<p><a href="/sign-in">Sign in with another email</a></p>`,
  });
}

export interface ConsoleView {
  email: string;
  organisationName: string | null;
  backupCodesRemaining: number;
}

const ENVIRONMENT_OPTIONS =
  '<option value="staging">staging</option><option value="production">production</option>';

/**
 * A table with a caption, column headings and an empty body the console script fills. Under a
 * visible h3 the caption is for screen readers only (`captionHidden`).
 */
function dataTable(id: string, caption: string, columns: readonly string[], captionHidden = false): string {
  const headings = columns.map((c) => `<th scope="col">${escapeHtml(c)}</th>`).join("");
  return `<div class="table-wrap"><table id="${id}">
<caption${captionHidden ? ' class="visually-hidden"' : ""}>${escapeHtml(caption)}</caption>
<thead><tr>${headings}</tr></thead>
<tbody></tbody>
</table></div>`;
}

const VAULT_SECTION = `<section id="vault" class="panel" aria-labelledby="vault-heading">
<h2 id="vault-heading" tabindex="-1">Vault</h2>
<p class="hint">Stored credentials. A value is never shown again once saved: only its last four characters.</p>
${dataTable("items", "Credentials", ["Name", "Environment", "Kind", "Allowed hosts", "Inject", "Last 4", "Updated", "Actions"])}
<p id="items-empty" class="hint" hidden>No credentials yet. Add one below.</p>
<form id="rotate-form" class="card" hidden novalidate aria-labelledby="rotate-heading">
<h3 id="rotate-heading">Rotate <span id="rotate-name"></span></h3>
<p class="hint">The new value replaces the old one at once. Hosts, inject mode and approvals stay as they are.</p>
<label for="rotate-value">New value</label>
<input id="rotate-value" name="value" type="password" autocomplete="off" spellcheck="false" required>
<div class="actions">
<button type="submit">Save new value</button>
<button type="button" class="secondary" data-close>Cancel</button>
</div>
</form>
<form id="edit-form" class="card" hidden novalidate aria-labelledby="edit-heading">
<h3 id="edit-heading">Edit <span id="edit-name"></span></h3>
<label for="edit-hosts">Allowed hosts</label>
<input id="edit-hosts" name="allowed_hosts" type="text" autocomplete="off" spellcheck="false" required aria-describedby="edit-hosts-hint">
<p id="edit-hosts-hint" class="hint">Hostnames the credential may be sent to, separated by commas or spaces.</p>
<label for="edit-inject">Inject as</label>
<input id="edit-inject" name="inject" type="text" list="inject-modes" autocomplete="off" spellcheck="false" required aria-describedby="inject-hint-edit">
<p id="inject-hint-edit" class="hint">bearer, basic, header:Name, query:param or cookie:name.</p>
<label for="edit-username">User name or client ID (optional)</label>
<input id="edit-username" name="username" type="text" autocomplete="off" spellcheck="false">
<div class="actions">
<button type="submit">Save changes</button>
<button type="button" class="secondary" data-close>Cancel</button>
</div>
</form>
<datalist id="inject-modes">
<option value="bearer"></option>
<option value="basic"></option>
<option value="header:X-Api-Key"></option>
<option value="query:api_key"></option>
<option value="cookie:session"></option>
</datalist>
<form id="add-form" class="card" novalidate aria-labelledby="add-heading">
<h3 id="add-heading">Add a credential</h3>
<label for="item-name">Name</label>
<input id="item-name" name="name" type="text" autocomplete="off" spellcheck="false" autocapitalize="characters" maxlength="128" required aria-describedby="item-name-hint">
<p id="item-name-hint" class="hint">Uppercase letters, digits and underscores, starting with a letter (for example GITHUB_TOKEN).</p>
<label for="item-value">Value</label>
<input id="item-value" name="value" type="password" autocomplete="off" spellcheck="false" required aria-describedby="item-value-hint">
<p id="item-value-hint" class="hint">Sent only to Latch; never shown again.</p>
<label for="item-environment">Environment</label>
<select id="item-environment" name="environment">${ENVIRONMENT_OPTIONS}</select>
<label for="item-kind">Kind</label>
<select id="item-kind" name="kind">
<option value="secret">Secret (API key or token)</option>
<option value="client_secret">OAuth client secret</option>
<option value="login">Login (user name and password)</option>
</select>
<label for="item-hosts">Allowed hosts</label>
<input id="item-hosts" name="allowed_hosts" type="text" autocomplete="off" spellcheck="false" required aria-describedby="item-hosts-hint">
<p id="item-hosts-hint" class="hint">Hostnames the credential may be sent to, separated by commas or spaces (for example api.example.com).</p>
<label for="item-inject">Inject as</label>
<input id="item-inject" name="inject" type="text" list="inject-modes" value="bearer" autocomplete="off" spellcheck="false" required aria-describedby="item-inject-hint">
<p id="item-inject-hint" class="hint">bearer, basic, header:Name, query:param or cookie:name.</p>
<label for="item-username">User name or client ID (optional)</label>
<input id="item-username" name="username" type="text" autocomplete="off" spellcheck="false" aria-describedby="item-username-hint">
<p id="item-username-hint" class="hint">Needed for basic and for an OAuth client secret.</p>
<label for="item-folder">Folder (optional)</label>
<input id="item-folder" name="folder_name" type="text" autocomplete="off" spellcheck="false" maxlength="128">
<button type="submit">Add credential</button>
</form>
</section>`;

const CLIENTS_SECTION = `<section id="clients" class="panel" aria-labelledby="clients-heading">
<h2 id="clients-heading" tabindex="-1">Clients</h2>
<p class="hint">A model client lets an agent use Latch over MCP; it never sees a value. A trusted client lets your own runtime fetch a value; it cannot use MCP.</p>
<form id="client-form" class="card" novalidate aria-labelledby="client-form-heading">
<h3 id="client-form-heading">Issue a client</h3>
<label for="client-name">Name</label>
<input id="client-name" name="name" type="text" autocomplete="off" maxlength="80" required>
<label for="client-kind">Kind</label>
<select id="client-kind" name="kind">
<option value="model">Model client (an agent, over MCP)</option>
<option value="trusted">Trusted client (your runtime, fetches values)</option>
</select>
<label for="client-environment">Environment</label>
<select id="client-environment" name="environment">${ENVIRONMENT_OPTIONS}</select>
<button type="submit">Issue client</button>
</form>
<section id="token-panel" class="card token" hidden aria-labelledby="token-heading">
<h3 id="token-heading" tabindex="-1">Copy the token now</h3>
<p>This is the only time Latch shows the token of <strong id="token-client"></strong>. Store it where the client runs; if it is lost, rotate the client.</p>
<p><code id="token-value" class="secret-text"></code></p>
<button type="button" id="copy-token">Copy token</button>
<div id="token-mcp">
<p>MCP URL: <code id="mcp-url"></code></p>
<p>Configure your MCP client with this URL (Streamable HTTP transport) and send the header <code>Authorization: Bearer</code> followed by the token, for example:</p>
<pre><code id="mcp-header"></code></pre>
</div>
<p id="token-trusted" hidden>Your runtime sends it as <code>Authorization: Bearer</code> followed by the token to <code>POST /runtime/resolve</code> with a body like <code>{"item_name": "API_KEY"}</code>.</p>
<button type="button" id="token-done" class="secondary">I have stored it: hide the token</button>
</section>
<h3>Clients</h3>
<p class="hint">Every client of this organisation. A token is shown only once, when it is issued or rotated.</p>
${dataTable("issued", "Clients", ["Name", "Kind", "Environment", "Client ID", "Issued", "Actions"], true)}
<p id="issued-empty" class="hint">None yet.</p>
<form id="client-id-form" class="card" novalidate aria-labelledby="client-id-heading">
<h3 id="client-id-heading">Rotate or revoke a client by ID</h3>
<label for="client-id">Client ID</label>
<input id="client-id" name="client_id" type="text" autocomplete="off" spellcheck="false" required>
<div class="actions" id="client-id-actions">
<button type="button" id="client-id-rotate">Rotate</button>
<button type="button" id="client-id-revoke" class="secondary">Revoke</button>
</div>
</form>
</section>`;

const INBOX_SECTION = `<section id="inbox" class="panel" aria-labelledby="inbox-heading">
<h2 id="inbox-heading" tabindex="-1">Inbox</h2>
<p class="hint">Agents waiting for your approval. Updated every 5 seconds.</p>
${dataTable("approvals", "Pending approvals", ["Credential", "Environment", "Agent", "Request", "Task", "Requested", "Decision"])}
<p id="approvals-empty" class="hint">Nothing is waiting for approval.</p>
<form id="code-form" class="card" novalidate aria-labelledby="code-heading">
<h3 id="code-heading">Approve by code</h3>
<p class="hint">An agent waiting for approval shows an 8-digit code. Enter it to approve that request.</p>
<label for="approval-code">8-digit approval code</label>
<input id="approval-code" name="code" type="text" inputmode="numeric" autocomplete="off" pattern="[0-9]{8}" maxlength="8" required>
<label for="code-policy">Approve for</label>
<select id="code-policy" name="policy">
<option value="prompt">One call</option>
<option value="session">8 hours</option>
<option value="item_standing">Always (until revoked)</option>
</select>
<button type="submit">Approve</button>
</form>
<h3>Requests for credentials</h3>
${dataTable("requests", "Requests for credentials", ["Kind", "Suggested name", "Host", "Agent", "Request", "Message", "Requested", "Answer"], true)}
<p id="requests-empty" class="hint">No agent is asking for a credential.</p>
</section>`;

const AUDIT_SECTION = `<section id="audit" class="panel" aria-labelledby="audit-heading">
<h2 id="audit-heading" tabindex="-1">Audit</h2>
<p class="hint">The latest 200 events, newest first. Names and hosts only: never a value.</p>
<form id="audit-form" class="card filters" novalidate aria-labelledby="audit-filter-heading">
<h3 id="audit-filter-heading">Filter</h3>
<div class="fields">
<div><label for="audit-item">Credential name</label>
<input id="audit-item" name="item_name" type="text" autocomplete="off" spellcheck="false"></div>
<div><label for="audit-client">Client ID</label>
<input id="audit-client" name="client_id" type="text" autocomplete="off" spellcheck="false"></div>
</div>
<div class="actions">
<button type="submit">Show events</button>
<button type="button" id="audit-clear" class="secondary">Clear filters</button>
</div>
</form>
${dataTable("events", "Audit events", ["When", "Environment", "Actor", "Action", "Credential", "Host", "Reason", "Details"])}
<p id="events-empty" class="hint" hidden>No events match.</p>
</section>`;

const ACCESS_SECTION = `<section id="access" class="panel" aria-labelledby="access-heading">
<h2 id="access-heading" tabindex="-1">Access</h2>
<h3>Operators</h3>
${dataTable("operators", "Operators of this organisation", ["Email", "Role", "Member since"], true)}
<h3>Sessions</h3>
<p class="hint">Browsers signed in to this organisation.</p>
${dataTable("sessions", "Signed-in sessions", ["Operator", "Browser", "Signed in", "Last active", "Action"], true)}
<p id="revoke-others-row"><button type="button" id="revoke-others" class="secondary">Sign out all other sessions</button></p>
</section>`;

export function consolePage(view: ConsoleView): string {
  return layout({
    title: "Console",
    page: "console",
    scripts: ["console", "console-clients", "console-activity"],
    headerEnd: '<button type="button" id="sign-out" class="secondary">Sign out</button>',
    body: `<h1>Hello, <span id="email">${escapeHtml(view.email)}</span></h1>
<dl class="card summary">
<div><dt>Organisation</dt>
<dd id="organisation">${escapeHtml(view.organisationName ?? "None yet")}</dd></div>
<div><dt>Backup codes left</dt>
<dd id="backup-left">${escapeHtml(String(view.backupCodesRemaining))}</dd></div>
<div><dt>Authenticator</dt>
<dd><a href="/enroll-totp">Replace your authenticator app</a></dd></div>
</dl>
<nav class="sections" aria-label="Console sections">
<ul>
<li><a href="#vault">Vault</a></li>
<li><a href="#clients">Clients</a></li>
<li><a href="#inbox">Inbox <span id="inbox-count" class="count"></span></a></li>
<li><a href="#audit">Audit</a></li>
<li><a href="#access">Access</a></li>
</ul>
</nav>
${VAULT_SECTION}
${CLIENTS_SECTION}
${INBOX_SECTION}
${AUDIT_SECTION}
${ACCESS_SECTION}`,
  });
}
