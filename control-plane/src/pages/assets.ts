// The scripts and the stylesheet of the hosted pages, served from this server (/assets/*) so the
// pages' Content-Security-Policy needs no 'unsafe-inline' and no other host. Plain ES5-style
// browser JavaScript; nothing here uses innerHTML: every value reaches the page as text, and the
// QR code (our own server's SVG) as an <img> data: URL, never as live DOM. The console's own code
// is in console.script.ts.
import { CONSOLE_ACTIVITY, CONSOLE_CLIENTS, CONSOLE_CORE } from "./console.script.ts";

/** Helpers both scripts share: the JSON API with the CSRF header, and the aria-live status. */
const COMMON = `"use strict";
var statusBox = document.getElementById("status");
function byId(id) { return document.getElementById(id); }
function say(text, isError) {
  statusBox.textContent = text || "";
  statusBox.classList.toggle("error", Boolean(isError));
}
function csrfToken() {
  // __Host-latch_csrf over https, latch_csrf on a plain-http localhost development plane.
  var match = /(?:^|;\\s*)__Host-latch_csrf=([^;]*)/.exec(document.cookie) ||
    /(?:^|;\\s*)latch_csrf=([^;]*)/.exec(document.cookie);
  return match ? decodeURIComponent(match[1]) : "";
}
function sentence(text) {
  text = String(text || "").trim();
  if (!text) return "";
  text = text.charAt(0).toUpperCase() + text.slice(1);
  return /[.!?]$/.test(text) ? text : text + ".";
}
function waitText(seconds) {
  return seconds >= 90 ? Math.ceil(seconds / 60) + " minutes" : seconds + " seconds";
}
function describeError(status, json) {
  var error = json && json.error;
  if (typeof error === "string") return sentence(json.message || error);
  if (!error) return "The request failed (HTTP " + status + "). Try again.";
  var text = sentence(error.message || error.code);
  if (typeof error.attempts_remaining === "number") text += " Attempts left: " + error.attempts_remaining + ".";
  if (typeof error.retry_after === "number") text += " Try again in " + waitText(error.retry_after) + ".";
  return text;
}
function api(method, path, body) {
  var headers = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  var token = csrfToken();
  if (method !== "GET" && token) headers["x-csrf-token"] = token;
  return fetch(path, {
    method: method,
    headers: headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
    cache: "no-store",
  }).then(function (response) {
    return response.json().catch(function () { return {}; }).then(function (json) {
      if (response.ok) return json;
      var failure = new Error(describeError(response.status, json));
      failure.status = response.status;
      failure.body = json;
      failure.code = json && (typeof json.error === "string" ? json.error : json.error && json.error.code);
      throw failure;
    });
  });
}
/** Shows a failure; a lost session or a missing authenticator step goes to the page that fixes it. */
function fail(error) {
  if (error && error.code === "mfa_required" && error.body) {
    location.assign(error.body.verify_url || error.body.enroll_url || "/sign-in");
    return;
  }
  if (error && error.code === "unauthorized") {
    location.assign("/sign-in");
    return;
  }
  if (!(error && error.status) && window.console) console.error("Latch: request or script failed:", error);
  say(error && error.status ? error.message : "Could not reach Latch. Check your connection and try again.", true);
}
/** Runs a request for a form: buttons disabled meanwhile; on failure the field is marked and focused. */
function busy(form, promise, field) {
  var buttons = Array.prototype.slice.call(form.querySelectorAll("button"));
  form.setAttribute("aria-busy", "true");
  buttons.forEach(function (b) { b.disabled = true; });
  if (field) field.removeAttribute("aria-invalid");
  return promise.catch(function (error) {
    fail(error);
    if (field) {
      field.setAttribute("aria-invalid", "true");
      field.focus();
      field.select();
    }
  }).then(function () {
    form.removeAttribute("aria-busy");
    buttons.forEach(function (b) { b.disabled = false; });
  });
}
function onSubmit(form, handler) {
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    if (form.getAttribute("aria-busy") !== "true") handler();
  });
}
function refuse(field, text) {
  field.setAttribute("aria-invalid", "true");
  say(text, true);
  field.focus();
}
`;

const AUTH_SCRIPT = `${COMMON}
function emailPage() {
  var emailForm = byId("email-form"), codeForm = byId("code-form"), email = byId("email"), otp = byId("otp");
  var sentTo = "";
  function send() {
    return api("POST", "/api/auth/otp/send", { email: sentTo }).then(function () {
      byId("code-sent").textContent = "We sent a code to " + sentTo + ". It is valid for 10 minutes.";
      emailForm.hidden = true;
      codeForm.hidden = false;
      otp.value = "";
      otp.focus();
      say("Code sent. Check your email.");
    });
  }
  onSubmit(emailForm, function () {
    sentTo = email.value.trim();
    if (!sentTo) return refuse(email, "Enter your email address.");
    busy(emailForm, send(), email);
  });
  onSubmit(codeForm, function () {
    var code = otp.value.replace(/\\s+/g, "");
    if (!/^\\d{8}$/.test(code)) return refuse(otp, "The code from the email has 8 digits.");
    busy(codeForm, api("POST", "/api/auth/otp/verify", { email: sentTo, otp: code }).then(function (answer) {
      say("Email confirmed. One more step.");
      location.assign(answer.enroll ? "/enroll-totp" : "/verify-totp");
    }), otp);
  });
  byId("resend").addEventListener("click", function () { busy(codeForm, send(), otp); });
  byId("change-email").addEventListener("click", function () {
    codeForm.hidden = true;
    emailForm.hidden = false;
    say("");
    email.focus();
  });
}

function base64(text) {
  var bytes = new TextEncoder().encode(text), binary = "";
  for (var i = 0; i < bytes.length; i++) binary += String.fromCharCode(bytes[i]);
  return btoa(binary);
}

function enrollPage() {
  var isReenrolment = document.body.getAttribute("data-reenroll") === "true";
  var setup = byId("setup"), reenroll = byId("reenroll"), backup = byId("backup"), restartRow = byId("restart-row");
  var code = byId("code"), current = byId("current-code");
  function show(enrollment, shouldFocus) {
    var url = new URL(enrollment.otpauth_url);
    var secret = url.searchParams.get("secret") || "";
    byId("secret").textContent = secret.replace(/(.{4})(?=.)/g, "$1 ");
    byId("account").textContent = decodeURIComponent(url.pathname.replace(/^\\/+/, ""));
    byId("qr").src = "data:image/svg+xml;base64," + base64(enrollment.qr_svg);
    byId("expires").textContent =
      "This setup is valid until " + new Date(enrollment.expires_at).toLocaleTimeString() + ".";
    reenroll.hidden = true;
    restartRow.hidden = true;
    setup.hidden = false;
    code.value = "";
    if (shouldFocus) code.focus();
  }
  function begin(shouldFocus) {
    return api("GET", "/api/auth/totp/pending").then(function (enrollment) {
      show(enrollment, shouldFocus);
    }, function (error) {
      if (error.code !== "no_pending_enrollment") throw error;
      if (isReenrolment) {
        setup.hidden = true;
        restartRow.hidden = true;
        reenroll.hidden = false;
        if (shouldFocus) current.focus();
        return;
      }
      return api("POST", "/api/auth/totp/start", {}).then(function (enrollment) {
        show(enrollment, shouldFocus);
      });
    });
  }
  onSubmit(byId("current-form"), function () {
    var value = current.value.replace(/\\s+/g, "");
    if (!/^\\d{6}$/.test(value)) return refuse(current, "Enter the 6-digit code your current app shows.");
    busy(byId("current-form"), api("POST", "/api/auth/totp/start", { current_code: value }).then(function (e) {
      current.value = "";
      say("Scan the new code with your authenticator app.");
      show(e, true);
    }), current);
  });
  onSubmit(byId("confirm-form"), function () {
    var value = code.value.replace(/\\s+/g, "");
    if (!/^\\d{6}$/.test(value)) return refuse(code, "Enter the 6-digit code the app shows.");
    var confirmed = api("POST", "/api/auth/totp/confirm", { code: value }).then(function (answer) {
      var list = byId("backup-codes");
      list.replaceChildren();
      answer.backup_codes.forEach(function (backupCode) {
        var item = document.createElement("li");
        item.textContent = backupCode;
        list.appendChild(item);
      });
      setup.hidden = true;
      backup.hidden = false;
      say("Your authenticator is set up. Save your backup codes.");
      byId("backup-heading").focus();
    }, function (error) {
      if (error.code === "no_pending_enrollment") {
        setup.hidden = true;
        restartRow.hidden = false;
      }
      throw error;
    });
    busy(byId("confirm-form"), confirmed, code);
  });
  byId("restart").addEventListener("click", function () {
    say("");
    begin(true).catch(fail);
  });
  begin(false).catch(fail);
}

function verifyPage() {
  var form = byId("verify-form"), code = byId("code");
  onSubmit(form, function () {
    var value = code.value.trim();
    if (!value) return refuse(code, "Enter a code from your authenticator app or a backup code.");
    busy(form, api("POST", "/api/auth/totp/verify", { code: value }).then(function (answer) {
      say(answer.used_backup_code ? "Backup code accepted. Opening the console." : "Code accepted. Opening the console.");
      location.assign("/console");
    }), code);
  });
  code.focus();
}

var page = document.body.getAttribute("data-page");
if (page === "sign-in" || page === "sign-up") emailPage();
else if (page === "enroll-totp") enrollPage();
else if (page === "verify-totp") verifyPage();
`;

const CONSOLE_SCRIPT = `${COMMON}${CONSOLE_CORE}`;

const STYLE = `:root{color-scheme:light dark;--fg:#14171a;--bg:#fff;--muted:#5b6470;--line:#d4d9de;--accent:#0b57d0;--error:#b3261e;--card:#f6f8fa}
@media (prefers-color-scheme:dark){:root{--fg:#e8eaed;--bg:#15181c;--muted:#a4adb8;--line:#3a414a;--accent:#8ab4f8;--error:#f2b8b5;--card:#1e2227}}
*{box-sizing:border-box}
[hidden]{display:none!important}
body{margin:0;background:var(--bg);color:var(--fg);font:16px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
.skip{position:absolute;left:-999px;top:0;background:var(--bg);padding:.5rem}
.skip:focus{left:.5rem}
.visually-hidden{position:absolute;width:1px;height:1px;margin:-1px;padding:0;overflow:hidden;clip-path:inset(50%);white-space:nowrap;border:0}
header.site{border-bottom:1px solid var(--line);padding:.75rem 1.25rem;display:flex;align-items:center;justify-content:space-between;gap:1rem}
header.site button{margin:0}
.brand{margin:0;font-weight:700;letter-spacing:.02em}
main{max-width:40rem;margin:0 auto;padding:1.5rem 1.25rem 3rem}
h1{font-size:1.6rem;line-height:1.25;margin:.5rem 0 1rem;overflow-wrap:anywhere}
h2{font-size:1.2rem;margin:0 0 .75rem}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:1rem 1.25rem;margin:1rem 0}
label{display:block;font-weight:600;margin:.25rem 0 .35rem}
input{font:inherit;width:100%;max-width:24rem;padding:.55rem .65rem;border:1px solid var(--muted);border-radius:6px;background:var(--bg);color:var(--fg)}
input[aria-invalid=true]{border-color:var(--error);border-width:2px}
button,.button{font:inherit;display:inline-block;margin:.75rem .5rem 0 0;padding:.5rem 1rem;border-radius:6px;border:1px solid var(--accent);background:var(--accent);color:var(--bg);cursor:pointer;text-decoration:none}
button.secondary{background:transparent;color:var(--accent)}
button:disabled{opacity:.6;cursor:progress}
a{color:var(--accent)}
:focus-visible{outline:3px solid var(--accent);outline-offset:2px}
.status{min-height:1.5em;font-weight:600}
.status.error{color:var(--error)}
.hint{color:var(--muted);font-size:.925rem}
.notice{border-left:4px solid var(--error);padding-left:.75rem}
.qr{margin:1rem 0}
.qr img{display:block;background:#fff;padding:4px;border-radius:4px}
dl{margin:.5rem 0}
dt{font-weight:600}
dd{margin:0 0 .6rem}
code,.codes{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
#secret{font-size:1.05rem;overflow-wrap:anywhere}
.codes{columns:2;font-size:1.1rem;padding-left:1.75rem}
.codes li{padding:.2rem 0;break-inside:avoid}
body[data-page=console] main{max-width:76rem}
select{font:inherit;width:100%;max-width:24rem;padding:.5rem .6rem;border:1px solid var(--muted);border-radius:6px;background:var(--bg);color:var(--fg)}
h3{font-size:1.05rem;margin:1.5rem 0 .5rem}
.card h3{margin-top:0}
body[data-page=console] form>button{display:block}
.summary{display:flex;flex-wrap:wrap;gap:.25rem 2.5rem}
.summary dd{margin:0}
nav.sections ul{list-style:none;display:flex;flex-wrap:wrap;gap:.25rem;margin:1.25rem 0 1rem;padding:0;border-bottom:1px solid var(--line)}
nav.sections a{display:block;padding:.5rem 1rem;border:1px solid transparent;border-bottom:0;border-radius:6px 6px 0 0;text-decoration:none}
nav.sections a[aria-current=page]{border-color:var(--line);background:var(--card);color:var(--fg);font-weight:600}
.count{font-weight:700}
.request-cell{min-width:18rem}
.request-line{font-size:1rem;overflow-wrap:anywhere}
.request-line .method{font-weight:700;padding:.05rem .35rem;border:1px solid var(--accent);border-radius:4px}
.request-cell .digest{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.8rem;overflow-wrap:anywhere;margin:.2rem 0}
.table-wrap{overflow-x:auto;margin:.5rem 0}
table{border-collapse:collapse;width:100%;font-size:.95rem}
caption{text-align:left;font-weight:600;padding:.25rem 0}
th,td{text-align:left;vertical-align:top;padding:.45rem .5rem;border-bottom:1px solid var(--line);overflow-wrap:break-word}
thead th{border-bottom:2px solid var(--muted)}
th[scope=row],.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-weight:600}
td.actions-cell{white-space:nowrap}
td button{margin:.15rem .35rem .15rem 0;padding:.3rem .7rem;font-size:.9rem}
.confirm{display:inline-flex;flex-wrap:wrap;align-items:center;gap:.35rem;white-space:normal}
.confirm .question{font-weight:600}
.confirm button{margin:0}
button.danger{background:var(--error);border-color:var(--error);color:var(--bg)}
.token{border:2px solid var(--accent)}
.secret-text{font-size:1rem;overflow-wrap:anywhere}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:var(--bg);border:1px solid var(--line);border-radius:4px;padding:.5rem .75rem}
.filters .fields{display:flex;flex-wrap:wrap;gap:0 1.25rem}
.filters .fields div{flex:1 1 14rem}
body[data-page=console] .status:not(:empty){position:sticky;bottom:0;background:var(--bg);border-top:1px solid var(--line);padding:.5rem 0;margin:0}
`;

export interface Asset {
  type: string;
  body: string;
}

/** Everything under /assets/, by path. */
export const ASSETS: Record<string, Asset> = {
  "/assets/auth.js": { type: "text/javascript; charset=utf-8", body: AUTH_SCRIPT },
  "/assets/console.js": { type: "text/javascript; charset=utf-8", body: CONSOLE_SCRIPT },
  "/assets/console-clients.js": { type: "text/javascript; charset=utf-8", body: CONSOLE_CLIENTS },
  "/assets/console-activity.js": { type: "text/javascript; charset=utf-8", body: CONSOLE_ACTIVITY },
  "/assets/site.css": { type: "text/css; charset=utf-8", body: STYLE },
};
