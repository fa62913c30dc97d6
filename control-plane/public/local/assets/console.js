// The console of `vault serve`: credentials without values, grants with approve and revoke
// buttons, recent audit. The operator token arrives in the URL fragment (never sent to a server or
// a log) and is kept in sessionStorage for this tab only.
"use strict";
(() => {
  var match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem("latch-operator-token", decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname);
  }
  var token = sessionStorage.getItem("latch-operator-token");
  var status = document.getElementById("status");
  function say(text) {
    status.textContent = text;
  }
  function api(method, path, body) {
    return fetch(path, {
      method: method,
      headers: Object.assign(
        { authorization: `Bearer ${token}` },
        body ? { "content-type": "application/json" } : {},
      ),
      body: body ? JSON.stringify(body) : undefined,
    }).then((r) =>
      r.json().then((j) => {
        if (!r.ok) throw new Error(j.error?.message || r.status);
        return j;
      }),
    );
  }
  function cell(row, text) {
    var td = document.createElement("td");
    td.textContent = text == null ? "" : String(text);
    row.appendChild(td);
    return td;
  }
  function button(td, label, action) {
    var b = document.createElement("button");
    b.type = "button";
    b.textContent = label;
    b.addEventListener("click", () => {
      action().then(load, (e) => {
        say(e.message);
      });
    });
    td.appendChild(b);
  }
  function fill(id, rows, render) {
    var body = document.getElementById(id);
    body.replaceChildren();
    rows.forEach((r) => {
      var tr = document.createElement("tr");
      render(tr, r);
      body.appendChild(tr);
    });
  }
  function load() {
    if (!token) {
      say("Open the address vault serve printed (it carries the operator token after #).");
      return;
    }
    Promise.all([
      api("GET", "/api/grants"),
      api("GET", "/api/items"),
      api("GET", "/api/audit?limit=50"),
    ]).then(
      (all) => {
        say("");
        fill("grants", all[0].grants, (tr, g) => {
          cell(tr, g.grant_id);
          cell(tr, g.item_name);
          cell(tr, g.agent_id);
          cell(
            tr,
            g.call ? `${g.call.method} ${g.call.host}${g.call.path}` : "any call (the whole credential)",
          );
          cell(tr, g.call ? (g.call.body_sha256 ? `SHA-256 ${g.call.body_sha256}` : "no body") : "");
          cell(tr, g.policy);
          cell(tr, g.status);
          cell(tr, g.expires_at);
          var td = cell(tr, "");
          if (g.status === "pending") {
            button(td, "Approve once", () =>
              api("POST", "/api/grants", { grant_id: g.grant_id, scope: "once" }),
            );
            button(td, "Approve 8 hours", () =>
              api("POST", "/api/grants", { grant_id: g.grant_id, scope: "session" }),
            );
          }
          if (g.status === "pending" || g.status === "active") {
            button(td, "Revoke", () => api("POST", `/api/grants/${encodeURIComponent(g.grant_id)}/revoke`));
          }
        });
        fill("items", all[1].items, (tr, i) => {
          cell(tr, i.name);
          cell(tr, i.allowed_hosts.join(", "));
          cell(tr, i.inject);
          cell(tr, i.username);
          cell(tr, i.last4);
        });
        fill("audit", all[2].events, (tr, e) => {
          cell(tr, e.at);
          cell(tr, e.actor);
          cell(tr, e.action);
          cell(tr, e.item_name);
          cell(tr, e.host);
          cell(tr, e.reason);
        });
      },
      (e) => {
        say(e.message);
      },
    );
  }
  load();
  setInterval(load, 5000);
})();
