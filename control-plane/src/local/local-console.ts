// GET / on `vault serve`: a plain console page (credentials without values, grants with approve
// and revoke buttons, recent audit). No outside assets; the script is served from this server and
// the Content-Security-Policy allows nothing else. The operator token arrives in the URL fragment
// (never sent to a server or a log) and is kept in sessionStorage for this tab only.
import type { FastifyInstance } from "fastify";

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Latch — local vault</title>
<link rel="stylesheet" href="/console.css">
</head>
<body>
<header><h1>Latch <small>local vault</small></h1><p id="status" role="status" aria-live="polite"></p></header>
<main>
<section aria-labelledby="h-grants"><h2 id="h-grants">Approvals</h2>
<table><thead><tr><th>Grant</th><th>Credential</th><th>Agent</th><th>Request</th><th>Body</th><th>Policy</th><th>Status</th><th>Expires</th><th>Actions</th></tr></thead><tbody id="grants"></tbody></table></section>
<section aria-labelledby="h-items"><h2 id="h-items">Credentials</h2>
<p>Values are never shown. Add or replace one with <code>vault set NAME --host HOST</code>.</p>
<table><thead><tr><th>Name</th><th>Hosts</th><th>Inject</th><th>User</th><th>Last 4</th></tr></thead><tbody id="items"></tbody></table></section>
<section aria-labelledby="h-audit"><h2 id="h-audit">Recent activity</h2>
<table><thead><tr><th>When</th><th>Who</th><th>Action</th><th>Credential</th><th>Host</th><th>Reason</th></tr></thead><tbody id="audit"></tbody></table></section>
</main>
<script src="/console.js"></script>
</body>
</html>
`;

const STYLE = `body{font:15px/1.45 system-ui,sans-serif;margin:0 auto;max-width:72rem;padding:1rem;color:#111}
h1 small{font-weight:normal;color:#555}table{border-collapse:collapse;width:100%;margin-bottom:1.5rem}
th,td{border-bottom:1px solid #ddd;padding:.35rem .5rem;text-align:left;vertical-align:top}
button{margin-right:.3rem}code{background:#f3f3f3;padding:0 .2rem}#status{color:#a00}`;

const SCRIPT = `"use strict";
(function () {
  var match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem("latch-operator-token", decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname);
  }
  var token = sessionStorage.getItem("latch-operator-token");
  var status = document.getElementById("status");
  function say(text) { status.textContent = text; }
  function api(method, path, body) {
    return fetch(path, {
      method: method,
      headers: Object.assign({ authorization: "Bearer " + token }, body ? { "content-type": "application/json" } : {}),
      body: body ? JSON.stringify(body) : undefined,
    }).then(function (r) {
      return r.json().then(function (j) { if (!r.ok) throw new Error((j.error && j.error.message) || r.status); return j; });
    });
  }
  function cell(row, text) { var td = document.createElement("td"); td.textContent = text == null ? "" : String(text); row.appendChild(td); return td; }
  function button(td, label, action) {
    var b = document.createElement("button"); b.type = "button"; b.textContent = label;
    b.addEventListener("click", function () { action().then(load, function (e) { say(e.message); }); });
    td.appendChild(b);
  }
  function fill(id, rows, render) {
    var body = document.getElementById(id); body.replaceChildren();
    rows.forEach(function (r) { var tr = document.createElement("tr"); render(tr, r); body.appendChild(tr); });
  }
  function load() {
    if (!token) { say("Open the address vault serve printed (it carries the operator token after #)."); return; }
    Promise.all([api("GET", "/api/grants"), api("GET", "/api/items"), api("GET", "/api/audit?limit=50")]).then(function (all) {
      say("");
      fill("grants", all[0].grants, function (tr, g) {
        cell(tr, g.grant_id); cell(tr, g.item_name); cell(tr, g.agent_id);
        cell(tr, g.call ? g.call.method + " " + g.call.host + g.call.path : "any call (the whole credential)");
        cell(tr, g.call ? (g.call.body_sha256 ? "SHA-256 " + g.call.body_sha256 : "no body") : "");
        cell(tr, g.policy); cell(tr, g.status); cell(tr, g.expires_at);
        var td = cell(tr, "");
        if (g.status === "pending") {
          button(td, "Approve once", function () { return api("POST", "/api/grants", { grant_id: g.grant_id, scope: "once" }); });
          button(td, "Approve 8 hours", function () { return api("POST", "/api/grants", { grant_id: g.grant_id, scope: "session" }); });
        }
        if (g.status === "pending" || g.status === "active") {
          button(td, "Revoke", function () { return api("POST", "/api/grants/" + encodeURIComponent(g.grant_id) + "/revoke"); });
        }
      });
      fill("items", all[1].items, function (tr, i) {
        cell(tr, i.name); cell(tr, i.allowed_hosts.join(", ")); cell(tr, i.inject); cell(tr, i.username); cell(tr, i.last4);
      });
      fill("audit", all[2].events, function (tr, e) {
        cell(tr, e.at); cell(tr, e.actor); cell(tr, e.action); cell(tr, e.item_name); cell(tr, e.host); cell(tr, e.reason);
      });
    }, function (e) { say(e.message); });
  }
  load();
  setInterval(load, 5000);
})();
`;

export function registerLocalConsole(app: FastifyInstance): void {
  app.get("/", async (_request, reply) =>
    reply.header("content-security-policy", CSP).type("text/html; charset=utf-8").send(PAGE),
  );
  app.get("/console.js", async (_request, reply) =>
    reply.type("text/javascript; charset=utf-8").send(SCRIPT),
  );
  app.get("/console.css", async (_request, reply) => reply.type("text/css; charset=utf-8").send(STYLE));
}
