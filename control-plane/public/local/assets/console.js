// The console of `vault serve`: credentials without values, approvals with approve, deny and revoke
// buttons, recent activity. The operator token arrives in the URL fragment (never sent to a server
// or a log) and is kept in sessionStorage for this tab only. Values reach the page as text only.
"use strict";
(() => {
  var match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem("latch-operator-token", decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname);
  }
  var token = sessionStorage.getItem("latch-operator-token");
  var status = document.getElementById("status");
  var byId = (id) => document.getElementById(id);
  function say(text, isError) {
    status.textContent = text;
    status.classList.toggle("error", Boolean(isError));
  }
  function api(method, path, body) {
    return fetch(path, {
      method: method,
      headers: Object.assign(
        { authorization: `Bearer ${token}` },
        body ? { "content-type": "application/json" } : {},
      ),
      body: body ? JSON.stringify(body) : undefined,
      cache: "no-store",
    }).then((r) =>
      r
        .json()
        .catch(() => ({}))
        .then((j) => {
          if (!r.ok) throw new Error(j.error?.message || `The vault answered HTTP ${r.status}.`);
          return j;
        }),
    );
  }
  function el(tag, text, className) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }
  function cell(row, content, className) {
    var td = content?.nodeType ? content : el("td", content === null || content === "" ? "—" : content);
    if (className) td.className = className;
    row.appendChild(td);
    return td;
  }
  function when(iso) {
    return iso ? new Date(iso).toLocaleString() : "";
  }
  function fill(id, rows, render) {
    var body = byId(id);
    body.replaceChildren();
    rows.forEach((r) => {
      var tr = el("tr");
      render(tr, r);
      body.appendChild(tr);
    });
    byId(`${id}-empty`).hidden = rows.length > 0;
    body.closest(".table-wrap").hidden = rows.length === 0;
  }
  /** A decision button; after it, the list reloads and focus returns to the approvals heading. */
  function decision(td, text, label, isSecondary, action, done) {
    var b = el("button", text, isSecondary ? "secondary" : "");
    if (text === "Deny") b.classList.add("deny");
    b.type = "button";
    b.setAttribute("aria-label", label);
    b.addEventListener("click", () => {
      b.disabled = true;
      action().then(
        () => {
          say(done);
          byId("h-grants").focus();
          return load(true);
        },
        (e) => {
          b.disabled = false;
          say(e.message, true);
        },
      );
    });
    td.appendChild(b);
  }
  function requestCell(g) {
    var td = el("td", null, "request-cell");
    if (!g.call) {
      td.appendChild(el("strong", "Any call"));
      td.appendChild(el("span", " with this credential: the agent named no request.", "hint"));
      return td;
    }
    var line = el("div", null, "request-line");
    line.append(el("code", g.call.method, "method"), " ", el("code", g.call.host + g.call.path, "target"));
    td.appendChild(line);
    td.appendChild(
      el("div", g.call.body_sha256 ? `Body SHA-256 ${g.call.body_sha256}` : "No body", "digest"),
    );
    return td;
  }
  function grantRow(tr, g) {
    var agent = g.agent_name || g.agent_id;
    var label = `${g.item_name} for ${agent}`;
    var th = el("th", g.item_name);
    th.scope = "row";
    tr.appendChild(th);
    cell(tr, agent);
    cell(tr, requestCell(g));
    cell(tr, g.status);
    cell(tr, when(g.expires_at));
    var td = cell(tr, el("td"), "actions-cell");
    if (g.status === "pending") {
      decision(
        td,
        "Approve once",
        `Approve once: ${label}`,
        false,
        () => api("POST", "/api/grants", { grant_id: g.grant_id, scope: "once" }),
        `Approved ${label} for one call.`,
      );
      decision(
        td,
        "8 hours",
        `Approve for 8 hours: ${label}`,
        true,
        () => api("POST", "/api/grants", { grant_id: g.grant_id, scope: "session" }),
        `Approved ${label} for 8 hours.`,
      );
    }
    if (g.status === "pending" || g.status === "active") {
      const isPending = g.status === "pending";
      decision(
        td,
        isPending ? "Deny" : "Revoke",
        `${isPending ? "Deny" : "Revoke"}: ${label}`,
        true,
        () => api("POST", `/api/grants/${encodeURIComponent(g.grant_id)}/revoke`),
        isPending ? `Denied the request for ${label}.` : `Revoked the approval of ${label}.`,
      );
    }
  }
  function actorText(actor) {
    var agent = /^(?:agent|trusted):(.+)$/.exec(actor || "");
    if (agent) return agent[1];
    return /^operator/.test(actor || "") ? "You" : actor;
  }
  var last = "";
  /** Redraws only what changed, so a background refresh never moves the keyboard focus. */
  function load(isForced) {
    if (!token) {
      say("Open the address vault serve printed: it carries the operator token after #.", true);
      return Promise.resolve();
    }
    return Promise.all([
      api("GET", "/api/grants"),
      api("GET", "/api/items"),
      api("GET", "/api/audit?limit=50"),
    ]).then(
      (all) => {
        var snapshot = JSON.stringify(all);
        if (snapshot === last && !isForced) return;
        last = snapshot;
        var grants = all[0].grants.filter((g) => g.status === "pending" || g.status === "active");
        fill("grants", grants, grantRow);
        fill("items", all[1].items, (tr, i) => {
          var th = el("th", i.name);
          th.scope = "row";
          tr.appendChild(th);
          cell(tr, i.allowed_hosts.join(", "));
          cell(tr, i.inject);
          cell(tr, i.username);
          cell(tr, `…${i.last4}`);
        });
        fill("audit", all[2].events, (tr, e) => {
          var time = el("time", when(e.at));
          time.dateTime = e.at;
          var td = el("td");
          td.appendChild(time);
          cell(tr, td);
          cell(tr, actorText(e.actor));
          cell(tr, String(e.action).replace(/_/g, " "));
          cell(tr, e.item_name);
          cell(tr, e.host);
          cell(tr, e.reason);
        });
      },
      (e) => {
        say(e.message, true);
      },
    );
  }
  load(true);
  setInterval(() => {
    if (!document.hidden) load(false);
  }, 5000);
})();
