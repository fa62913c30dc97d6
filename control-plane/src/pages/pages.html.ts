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
  script: "auth" | "console";
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
<script src="/assets/${parts.script}.js"></script>
</body>
</html>
`;
}

function emailSignInPage(mode: "sign-in" | "sign-up"): string {
  const isSignUp = mode === "sign-up";
  return layout({
    title: isSignUp ? "Create an account" : "Sign in",
    page: mode,
    script: "auth",
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
    script: "auth",
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
    script: "auth",
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

export function consolePage(view: ConsoleView): string {
  return layout({
    title: "Console",
    page: "console",
    script: "console",
    headerEnd: '<button type="button" id="sign-out" class="secondary">Sign out</button>',
    body: `<h1>Hello, <span id="email">${escapeHtml(view.email)}</span></h1>
<dl class="card">
<dt>Organisation</dt>
<dd id="organisation">${escapeHtml(view.organisationName ?? "None yet")}</dd>
<dt>Backup codes left</dt>
<dd id="backup-left">${escapeHtml(String(view.backupCodesRemaining))}</dd>
</dl>
<p><a href="/enroll-totp">Replace your authenticator app</a></p>`,
  });
}
