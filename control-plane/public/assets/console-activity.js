// The console's inbox, audit and access sections (after console-clients.js).
"use strict";
/* ---------- inbox ---------- */
var POLICY_TEXT = { prompt: "for one call", session: "for 8 hours", item_standing: "until revoked" };
var DECISIONS = [
  ["prompt", "Approve once"],
  ["session", "8 hours"],
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
    var snapshot = JSON.stringify(answer) + environment;
    if (snapshot === lastInbox) return;
    lastInbox = snapshot;
    var here = approvals.filter((g) => inEnvironment(g.environment_id));
    var asking = requests.filter((n) => inEnvironment(n.environment));
    elsewhereNote(
      "inbox-elsewhere",
      count - here.length - asking.length,
      "request waiting",
      "requests waiting",
    );
    renderInbox(here, asking);
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
/** The agent by the name it was issued or registered with; its id only as a tooltip. */
function agentCell(name, id) {
  var cell = el("td", name || agentName(id));
  if (id) cell.title = id;
  return cell;
}
/**
 * The Inbox's "Make a rule from this" for a pending request: the Policies form prefilled with its
 * agent (by client id, which no other client can take), credential, host, method and path.
 */
function policyRuleLink(grant) {
  var query = new URLSearchParams({ agent: grant.agent_id, name: grant.agent_name || grant.agent_id });
  if (grant.item_name) query.set("item", grant.item_name);
  if (grant.call) {
    query.set("host", grant.call.host);
    query.set("method", grant.call.method);
    query.set("path", grant.call.path.split("?")[0]);
  }
  var link = el("a", "Make a rule from this", "rule-link");
  link.href = `#policies?${query}`;
  link.setAttribute(
    "aria-label",
    `Make a rule from this: ${grant.item_name} for ${grant.agent_name || grant.agent_id}`,
  );
  return link;
}

function approvalRow(grant) {
  var label = `${grant.item_name} for ${grant.agent_name || agentName(grant.agent_id)}`;
  var decide = el("td", null, "actions-cell");
  DECISIONS.forEach((decision) => {
    var b = button(
      decision[1],
      `${decision[0] === "session" ? "Approve for 8 hours" : decision[1]}: ${label}`,
      decision[0] !== "prompt",
    );
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
  // A pending request is denied (the grant endpoint's revoke); it never becomes usable.
  var deny = button("Deny", `Deny: ${label}`, true);
  deny.classList.add("deny");
  deny.setAttribute("data-key", `${grant.grant_id}:deny`);
  deny.addEventListener("click", () => {
    act(deny, () =>
      api("POST", `/api/grants/${enc(grant.grant_id)}/revoke`).then(() =>
        inboxChanged(`Denied the request for ${label}.`),
      ),
    );
  });
  decide.appendChild(deny);
  decide.appendChild(policyRuleLink(grant));
  return row([
    rowHeader(grant.item_name),
    grant.environment_id,
    agentCell(grant.agent_name, grant.agent_id),
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
    // An agent that named only the credential named no host: the operator gives it when storing.
    need.host || "not named yet",
    agentCell(need.client_name, need.client_id),
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
      say(
        `Approved ${grant.item_name} for ${grant.agent_name || agentName(grant.agent_id)} ${POLICY_TEXT[policy]}.`,
      );
      return loadInbox(false);
    }),
    field,
  );
});
loaders.inbox = () => loadInbox(false);
// Polling is the fallback: while the live stream is open (console-live.js) it redraws the inbox.
setInterval(() => {
  if (!document.hidden && !window.latchLiveInbox?.isOpen) loadInbox(true).catch(fail);
}, 5000);
window.addEventListener("DOMContentLoaded", () => {
  if (currentSection !== "inbox") loadInbox(false).catch(fail);
});

/* ---------- audit ---------- */
/** Detail keys that mean nothing to a person (internal ids, hashes): never shown or exported. */
var HIDDEN_DETAIL = /(^|_)(hash|sha256|jti|grant_id)$|^tool_id$/;
/** The actions an operator filters by; the list grows with the actions the events show. */
var knownActions = {};
/** The events shown (the filtered view, every page loaded), for the export. */
var auditEvents = [];
var auditNext = null;
function actorText(event) {
  if (event.actor_name) return event.actor_name;
  if (event.actor === "system") return "Latch";
  var client = /^(agent|trusted):(.+)$/.exec(event.actor || "");
  return client ? agentName(client[2]) : event.actor;
}
function actionText(action) {
  return String(action || "").replace(/_/g, " ");
}
/** The event's details a person reads: ids of agents as names, no hashes or internal ids. */
function readableDetail(detail) {
  var out = {};
  Object.keys(detail || {}).forEach((key) => {
    if (HIDDEN_DETAIL.test(key)) return;
    var value = detail[key];
    if (/^(agent_id|client_id)$/.test(key) && typeof value === "string") {
      out[key.replace(/_id$/, "")] = agentName(value);
    } else out[key] = value;
  });
  return out;
}
function detailText(detail) {
  var readable = readableDetail(detail);
  return Object.keys(readable)
    .map((key) => {
      var value = readable[key];
      var text = Array.isArray(value)
        ? value.join(", ")
        : typeof value === "string"
          ? value
          : JSON.stringify(value);
      return `${key.replace(/_/g, " ")}: ${text}`;
    })
    .join("; ");
}
/** The filter form's agent choices: every client of the organisation by name. */
// biome-ignore lint/correctness/noUnusedVariables: console-clients.js calls it whenever the clients change
function auditClientOptions() {
  var select = byId("audit-client");
  var chosen = select.value;
  var options = [el("option", "Any")];
  options[0].value = "";
  issued.forEach((client) => {
    var option = el("option", `${client.name} (${client.environment})`);
    option.value = client.client_id;
    options.push(option);
  });
  select.replaceChildren.apply(select, options);
  select.value = chosen;
}
function auditActionOptions() {
  var select = byId("audit-action");
  var chosen = select.value;
  var options = [el("option", "Any")];
  options[0].value = "";
  Object.keys(knownActions)
    .sort()
    .forEach((action) => {
      var option = el("option", actionText(action));
      option.value = action;
      options.push(option);
    });
  select.replaceChildren.apply(select, options);
  select.value = chosen;
}
/** The day a date field names, as the instant it starts (local time); `nextDay` for an end. */
function dayStart(value, nextDay) {
  if (!value) return "";
  var day = new Date(`${value}T00:00:00`);
  if (nextDay) day.setDate(day.getDate() + 1);
  return Number.isNaN(day.getTime()) ? "" : day.toISOString();
}
function auditQuery(before) {
  var query = new URLSearchParams({ environment: environment });
  var fields = {
    client_id: byId("audit-client").value,
    item_name: byId("audit-item").value.trim(),
    action: byId("audit-action").value,
    since: dayStart(byId("audit-since").value, false),
    until: dayStart(byId("audit-until").value, true),
    before: before || "",
  };
  Object.keys(fields).forEach((key) => {
    if (fields[key]) query.set(key, fields[key]);
  });
  return query.toString();
}
/** Loads the first page of the filtered view, or with `isMore` the next older page after it. */
function loadAudit(isMore) {
  var clients = issued.length ? Promise.resolve() : loaders.clients();
  return clients
    .then(() => api("GET", `/api/audit?${auditQuery(isMore ? auditNext : "")}`))
    .then((answer) => {
      auditEvents = isMore ? auditEvents.concat(answer.events) : answer.events;
      auditNext = answer.next_before;
      auditEvents.forEach((event) => {
        knownActions[event.action] = true;
      });
      auditActionOptions();
      fillTable("events", auditEvents.map(eventRow), "events-empty");
      byId("audit-more-row").hidden = !auditNext;
      return answer.events.length;
    });
}
function eventRow(event) {
  return row([
    timeCell(event.at),
    event.environment,
    actorText(event),
    actionText(event.action),
    event.item_name,
    event.host,
    event.reason,
    el("td", detailText(event.detail), "detail"),
  ]);
}
/** The view as export rows: the columns the table shows, the details without hidden keys. */
function exportRows() {
  return auditEvents.map((event) => ({
    at: event.at,
    environment: event.environment,
    who: actorText(event),
    actor: event.actor,
    action: event.action,
    credential: event.item_name,
    host: event.host,
    reason: event.reason,
    detail: readableDetail(event.detail),
  }));
}
function exportName(extension) {
  return `latch-audit-${environment}-${new Date().toISOString().slice(0, 10)}.${extension}`;
}
byId("audit-csv").addEventListener("click", () => {
  var rows = exportRows();
  var columns = ["at", "environment", "who", "actor", "action", "credential", "host", "reason", "detail"];
  var lines = [columns.join(",")].concat(rows.map((r) => columns.map((c) => csvField(r[c])).join(",")));
  downloadText(exportName("csv"), `${lines.join("\r\n")}\r\n`, "text/csv");
  say(`Exported ${rows.length} events as CSV.`);
});
byId("audit-jsonl").addEventListener("click", () => {
  var rows = exportRows();
  downloadText(exportName("jsonl"), rows.map((r) => `${JSON.stringify(r)}\n`).join(""), "application/jsonl");
  say(`Exported ${rows.length} events as JSON Lines.`);
});
var auditForm = byId("audit-form");
onSubmit(auditForm, () => {
  busy(
    auditForm,
    loadAudit(false).then((count) => {
      say(count === 1 ? "1 event." : `${count} events${auditNext ? " (older ones below)" : ""}.`);
    }),
  );
});
byId("audit-clear").addEventListener("click", () => {
  auditForm.reset();
  busy(
    auditForm,
    loadAudit(false).then((count) => {
      say(`Filters cleared: ${count} events.`);
    }),
  );
});
var auditMore = byId("audit-more");
auditMore.addEventListener("click", () => {
  act(auditMore, () =>
    loadAudit(true).then((count) => {
      say(`${count} older events.`);
    }),
  );
});
/**
 * The ledger's state under the heading: "Chain verified up to #N" and the last checkpoint, or the
 * first seq where it does not hold. Checked once each time the section opens (it reads the whole
 * chain), not on every filter.
 */
function loadChain() {
  var line = byId("audit-chain");
  return api("GET", "/api/audit/verify").then((answer) => {
    var checkpoint = answer.last_checkpoint;
    var signed = checkpoint ? ` Last signed checkpoint: #${checkpoint.seq}, ${when(checkpoint.at)}.` : "";
    line.classList.toggle("error", !answer.ok);
    line.textContent = answer.ok
      ? answer.rows === 0
        ? "The audit chain is empty."
        : `Chain verified up to #${answer.last_seq}.${signed}`
      : `The audit chain does not hold at #${answer.first_bad_seq}: ${answer.problem || "a row was changed"}.${signed}`;
  });
}
loaders.audit = () => Promise.all([loadAudit(false), loadChain()]);

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
    deviceName(session.user_agent),
    timeCell(session.created_at),
    timeCell(session.last_access_at),
    action,
  ]);
}
/** A user agent as a person names a device: "Chrome 131 on macOS". */
function deviceName(agent) {
  if (!agent) return "Unknown device";
  var browser =
    /(Edg|OPR|Firefox|SamsungBrowser)\/(\d+)/.exec(agent) ||
    /(Chrome|Chromium|CriOS)\/(\d+)/.exec(agent) ||
    /Version\/(\d+)[^ ]* (?:Mobile\/\S+ )?Safari/.exec(agent);
  var names = { Edg: "Edge", OPR: "Opera", CriOS: "Chrome", SamsungBrowser: "Samsung Internet" };
  var browserText = browser
    ? browser.length === 3
      ? `${names[browser[1]] || browser[1]} ${browser[2]}`
      : `Safari ${browser[1]}`
    : // Not a browser (a script, a command line): its own first word, as it names itself.
      agent.split(/[\s/]/)[0].slice(0, 40) || "Unknown device";
  var os = /iPhone|iPad/.test(agent)
    ? "iOS"
    : /Android/.test(agent)
      ? "Android"
      : /Mac OS X|Macintosh/.test(agent)
        ? "macOS"
        : /Windows/.test(agent)
          ? "Windows"
          : /CrOS/.test(agent)
            ? "ChromeOS"
            : /Linux/.test(agent)
              ? "Linux"
              : "";
  return os ? `${browserText} on ${os}` : browserText;
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
