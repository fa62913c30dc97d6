// The console of `vault serve`: credentials without values, approvals with approve, deny and revoke
// buttons, recent activity. The operator token arrives in the URL fragment (never sent to a server
// or a log) and is kept in sessionStorage for this tab only, until the vault stops answering: a
// network error or a 401 drops it and stops the refresh, since whatever takes the freed port next
// must not receive it. Values reach the page as text only.
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
  var STOPPED =
    "The vault stopped or no longer accepts this page's token. Open the address vault serve printed.";
  var refresh;
  /** Forgets the operator token and stops the refresh: nothing more goes to this address. */
  function forgetToken() {
    token = null;
    sessionStorage.removeItem("latch-operator-token");
    clearInterval(refresh);
    return new Error(STOPPED);
  }
  function api(method, path, body) {
    if (!token) return Promise.reject(new Error(STOPPED));
    return fetch(path, {
      method: method,
      headers: Object.assign(
        { authorization: `Bearer ${token}` },
        body ? { "content-type": "application/json" } : {},
      ),
      body: body ? JSON.stringify(body) : undefined,
      cache: "no-store",
    }).then(
      (r) => {
        if (r.status === 401) throw forgetToken();
        return r
          .json()
          .catch(() => ({}))
          .then((j) => {
            if (!r.ok) throw new Error(j.error?.message || `The vault answered HTTP ${r.status}.`);
            return j;
          });
      },
      () => {
        throw forgetToken();
      },
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
    labelCells(body.closest("table"));
    byId(`${id}-empty`).hidden = rows.length > 0;
    body.closest(".table-wrap").hidden = rows.length === 0;
  }
  /** A table drawn as cards on a phone: its cells name their column, its rows keep table roles. */
  function labelCells(table) {
    if (!table.classList.contains("cards")) return;
    // The table's own rows only (table.rows): a body's form fields are a table of their own.
    var names = Array.prototype.map.call(table.tHead.rows[0].cells, (th) => th.textContent.trim());
    table.setAttribute("role", "table");
    [table.tHead].concat(Array.prototype.slice.call(table.tBodies)).forEach((g) => {
      g.setAttribute("role", "rowgroup");
    });
    Array.prototype.forEach.call(table.rows, (tr) => {
      var isHead = tr.parentNode === table.tHead;
      tr.setAttribute("role", "row");
      Array.prototype.forEach.call(tr.cells, (cell, index) => {
        cell.setAttribute("role", isHead ? "columnheader" : cell.tagName === "TH" ? "rowheader" : "cell");
        if (!isHead && names[index]) cell.setAttribute("data-label", names[index]);
      });
    });
  }

  function button(text, label, isSecondary) {
    var b = el("button", text, isSecondary ? "secondary" : "");
    b.type = "button";
    if (label) b.setAttribute("aria-label", label);
    return b;
  }
  /** Decisions a background refresh moved under the pointer (/assets/shifted-clicks.js). */
  var grantShifts = shiftGuard("grants", () =>
    say(
      "The approvals changed just before that click: nothing was decided. Check the request, then choose again.",
      true,
    ),
  );
  /**
   * The "Approve unread" question open, by its opener's data-key, so that a redraw keeps it open;
   * `reopen` opens it again, by data-key, as the rows were last drawn.
   */
  var unreadOpen = null;
  var reopen = {};
  /** Runs `action` from button `b` (disabled meanwhile); then the list reloads, focus on its heading. */
  function decide(b, action, done) {
    b.disabled = true;
    action().then(
      () => {
        unreadOpen = null;
        say(done);
        byId("h-grants").focus();
        return load(true);
      },
      (e) => {
        b.disabled = false;
        say(e.message, true);
      },
    );
  }
  /**
   * The second step of approving what the operator could not read (the hosted console's
   * confirmStep): the cell shows the question with "Approve unread" and Cancel, focus on Cancel;
   * Cancel puts the decisions back.
   */
  function askUnread(opener, action, done, isRedrawn) {
    var key = opener.getAttribute("data-key");
    unreadOpen = key;
    var container = opener.parentNode;
    var previous = Array.prototype.slice.call(container.childNodes);
    var question =
      "Only the first 64 KiB of this request's body is shown. Approve it without reading the rest?";
    var group = el("span", null, "confirm");
    group.setAttribute("role", "group");
    group.setAttribute("aria-label", question);
    var yes = button("Approve unread", null, false);
    yes.classList.add("danger");
    yes.setAttribute("data-key", `${key}:unread`);
    var no = button("Cancel", null, true);
    no.setAttribute("data-key", `${key}:cancel`);
    group.append(el("span", question, "question"), yes, no);
    container.replaceChildren(group);
    no.addEventListener("click", () => {
      unreadOpen = null;
      container.replaceChildren.apply(container, previous);
      opener.focus();
    });
    yes.addEventListener("click", (event) => {
      if (grantShifts.isShifted(event, yes)) return;
      decide(yes, action, done);
    });
    // Drawn again by a redraw, the focus stays where the redraw keeps it.
    if (!isRedrawn) no.focus();
  }
  /**
   * A decision button; after it, the list reloads and focus returns to the approvals heading. An
   * approval of a body shown cut at 64 KiB (`isUnread`) approves what the operator could not read,
   * so that is asked first.
   */
  function decision(td, key, text, label, isSecondary, action, done, isUnread) {
    var b = button(text, label, isSecondary);
    if (text === "Deny") b.classList.add("deny");
    b.setAttribute("data-key", key);
    if (isUnread) reopen[key] = () => askUnread(b, action, done, true);
    b.addEventListener("click", (event) => {
      if (grantShifts.isShifted(event, b)) return;
      if (isUnread) askUnread(b, action, done);
      else decide(b, action, done);
    });
    td.appendChild(b);
  }
  function requestCell(g, label) {
    var td = el("td", null, "request-cell");
    if (g.after_deny_at && g.status === "pending") {
      td.appendChild(el("p", `Asked again after a Deny (${when(g.after_deny_at)})`, "after-deny"));
    }
    // The body is kept for requests waiting; an approval in force shows what it covers.
    td.appendChild(requestView(g.call, g.status === "pending" ? g.body : null, label));
    return td;
  }
  var LASTS = { prompt: "One call", session: "8 hours", item_standing: "Always", folder_standing: "Always" };
  function timeCell(iso, absent) {
    var td = el("td", iso ? null : absent);
    if (iso) {
      const time = el("time", when(iso));
      time.dateTime = iso;
      td.appendChild(time);
    }
    return td;
  }
  function grantRow(tr, g) {
    var agent = g.agent_name || g.agent_id;
    var label = `${g.item_name} for ${agent}`;
    var th = el("th", g.item_name);
    th.scope = "row";
    tr.appendChild(th);
    cell(tr, agent);
    cell(tr, requestCell(g, label));
    cell(tr, g.status);
    cell(tr, g.status === "pending" ? "" : LASTS[g.policy] || g.policy);
    cell(tr, timeCell(g.approved_at, ""));
    cell(tr, timeCell(g.last_used_at, g.status === "pending" ? "" : "Not yet"));
    cell(
      tr,
      timeCell(
        g.expires_at,
        g.status === "pending" ? "" : g.policy === "prompt" ? "After one call" : "When revoked",
      ),
    );
    var td = cell(tr, el("td"), "actions-cell");
    if (g.status === "pending") {
      const isUnread = Boolean(g.body?.is_cut);
      decision(
        td,
        `${g.grant_id}:once`,
        "Approve once",
        `Approve once: ${label}`,
        false,
        () => api("POST", "/api/grants", { grant_id: g.grant_id, scope: "once" }),
        `Approved ${label} for one call.`,
        isUnread,
      );
      decision(
        td,
        `${g.grant_id}:session`,
        "8 hours",
        `Approve for 8 hours: ${label}`,
        true,
        () => api("POST", "/api/grants", { grant_id: g.grant_id, scope: "session" }),
        `Approved ${label} for 8 hours.`,
        isUnread,
      );
    }
    if (g.status === "pending" || g.status === "active") {
      const isPending = g.status === "pending";
      decision(
        td,
        `${g.grant_id}:${isPending ? "deny" : "revoke"}`,
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
  /** The grants as last loaded; the filter shows the ones whose agent, credential or host match. */
  var allGrants = [];
  /**
   * Redraws the approvals (newest first). A redraw keeps the focus on the same decision (by
   * data-key; the heading if it is gone) and an "Approve unread" question open; after a background
   * refresh (`isBackground`), a decision now where another was takes no click for a second.
   */
  function renderGrants(isBackground) {
    var before = isBackground === true ? grantShifts.places() : [];
    var focused = byId("grants").contains(document.activeElement)
      ? document.activeElement.getAttribute("data-key")
      : null;
    var query = byId("grants-filter").value.trim().toLowerCase();
    var shown = allGrants.filter((g) =>
      [g.agent_name || g.agent_id, g.item_name, g.call ? g.call.host : ""].some(
        (word) => !query || String(word).toLowerCase().indexOf(query) >= 0,
      ),
    );
    byId("grants-empty-text").textContent =
      allGrants.length && !shown.length
        ? "No approval matches the filter."
        : "No agent is waiting and nothing is approved.";
    reopen = {};
    fill("grants", shown, grantRow);
    if (unreadOpen && reopen[unreadOpen]) reopen[unreadOpen]();
    else unreadOpen = null;
    if (before.length) grantShifts.markShifted(before);
    if (!focused) return;
    var again = byId("grants").querySelector(`[data-key="${CSS.escape(focused)}"]`);
    if (again) again.focus();
    else byId("h-grants").focus();
  }
  byId("grants-filter").addEventListener("input", () => {
    renderGrants(false);
  });
  /** Redraws when anything changed; a background refresh keeps the focus on the same decision. */
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
        allGrants = all[0].grants.filter((g) => g.status === "pending" || g.status === "active");
        renderGrants(!isForced);
        fill("items", all[1].items, (tr, i) => {
          var th = el("th", i.name);
          th.scope = "row";
          tr.appendChild(th);
          cell(tr, i.allowed_hosts.join(", "));
          cell(tr, i.inject);
          cell(tr, i.username);
          cell(tr, `…${i.last4}`);
          cell(tr, timeCell(i.last_used_at, "Never"));
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
  refresh = setInterval(() => {
    if (!document.hidden) load(false);
  }, 5000);
})();
