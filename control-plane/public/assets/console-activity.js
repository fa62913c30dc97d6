// The console's inbox, audit and access sections (after console-clients.js).
"use strict";
/* ---------- inbox ---------- */
var POLICY_TEXT = { prompt: "for one call", session: "for 8 hours", item_standing: "until revoked" };
var DECISIONS = [
  ["prompt", "Approve once"],
  ["session", "Approve 8 hours"],
  ["item_standing", "Always allow"],
];
var lastInbox = "";
var waitingCount = -1;

function loadInbox(isBackground) {
  return api("GET", "/api/inbox").then((answer) => {
    var approvals = answer.approvals || [],
      requests = answer.requests || [];
    var count = approvals.length + requests.length;
    byId("inbox-count").textContent = count ? `(${count})` : "";
    if (isBackground && waitingCount >= 0 && count > waitingCount) {
      say(count === 1 ? "1 request is waiting in the inbox." : `${count} requests are waiting in the inbox.`);
    }
    waitingCount = count;
    var snapshot = JSON.stringify(answer);
    if (snapshot === lastInbox) return;
    lastInbox = snapshot;
    renderInbox(approvals, requests);
  });
}
/** Redraws the inbox; a focused decision button keeps focus across a background redraw. */
function renderInbox(approvals, requests) {
  var focused = document.activeElement?.getAttribute("data-key");
  fillTable("approvals", approvals.map(approvalRow), "approvals-empty");
  fillTable("requests", requests.map(requestRow), "requests-empty");
  if (!focused) return;
  var again = byId("inbox").querySelector(`[data-key="${CSS.escape(focused)}"]`);
  if (again) again.focus();
  else byId("inbox-heading").focus();
}
function approvalRow(grant) {
  var label = `${grant.item_name} for ${agentName(grant.agent_id)}`;
  var decide = el("td", null, "actions-cell");
  DECISIONS.forEach((decision) => {
    var b = button(decision[1], `${decision[1]}: ${label}`, decision[0] !== "prompt");
    b.setAttribute("data-key", `${grant.grant_id}:${decision[0]}`);
    b.addEventListener("click", () => {
      act(b, () =>
        api("POST", `/api/grants/${enc(grant.grant_id)}/approve`, { policy: decision[0] }).then(() =>
          inboxChanged(`Approved ${label} ${POLICY_TEXT[decision[0]]}.`),
        ),
      );
    });
    decide.appendChild(b);
  });
  var revoke = button("Revoke", `Revoke: ${label}`, true);
  revoke.setAttribute("data-key", `${grant.grant_id}:revoke`);
  revoke.addEventListener("click", () => {
    act(revoke, () =>
      api("POST", `/api/grants/${enc(grant.grant_id)}/revoke`).then(() =>
        inboxChanged(`Revoked the request for ${label}.`),
      ),
    );
  });
  decide.appendChild(revoke);
  return row([
    rowHeader(grant.item_name),
    grant.environment_id,
    agentName(grant.agent_id),
    requestCell(
      grant.call,
      (call, path) =>
        "Once: exactly this request. 8 hours: " +
        call.method +
        " on " +
        call.host +
        " under " +
        path.slice(0, path.lastIndexOf("/") + 1) +
        ". Always: every call.",
    ),
    grant.task_description,
    timeCell(grant.created_at),
    decide,
  ]);
}
/**
 * What approving covers, shown in full (DECISIONS "Approvals"): the exact request with its body
 * digest, what 8 hours would cover, or, for a grant asked without a request, every call.
 */
function requestCell(call, coverage) {
  var cell = el("td", null, "request-cell");
  if (!call) {
    cell.appendChild(el("strong", "Any call"));
    cell.appendChild(el("span", " with this credential: the agent named no request.", "hint"));
    return cell;
  }
  var line = el("div", null, "request-line");
  line.appendChild(el("code", call.method, "method"));
  line.appendChild(document.createTextNode(" "));
  line.appendChild(el("code", call.host + call.path, "target"));
  cell.appendChild(line);
  cell.appendChild(el("div", call.body_sha256 ? `Body SHA-256 ${call.body_sha256}` : "No body", "digest"));
  cell.appendChild(el("div", coverage(call, call.path.split("?")[0]), "hint"));
  return cell;
}
function inboxChanged(message) {
  say(message);
  byId("inbox-heading").focus();
  return loadInbox(false);
}
/** The collect page's path when its address is on this site, else "". */
function sameSitePath(address) {
  try {
    const url = new URL(address, location.href);
    return url.origin === location.origin ? url.pathname + url.search : "";
  } catch {
    return "";
  }
}
/**
 * The connect card (spec 3.2): a connect request is answered by connecting the account. Starts the
 * connect for the app credential the request names (<ITEM>_REFRESH -> <ITEM>) and opens the
 * provider; the callback comes back to #vault and allows the agent that asked.
 */
function connectButton(need) {
  var item = (need.suggested_name || "").replace(/_REFRESH$/, "");
  var connect = button(`Connect ${need.provider}`, `Connect the ${need.provider} account for ${item}`);
  connect.setAttribute("data-key", `${need.need_id}:connect`);
  connect.addEventListener("click", () => {
    act(connect, () =>
      api("POST", `/api/integrations/${enc(need.provider)}/start`, {
        item_name: item,
        environment: need.environment,
        need_id: need.need_id,
      }).then((answer) => {
        location.assign(answer.authorize_url);
      }),
    );
  });
  return connect;
}
function requestRow(need) {
  var answer = el("td", null, "actions-cell");
  var path = need.kind === "secret" ? sameSitePath(need.collect_url || "") : "";
  if (path) {
    const link = el("a", "Enter the value");
    link.href = path;
    link.setAttribute("aria-label", `Enter the value for ${need.suggested_name || need.host}`);
    answer.appendChild(link);
  }
  if (need.kind === "connect" && need.provider) answer.appendChild(connectButton(need));
  var deny = button("Deny", `Deny the request for ${need.suggested_name || need.host}`, true);
  deny.setAttribute("data-key", `${need.need_id}:deny`);
  deny.addEventListener("click", () => {
    act(deny, () =>
      api("POST", `/api/need-items/${enc(need.need_id)}/deny`).then(() =>
        inboxChanged(`Denied the request for ${need.suggested_name || need.host}.`),
      ),
    );
  });
  answer.appendChild(deny);
  return row([
    need.kind,
    need.suggested_name,
    need.host,
    agentName(need.client_name || ""),
    requestCell(
      need.call,
      () => "Storing the value approves exactly this request once; Always allow: every call.",
    ),
    need.message,
    timeCell(need.created_at),
    answer,
  ]);
}
var codeForm = byId("code-form");
onSubmit(codeForm, () => {
  var field = byId("approval-code"),
    code = field.value.replace(/\s+/g, ""),
    policy = byId("code-policy").value;
  if (!/^\d{8}$/.test(code)) return refuse(field, "An approval code has 8 digits.");
  busy(
    codeForm,
    api("POST", "/api/grants/approve-by-code", { code: code, policy: policy }).then((answer) => {
      field.value = "";
      var grant = answer.grant;
      say(`Approved ${grant.item_name} for ${agentName(grant.agent_id)} ${POLICY_TEXT[policy]}.`);
      return loadInbox(false);
    }),
    field,
  );
});
loaders.inbox = () => loadInbox(false);
setInterval(() => {
  if (!document.hidden) loadInbox(true).catch(fail);
}, 5000);
window.addEventListener("DOMContentLoaded", () => {
  if (currentSection !== "inbox") loadInbox(false).catch(fail);
});

/* ---------- audit ---------- */
function actorText(actor) {
  var agent = /^agent:(.+)$/.exec(actor || "");
  return agent ? `agent ${agentName(agent[1])}` : actor;
}
function detailText(detail) {
  return Object.keys(detail || {})
    .map((key) => {
      var value = detail[key];
      return `${key}: ${typeof value === "string" ? value : JSON.stringify(value)}`;
    })
    .join("; ");
}
function loadAudit() {
  var query = new URLSearchParams();
  var item = byId("audit-item").value.trim(),
    client = byId("audit-client")
      .value.trim()
      .replace(/^agent:/, "");
  if (item) query.set("item_name", item);
  if (client) query.set("client_id", client);
  var suffix = query.toString();
  return api("GET", `/api/audit${suffix ? `?${suffix}` : ""}`).then((answer) => {
    fillTable("events", answer.events.map(eventRow), "events-empty");
    return answer.events.length;
  });
}
function eventRow(event) {
  return row([
    timeCell(event.at),
    event.environment,
    actorText(event.actor),
    event.action,
    event.item_name,
    event.host,
    event.reason,
    detailText(event.detail),
  ]);
}
var auditForm = byId("audit-form");
onSubmit(auditForm, () => {
  busy(
    auditForm,
    loadAudit().then((count) => {
      say(count === 1 ? "1 event." : `${count} events.`);
    }),
  );
});
byId("audit-clear").addEventListener("click", () => {
  auditForm.reset();
  busy(
    auditForm,
    loadAudit().then((count) => {
      say(`Filters cleared: ${count} events.`);
    }),
  );
});
loaders.audit = loadAudit;

/* ---------- access ---------- */
function loadAccess() {
  return api("GET", "/api/access").then((answer) => {
    fillTable(
      "operators",
      answer.operators.map((operator) =>
        row([rowHeader(operator.email), operator.role, timeCell(operator.created_at)]),
      ),
    );
    fillTable("sessions", answer.sessions.map(sessionRow));
    revokeOthers.disabled = answer.sessions.every((s) => s.current);
  });
}
function sessionRow(session) {
  var action = el("td", null, "actions-cell");
  if (session.current) action.textContent = "This session";
  else {
    const revoke = button(
      "Revoke",
      `Revoke the session of ${session.email} from ${when(session.created_at)}`,
      true,
    );
    revoke.addEventListener("click", () => {
      act(revoke, () =>
        api("POST", `/api/sessions/${enc(session.session_id)}/revoke`).then(() =>
          accessChanged(`Signed out that session of ${session.email}.`),
        ),
      );
    });
    action.appendChild(revoke);
  }
  return row([
    rowHeader(session.email),
    session.user_agent || "Unknown browser",
    timeCell(session.created_at),
    timeCell(session.last_access_at),
    action,
  ]);
}
function accessChanged(message) {
  say(message);
  byId("access-heading").focus();
  return loadAccess();
}
var revokeOthers = byId("revoke-others");
revokeOthers.addEventListener("click", () => {
  confirmStep(revokeOthers, "Sign out every other session of this organisation?", "Sign them out", () =>
    api("POST", "/api/sessions/revoke-others").then((answer) => {
      var n = answer.revoked;
      return accessChanged(
        typeof n === "number"
          ? `Signed out ${n}${n === 1 ? " other session." : " other sessions."}`
          : "Signed out the other sessions.",
      );
    }),
  );
});
loaders.access = loadAccess;
