// The console's audit and access sections (after console-inbox.js).
"use strict";
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
      // A list of words reads as words; a list of objects (a policy's saved rules) as JSON.
      var text = Array.isArray(value)
        ? value
            .map((entry) => (typeof entry === "object" && entry !== null ? JSON.stringify(entry) : entry))
            .join(", ")
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
function exportName(extension) {
  return `latch-audit-${environment}-${new Date().toISOString().slice(0, 10)}.${extension}`;
}
/**
 * Downloads the filtered view (every page, not only the ones loaded) as the server writes it
 * (GET /api/audit/export: members and clients by name, no ids or hashes, CSV cells that a
 * spreadsheet would read as formulas made inert). Exporting is an owner's, admin's or auditor's.
 * One export holds the newest 10,000 events of a view: when the server left older ones out
 * (X-Latch-Truncated), the message says so, and from when the file starts.
 */
function exportAudit(control, format, type, label) {
  act(control, () =>
    fetch(`/api/audit/export?${auditQuery("")}&format=${format}`, {
      credentials: "same-origin",
      cache: "no-store",
    }).then((response) => {
      if (!response.ok) {
        return response.json().then((json) => {
          var failure = new Error(describeError(response.status, json));
          failure.code = json?.error?.code;
          failure.body = json;
          throw failure;
        });
      }
      var count = response.headers.get("x-latch-events") || "0";
      var isTruncated = response.headers.get("x-latch-truncated") === "true";
      var oldest = response.headers.get("x-latch-oldest-at");
      return response.text().then((text) => {
        downloadText(exportName(format), text, type);
        say(
          isTruncated
            ? `Exported ${count} events as ${label}: only the newest ${count} of this view, back to ${oldest ? when(oldest) : "the oldest in the file"}; older events were left out. Narrow the date range (From, To) to export them.`
            : `Exported ${count} events as ${label}.`,
        );
      });
    }),
  );
}
byId("audit-csv").addEventListener("click", (event) => {
  exportAudit(event.currentTarget, "csv", "text/csv", "CSV");
});
byId("audit-jsonl").addEventListener("click", (event) => {
  exportAudit(event.currentTarget, "jsonl", "application/jsonl", "JSON Lines");
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
  // Another member's session is ended by who may manage members (the server judges the roles).
  else if (session.email !== me.email && !may("members.write")) action.textContent = "—";
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
  confirmStep(revokeOthers, "Sign out every other session of yours?", "Sign them out", () =>
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

/* ---------- deleting the organisation (owner only; spec 4.3 DELETE /api/orgs) ---------- */
var deleteOrgForm = byId("delete-org-form");
var currentOrganisation = null;
// biome-ignore lint/correctness/noUnusedVariables: console.js shows it with the account
function showDeleteOrganisation(account) {
  var current =
    account.organisation && (account.organisations || []).filter((o) => o.id === account.organisation.id)[0];
  currentOrganisation = current || null;
  deleteOrgForm.hidden = !current || !may("org.manage");
  byId("delete-org-name").textContent = current ? current.name : "";
}
onSubmit(deleteOrgForm, () => {
  var field = byId("delete-org-confirm");
  if (!currentOrganisation) return;
  if (field.value !== currentOrganisation.name) {
    return refuse(field, `Type the organisation's name exactly: ${currentOrganisation.name}`);
  }
  var name = currentOrganisation.name;
  busy(
    deleteOrgForm,
    api("DELETE", "/api/orgs", { confirm_name: field.value }).then(() => {
      say(`Deleted ${name} and everything in it.`);
      location.assign("/console");
    }),
    field,
  );
});
