// Loaded first by every hosted page that has a script: the JSON API with the CSRF header, the
// aria-live status and the form helpers. Classic scripts: the page's next script calls these as
// globals. Every value reaches the page as text (textContent, attributes), never as markup.
// biome-ignore-all lint/correctness/noUnusedVariables: the scripts loaded after this one call its functions
"use strict";
var statusBox = document.getElementById("status");
// A page that sent the operator to sign in first (an approval link, /consent, /device) names itself
// in return_to; the sign-in pages keep it for the tab, say why the operator is signing in, and go
// there at the end instead of the console. Only those paths of this site are followed, never
// another site's address.
var RETURN_PATH =
  /^\/(approve\?token=[A-Za-z0-9_-]{20,100}|invite\?token=[A-Za-z0-9_-]{43}|consent\?uid=[A-Za-z0-9_-]{1,128}|device(\/[A-Za-z0-9_-]{1,128})?|collect\/[A-Za-z0-9_-]{1,64})$/;
var RETURN_REASONS = {
  approve: "Sign in to approve the request an agent is waiting on. You will land back on it.",
  collect: "Sign in to store the credential an agent asked for. You will land back on its request.",
  consent: "Sign in to decide whether the app may connect to Latch. You will land back on its request.",
  device: "Sign in to connect the device that showed you a code. You will land back on it.",
  invite: "Sign in, or sign up, with the address you were invited at. You will land back on the invitation.",
};
(() => {
  var asked = new URLSearchParams(location.search).get("return_to");
  if (asked && RETURN_PATH.test(asked)) sessionStorage.setItem("latch.return_to", asked);
  var pending = sessionStorage.getItem("latch.return_to");
  var heading = document.querySelector("main h1");
  // Said on the sign-in steps only: the page it returns to says what it is itself.
  var isSignInStep =
    ["sign-in", "sign-up", "enroll-totp", "verify-totp"].indexOf(document.body.dataset.page) >= 0;
  if (!pending || !RETURN_PATH.test(pending) || !heading || !isSignInStep) return;
  var why = document.createElement("p");
  why.className = "notice";
  why.id = "return-reason";
  why.textContent = RETURN_REASONS[pending.slice(1).split(/[?/]/)[0]];
  heading.after(why);
})();
/** Where sign-in ends: the page that asked for it, once, else the console. */
function afterSignIn() {
  var back = sessionStorage.getItem("latch.return_to");
  sessionStorage.removeItem("latch.return_to");
  return back && RETURN_PATH.test(back) ? back : "/console";
}
/** Copies text to the clipboard and says so; where the clipboard is refused, says how to copy. */
function copyText(text, what) {
  var done = () => say(`Copied ${what}.`);
  if (!navigator.clipboard) return Promise.resolve(say(`Select the ${what} and copy it.`, true));
  return navigator.clipboard.writeText(text).then(done, () => say(`Select the ${what} and copy it.`, true));
}
/** Backup codes as a person keeps them: who they are for, then one code per line. */
function backupCodesText(account, codes) {
  return `Latch backup codes for ${account}\nEach code signs you in once.\n\n${codes.join("\n")}\n`;
}
/** The copy, download and print buttons of backup codes shown once; `text` gives the file's text. */
function backupCodeButtons(ids, text) {
  byId(ids.copy).addEventListener("click", () => copyText(text(), "backup codes"));
  byId(ids.download).addEventListener("click", () => {
    downloadText("latch-backup-codes.txt", text());
    say("Downloaded latch-backup-codes.txt. Keep it somewhere only you can open.");
  });
  byId(ids.print).addEventListener("click", () => {
    document.body.classList.add("print-codes");
    window.print();
    document.body.classList.remove("print-codes");
  });
}
/** Saves text as a file the browser downloads (backup codes, audit exports). */
function downloadText(fileName, text, type) {
  var link = document.createElement("a");
  link.href = URL.createObjectURL(new Blob([text], { type: type || "text/plain" }));
  link.download = fileName;
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(link.href), 10000);
}
function byId(id) {
  return document.getElementById(id);
}
function say(text, isError) {
  statusBox.textContent = text || "";
  statusBox.classList.toggle("error", Boolean(isError));
}
function csrfToken() {
  // __Host-latch_csrf over https, latch_csrf on a plain-http localhost development plane.
  var match =
    /(?:^|;\s*)__Host-latch_csrf=([^;]*)/.exec(document.cookie) ||
    /(?:^|;\s*)latch_csrf=([^;]*)/.exec(document.cookie);
  return match ? decodeURIComponent(match[1]) : "";
}
function sentence(text) {
  text = String(text || "").trim();
  if (!text) return "";
  text = text.charAt(0).toUpperCase() + text.slice(1);
  return /[.!?]$/.test(text) ? text : `${text}.`;
}
function waitText(seconds) {
  return seconds >= 90 ? `${Math.ceil(seconds / 60)} minutes` : `${seconds} seconds`;
}
function describeError(status, json) {
  var error = json?.error;
  if (typeof error === "string") return sentence(json.message || error);
  if (!error) return `The request failed (HTTP ${status}). Try again.`;
  var text = sentence(error.message || error.code);
  // At 0 the sentence already says why (expired, void, none waiting): "Attempts left: 0" would
  // read as a lockout.
  if (typeof error.attempts_remaining === "number" && error.attempts_remaining > 0) {
    text += ` Attempts left: ${error.attempts_remaining}.`;
  }
  if (typeof error.retry_after === "number") text += ` Try again in ${waitText(error.retry_after)}.`;
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
  }).then((response) =>
    response
      .json()
      .catch(() => ({}))
      .then((json) => {
        if (response.ok) return json;
        var failure = new Error(describeError(response.status, json));
        failure.status = response.status;
        failure.body = json;
        failure.code = json && (typeof json.error === "string" ? json.error : json.error?.code);
        throw failure;
      }),
  );
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
  if (!error?.status && window.console) console.error("Latch: request or script failed:", error);
  say(error?.status ? error.message : "Could not reach Latch. Check your connection and try again.", true);
}
/** Runs a request for a form: buttons disabled meanwhile; on failure the field is marked and focused. */
function busy(form, promise, field) {
  var buttons = Array.prototype.slice.call(form.querySelectorAll("button"));
  form.setAttribute("aria-busy", "true");
  buttons.forEach((b) => {
    b.disabled = true;
  });
  if (field) field.removeAttribute("aria-invalid");
  return promise
    .catch((error) => {
      fail(error);
      if (field) {
        field.setAttribute("aria-invalid", "true");
        field.focus();
        field.select();
      }
    })
    .then(() => {
      form.removeAttribute("aria-busy");
      buttons.forEach((b) => {
        b.disabled = false;
      });
    });
}
function onSubmit(form, handler) {
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (form.getAttribute("aria-busy") !== "true") handler();
  });
}
function refuse(field, text) {
  field.setAttribute("aria-invalid", "true");
  say(text, true);
  field.focus();
}
