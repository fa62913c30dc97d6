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
/**
 * The "Always allow" choice open in a row: which grant and which scope is picked, so a background
 * redraw of the inbox (a new request arriving) keeps it open as it was.
 */
var alwaysOpen = null;

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
  if (alwaysOpen && !approvals.some((g) => g.grant_id === alwaysOpen.grantId)) alwaysOpen = null;
  fillTable("pending-approvals", approvals.map(approvalRow), "pending-approvals-empty");
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
/** The hosts a credential reaches, as a sentence: "api.github.com", "a.example and b.example". */
function hostsText(hosts) {
  if (!hosts?.length) return "its hosts";
  return hosts.length === 1 ? hosts[0] : `${hosts.slice(0, -1).join(", ")} and ${hosts[hosts.length - 1]}`;
}
function approvalRow(grant) {
  var label = `${grant.item_name} for ${grant.agent_name || agentName(grant.agent_id)}`;
  var decide = el("td", null, "actions-cell");
  if (alwaysOpen && alwaysOpen.grantId === grant.grant_id) decide.appendChild(alwaysChooser(grant, label));
  else decide.append.apply(decide, decisionButtons(grant, label));
  var request = el("td", null, "request-cell");
  if (grant.after_deny_at) {
    // DECISIONS: within 10 minutes of a Deny the same call waits again, unmailed: say so.
    request.appendChild(el("p", `Asked again after a Deny (${when(grant.after_deny_at)})`, "after-deny"));
  }
  request.appendChild(requestView(grant.call, grant.body, label));
  if (grant.call) {
    request.appendChild(
      el(
        "div",
        `Once: exactly this request. 8 hours: ${grant.call.method} on ${grant.call.host} under ${pathPrefix(grant.call.path)}.`,
        "hint",
      ),
    );
  }
  return row([
    rowHeader(grant.item_name),
    grant.environment_id,
    agentCell(grant.agent_name, grant.agent_id),
    request,
    grant.task_description,
    timeCell(grant.created_at),
    decide,
  ]);
}
function approve(grant, label, policy, scope) {
  var body = scope ? { policy: policy, scope: scope } : { policy: policy };
  return api("POST", `/api/grants/${enc(grant.grant_id)}/approve`, body).then(() => {
    alwaysOpen = null;
    return inboxChanged(`Approved ${label} ${POLICY_TEXT[policy]}.`);
  });
}
function decisionButtons(grant, label) {
  var buttons = DECISIONS.map((decision) => {
    var b = button(
      decision[1],
      `${decision[0] === "session" ? "Approve for 8 hours" : decision[1]}: ${label}`,
      decision[0] !== "prompt",
    );
    b.setAttribute("data-key", `${grant.grant_id}:${decision[0]}`);
    b.addEventListener("click", () => {
      if (decision[0] === "item_standing") {
        // "Always" asks what always covers before anything is approved.
        alwaysOpen = { grantId: grant.grant_id, scope: grant.call ? "path_prefix" : "credential" };
        lastInbox = "";
        loadInbox(false)
          .then(() => {
            var first = byId("inbox").querySelector(`[data-key="${CSS.escape(`${grant.grant_id}:scope`)}"]`);
            if (first) first.focus();
          })
          .catch(fail);
        return;
      }
      act(b, () => approve(grant, label, decision[0]));
    });
    return b;
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
  buttons.push(deny);
  return buttons;
}
/**
 * "Always allow": what always covers, asked first. The request's method and host under its
 * path's prefix is the default; the whole credential is a choice of its own, its reach spelled
 * out. A request that named no call can only be allowed whole.
 */
function alwaysChooser(grant, label) {
  var group = el("fieldset", null, "always-choice");
  group.appendChild(el("legend", `Always allow ${label}:`));
  var name = `always-${grant.grant_id}`;
  var options = [];
  if (grant.call) {
    options.push([
      "path_prefix",
      `${grant.call.method} on ${grant.call.host} under ${pathPrefix(grant.call.path)}`,
      "Other methods and paths still ask you.",
    ]);
  }
  options.push([
    "credential",
    `The whole credential: any method, any path on ${hostsText(grant.allowed_hosts)}`,
    `The agent could then also delete or change anything ${grant.item_name} reaches, without asking.`,
  ]);
  options.forEach((option, index) => {
    var id = `${name}-${option[0]}`;
    var line = el("div", null, option[0] === "credential" ? "choice warning" : "choice");
    var radio = el("input");
    radio.type = "radio";
    radio.name = name;
    radio.id = id;
    radio.value = option[0];
    radio.checked = alwaysOpen.scope === option[0];
    if (index === 0) radio.setAttribute("data-key", `${grant.grant_id}:scope`);
    radio.addEventListener("change", () => {
      alwaysOpen.scope = option[0];
    });
    var text = el("label", option[1]);
    text.htmlFor = id;
    var note = el("div", option[2], "hint");
    note.id = `${id}-note`;
    radio.setAttribute("aria-describedby", note.id);
    line.append(radio, text, note);
    group.appendChild(line);
  });
  var confirm = button("Always allow", `Always allow, as chosen: ${label}`, false);
  confirm.setAttribute("data-key", `${grant.grant_id}:always-confirm`);
  confirm.addEventListener("click", () => {
    act(confirm, () => approve(grant, label, "item_standing", alwaysOpen.scope));
  });
  var cancel = button("Cancel", `Cancel always allow: ${label}`, true);
  cancel.addEventListener("click", () => {
    alwaysOpen = null;
    lastInbox = "";
    loadInbox(false)
      .then(() => {
        var opener = byId("inbox").querySelector(
          `[data-key="${CSS.escape(`${grant.grant_id}:item_standing`)}"]`,
        );
        if (opener) opener.focus();
      })
      .catch(fail);
  });
  group.append(confirm, cancel);
  return group;
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
  var request = el("td", null, "request-cell");
  request.appendChild(requestView(need.call, need.body, `${need.suggested_name} for ${need.client_name}`));
  request.appendChild(
    el(
      "div",
      "Storing the value approves exactly this request once; Always allow: more, as you choose.",
      "hint",
    ),
  );
  return row([
    need.kind,
    need.suggested_name,
    need.host,
    agentCell(need.client_name, need.client_id),
    request,
    need.message,
    timeCell(need.created_at),
    answer,
  ]);
}
var codeForm = byId("code-form");
onSubmit(codeForm, () => {
  var field = byId("approval-code"),
    code = field.value.replace(/\s+/g, ""),
    choice = byId("code-policy").value.split(":"),
    policy = choice[0];
  if (!/^\d{8}$/.test(code)) return refuse(field, "An approval code has 8 digits.");
  var body = choice[1] ? { code: code, policy: policy, scope: choice[1] } : { code: code, policy: policy };
  busy(
    codeForm,
    api("POST", "/api/grants/approve-by-code", body).then((answer) => {
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
setInterval(() => {
  if (!document.hidden) loadInbox(true).catch(fail);
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
function csvField(value) {
  var text =
    value === null || value === undefined ? "" : typeof value === "string" ? value : JSON.stringify(value);
  // A leading = + - @ would be a formula to a spreadsheet: quoted with a ' in front.
  if (/^[=+\-@\t\r]/.test(text)) text = `'${text}`;
  return /[",\r\n']/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
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
loaders.audit = () => loadAudit(false);

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
