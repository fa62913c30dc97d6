// GET /collect/:id: an HTML shell with no details in it; the script loads the request only for a
// signed-in operator and posts the typed value straight to fulfil (sealed on arrival).
export const COLLECT_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

export const COLLECT_PAGE = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Store a credential — Latch</title><link rel="stylesheet" href="/assets/site.css"></head>
<body><main>
<h1>Store a credential</h1>
<p id="status" role="status" aria-live="polite">Loading the request...</p>
<form id="collect" hidden>
<p id="summary"></p>
<p id="call" class="hint"></p>
<label for="name">Name</label> <input id="name" name="name" required pattern="[A-Z][A-Z0-9_]{0,127}">
<label for="value">Value</label> <input id="value" name="value" type="password" autocomplete="off" required>
<label><input id="always" type="checkbox"> Always allow this agent to use it</label>
<button type="submit">Store it</button> <button type="button" id="deny">Deny the request</button>
</form>
</main><script src="/assets/collect.js"></script></body></html>
`;

export const COLLECT_SCRIPT = `"use strict";
(function () {
  var id = location.pathname.split("/").pop();
  var status = document.getElementById("status");
  var form = document.getElementById("collect");
  function csrf() { var m = /(?:^|; )__Host-latch_csrf=([^;]+)/.exec(document.cookie) || /(?:^|; )latch_csrf=([^;]+)/.exec(document.cookie); return m ? decodeURIComponent(m[1]) : ""; }
  function api(method, path, body) {
    return fetch(path, { method: method, headers: Object.assign({ "x-csrf-token": csrf() }, body ? { "content-type": "application/json" } : {}), body: body ? JSON.stringify(body) : undefined })
      .then(function (r) { return r.json().then(function (j) { if (!r.ok) throw new Error((j.error && j.error.message) || j.error || r.status); return j; }); });
  }
  api("GET", "/api/need-items/" + encodeURIComponent(id)).then(function (j) {
    var need = j.need;
    if (need.status !== "pending") { status.textContent = "This request is " + need.status + "."; return; }
    document.getElementById("summary").textContent = need.client_name + " needs a credential for " + need.host + " (" + need.environment + ").";
    // DECISIONS "Approvals": storing the value approves the request that asked, once, and no other.
    document.getElementById("call").textContent = need.call
      ? "Storing it approves this request once: " + need.call.method + " " + need.call.host + need.call.path +
        (need.call.body_sha256 ? " (body SHA-256 " + need.call.body_sha256 + ")" : " (no body)") +
        ". Always allow lets this agent make any call with it until you revoke it."
      : "Storing it approves one call of any kind by this agent (it named no request).";
    document.getElementById("name").value = need.suggested_name;
    status.textContent = "";
    form.hidden = false;
  }, function () { status.textContent = "Sign in as an operator of this organisation to see this request."; });
  form.addEventListener("submit", function (e) {
    e.preventDefault();
    var value = document.getElementById("value");
    api("POST", "/api/need-items/" + encodeURIComponent(id) + "/fulfill", { name: document.getElementById("name").value, value: value.value, always_allow: document.getElementById("always").checked })
      .then(function () { value.value = ""; form.hidden = true; status.textContent = "Stored. The agent can retry now."; }, function (err) { status.textContent = err.message; });
  });
  document.getElementById("deny").addEventListener("click", function () {
    api("POST", "/api/need-items/" + encodeURIComponent(id) + "/deny").then(function () { form.hidden = true; status.textContent = "Denied."; }, function (err) { status.textContent = err.message; });
  });
})();
`;
