// The operator console's browser scripts (spec 4.3): /assets/console.js (the shared helpers of
// assets.ts, then DOM helpers, section navigation, account, vault), /assets/console-clients.js and
// /assets/console-activity.js (inbox, audit, access). Classic scripts run in that order in one
// global scope; the console starts on DOMContentLoaded, once all three have run. Every value
// reaches the page as text (textContent, attributes), never as markup. The parts with regular
// expressions use String.raw so the browser code reads as it runs; no part may hold a backtick or
// a dollar-brace.

/** /assets/console.js (after COMMON): helpers, navigation, account, vault. */
export const CONSOLE_CORE = String.raw`
/* ---------- DOM helpers ---------- */
function el(tag, text, className) {
  var node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}
function button(text, label, isSecondary) {
  var b = el("button", text, isSecondary ? "secondary" : "");
  b.type = "button";
  if (label) b.setAttribute("aria-label", label);
  return b;
}
function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "";
}
function timeCell(iso) {
  var cell = el("td");
  if (!iso) return cell;
  var time = el("time", when(iso));
  time.dateTime = iso;
  cell.appendChild(time);
  return cell;
}
/** A table row from cells: a node is used as is, anything else becomes a text cell. */
function row(cells) {
  var tr = el("tr");
  cells.forEach(function (c) {
    tr.appendChild(c && c.nodeType ? c : el("td", c === undefined || c === null || c === "" ? "—" : c));
  });
  return tr;
}
function rowHeader(text) {
  var th = el("th", text);
  th.scope = "row";
  return th;
}
/** Replaces a table's rows; with emptyId, an empty table gives way to its "nothing here" line. */
function fillTable(id, rows, emptyId) {
  var body = byId(id).tBodies[0];
  body.replaceChildren.apply(body, rows);
  if (!emptyId) return;
  byId(emptyId).hidden = rows.length > 0;
  byId(id).parentNode.hidden = rows.length === 0;
}
function enc(id) {
  return encodeURIComponent(id);
}
/** An action from a button outside a form: disabled meanwhile; a failure goes to the status. */
function act(control, run) {
  control.disabled = true;
  return Promise.resolve().then(run).catch(fail).then(function () {
    control.disabled = false;
  });
}
/**
 * A destructive action's second step: the opener's container (a cell or a row of its own) shows
 * the question with a confirm and a cancel button; cancel puts the buttons back.
 */
function confirmStep(opener, question, confirmLabel, run) {
  var container = opener.parentNode;
  var previous = Array.prototype.slice.call(container.childNodes);
  var group = el("span", null, "confirm");
  group.setAttribute("role", "group");
  group.setAttribute("aria-label", question);
  var yes = button(confirmLabel, null, false);
  yes.classList.add("danger");
  var no = button("Cancel", null, true);
  group.append(el("span", question, "question"), yes, no);
  container.replaceChildren(group);
  function restore() {
    container.replaceChildren.apply(container, previous);
    opener.focus();
  }
  no.addEventListener("click", restore);
  yes.addEventListener("click", function () {
    act(yes, function () {
      return run().then(function () {
        if (group.isConnected) container.replaceChildren.apply(container, previous);
      });
    });
  });
  no.focus();
}
function markInvalid(field) {
  field.setAttribute("aria-invalid", "true");
  field.focus();
}
function clearInvalid(form) {
  Array.prototype.forEach.call(form.querySelectorAll("[aria-invalid]"), function (f) {
    f.removeAttribute("aria-invalid");
  });
}
function listOf(text) {
  return text.split(/[\s,]+/).filter(Boolean);
}

/* ---------- sections ---------- */
var SECTIONS = ["vault", "clients", "inbox", "audit", "access"];
/** Each section's loader (returns a promise), called whenever the section is shown. */
var loaders = {};
var currentSection = "";
function sectionInHash() {
  var name = location.hash.replace(/^#/, "").split("?")[0];
  return SECTIONS.indexOf(name) >= 0 ? name : "";
}
function showSection(name, shouldFocus) {
  currentSection = name;
  SECTIONS.forEach(function (s) {
    byId(s).hidden = s !== name;
  });
  Array.prototype.forEach.call(document.querySelectorAll("nav.sections a"), function (link) {
    if (link.getAttribute("href") === "#" + name) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  });
  if (loaders[name]) loaders[name]().catch(fail);
  if (!shouldFocus) return;
  say("");
  byId(name + "-heading").focus();
}
function route(shouldFocus) {
  var name = sectionInHash();
  if (name) showSection(name, shouldFocus);
  else if (!currentSection) showSection("vault", false);
}
/** A provider connect comes back as #vault?connected=<provider> or ?connect_error=<provider>&reason=. */
function announceConnect() {
  var query = new URLSearchParams(location.hash.split("?")[1] || "");
  if (query.has("connected")) say("Connected your " + query.get("connected") + " account.");
  else if (query.has("connect_error")) {
    say("Could not connect " + query.get("connect_error") + " (" + (query.get("reason") || "unknown reason") + ").", true);
  } else return;
  history.replaceState(null, "", "#" + (sectionInHash() || "vault"));
}

/* ---------- account ---------- */
function showAccount(me) {
  if (!me.session_ready) {
    location.assign(me.totp_enabled ? "/verify-totp" : "/enroll-totp");
    return;
  }
  byId("email").textContent = me.email;
  byId("organisation").textContent = me.organisation ? me.organisation.name : "None yet";
  byId("backup-left").textContent = String(me.backup_codes_remaining);
  if (me.backup_codes_remaining < 3) {
    say("Only " + me.backup_codes_remaining + " backup codes left.", true);
  }
}
var signOut = byId("sign-out");
signOut.addEventListener("click", function () {
  signOut.disabled = true;
  api("POST", "/api/auth/logout").then(function () {
    say("Signed out.");
    location.assign("/sign-in");
  }, function (error) {
    signOut.disabled = false;
    fail(error);
  });
});

/* ---------- vault ---------- */
var itemForms = { rotate: byId("rotate-form"), edit: byId("edit-form") };
/** The item the rotate or edit form is open for, and the button that opened it. */
var editing = null;
var editOpener = null;
function itemLabel(item) {
  return item.name + " (" + item.environment + ")";
}
function loadItems() {
  return api("GET", "/api/items").then(function (answer) {
    fillTable("items", answer.items.map(itemRow), "items-empty");
  });
}
function itemRow(item) {
  var label = itemLabel(item);
  var actions = el("td", null, "actions-cell");
  var rotate = button("Rotate", "Rotate " + label, true);
  var edit = button("Edit", "Edit " + label, true);
  var remove = button("Delete", "Delete " + label, true);
  rotate.addEventListener("click", function () {
    openItemForm("rotate", item, rotate);
  });
  edit.addEventListener("click", function () {
    openItemForm("edit", item, edit);
  });
  remove.addEventListener("click", function () {
    confirmStep(remove, "Delete " + label + " and its approvals?", "Delete for good", function () {
      return api("DELETE", "/api/items/" + enc(item.id)).then(function () {
        say("Deleted " + label + ".");
        byId("vault-heading").focus();
        return loadItems();
      });
    });
  });
  actions.append(rotate, edit, remove);
  var inject = item.inject + (item.username ? " (user " + item.username + ")" : "");
  return row([
    rowHeader(item.name),
    item.environment,
    item.kind,
    item.allowed_hosts.join(", "),
    inject,
    "…" + item.last4,
    timeCell(item.updated_at),
    actions,
  ]);
}
function openItemForm(which, item, opener) {
  closeItemForms(false);
  editing = item;
  editOpener = opener;
  var form = itemForms[which];
  byId(which + "-name").textContent = itemLabel(item);
  if (which === "edit") {
    byId("edit-hosts").value = item.allowed_hosts.join(", ");
    byId("edit-inject").value = item.inject;
    byId("edit-username").value = item.username || "";
  }
  form.hidden = false;
  form.querySelector("input").focus();
}
function closeItemForms(shouldRefocus) {
  Object.keys(itemForms).forEach(function (key) {
    itemForms[key].reset();
    clearInvalid(itemForms[key]);
    itemForms[key].hidden = true;
  });
  if (shouldRefocus && editOpener && editOpener.isConnected) editOpener.focus();
  editing = null;
  editOpener = null;
}
Object.keys(itemForms).forEach(function (key) {
  itemForms[key].querySelector("[data-close]").addEventListener("click", function () {
    closeItemForms(true);
  });
});
/** After a change: the forms close, the list reloads, focus goes back to the vault heading. */
function itemChanged(message) {
  closeItemForms(false);
  say(message);
  byId("vault-heading").focus();
  return loadItems();
}
onSubmit(itemForms.rotate, function () {
  var field = byId("rotate-value"), item = editing;
  if (!field.value) return refuse(field, "Enter the new value.");
  var rotated = api("POST", "/api/items/" + enc(item.id) + "/rotate", { value: field.value });
  busy(itemForms.rotate, rotated.then(function (answer) {
    return itemChanged("Rotated " + itemLabel(item) + ". The new value ends in " + answer.item.last4 + ".");
  }), field);
});
onSubmit(itemForms.edit, function () {
  var hosts = byId("edit-hosts"), inject = byId("edit-inject"), item = editing;
  clearInvalid(itemForms.edit);
  if (!listOf(hosts.value).length) return refuse(hosts, "Name at least one host the credential may be sent to.");
  if (!inject.value.trim()) return refuse(inject, "Say how the credential is sent, for example bearer.");
  var saved = api("POST", "/api/items/" + enc(item.id) + "/meta", {
    allowed_hosts: listOf(hosts.value),
    inject: inject.value.trim(),
    username: byId("edit-username").value.trim() || null,
  });
  busy(itemForms.edit, saved.then(function (answer) {
    return itemChanged("Saved " + itemLabel(answer.item) + ".");
  }, function (error) {
    fail(error);
    var code = error.code || "";
    if (/inject/.test(code)) markInvalid(inject);
    else if (/host|ip_literal/.test(code)) markInvalid(hosts);
  }));
});

var addForm = byId("add-form");
/** Which add-form field an error code is about. */
function fieldForError(code) {
  if (/host|ip_literal/.test(code)) return byId("item-hosts");
  if (/inject/.test(code)) return byId("item-inject");
  if (/name/.test(code)) return byId("item-name");
  return null;
}
onSubmit(addForm, function () {
  var name = byId("item-name"), value = byId("item-value"), hosts = byId("item-hosts");
  var username = byId("item-username").value.trim(), folder = byId("item-folder").value.trim();
  clearInvalid(addForm);
  if (!/^[A-Z][A-Z0-9_]{0,127}$/.test(name.value.trim())) {
    return refuse(name, "A name is an uppercase letter, then uppercase letters, digits or underscores (like GITHUB_TOKEN).");
  }
  if (!value.value) return refuse(value, "Enter the value to store.");
  if (!listOf(hosts.value).length) return refuse(hosts, "Name at least one host the credential may be sent to.");
  var stored = api("POST", "/api/items", {
    name: name.value.trim(),
    value: value.value,
    environment: byId("item-environment").value,
    kind: byId("item-kind").value,
    allowed_hosts: listOf(hosts.value),
    inject: byId("item-inject").value.trim() || "bearer",
    username: username || undefined,
    folder_name: folder || undefined,
  });
  busy(addForm, stored.then(function (answer) {
    addForm.reset();
    say("Stored " + itemLabel(answer.item) + ". Its value ends in " + answer.item.last4 + ".");
    name.focus();
    return loadItems();
  }, function (error) {
    fail(error);
    var field = fieldForError(error.code || "");
    if (field) markInvalid(field);
  }));
});
loaders.vault = loadItems;

/* ---------- start, once every console script has run ---------- */
window.addEventListener("hashchange", function () {
  route(true);
});
window.addEventListener("DOMContentLoaded", function () {
  api("GET", "/api/auth/me").then(showAccount, fail);
  announceConnect();
  route(false);
});
`;

/** /assets/console-clients.js (after console.js): issue, rotate and revoke clients. */
export const CONSOLE_CLIENTS = `
/* ---------- clients ---------- */
/** The organisation's clients, from the access snapshot, plus any issued in this tab since. */
var issued = [];
/** client_id to name, for the inbox and the audit. */
var clientNames = {};
function remember(client) {
  clientNames[client.client_id] = client.name;
  var known = issued.filter(function (c) {
    return c.client_id === client.client_id;
  })[0];
  if (known) return known;
  known = {
    client_id: client.client_id,
    kind: client.kind,
    name: client.name,
    environment: client.environment,
    issued_at: new Date().toISOString(),
    revoked: false,
  };
  issued.push(known);
  return known;
}
function agentName(id) {
  return clientNames[id] ? clientNames[id] + " (" + id + ")" : id;
}
/** The client whose token the token panel shows, if any. */
var shownClientId = "";
function showToken(answer) {
  shownClientId = answer.client_id;
  var isModel = answer.kind === "model";
  byId("token-client").textContent = answer.name + " (" + answer.kind + ", " + answer.environment + ")";
  byId("token-value").textContent = answer.token;
  byId("token-mcp").hidden = !isModel;
  byId("token-trusted").hidden = isModel;
  byId("mcp-url").textContent = isModel ? answer.mcp_url || "" : "";
  byId("mcp-header").textContent = isModel ? "Authorization: Bearer " + answer.token : "";
  byId("token-panel").hidden = false;
  byId("token-heading").focus();
}
function hideToken() {
  shownClientId = "";
  byId("token-value").textContent = "";
  byId("mcp-header").textContent = "";
  byId("token-panel").hidden = true;
}
byId("token-done").addEventListener("click", function () {
  hideToken();
  say("The token is hidden. Latch cannot show it again.");
  byId("clients-heading").focus();
});
byId("copy-token").addEventListener("click", function () {
  var token = byId("token-value").textContent;
  var copied = navigator.clipboard && window.isSecureContext
    ? navigator.clipboard.writeText(token)
    : Promise.reject(new Error("no clipboard"));
  copied.then(function () {
    say("Token copied to the clipboard.");
  }, function () {
    var range = document.createRange();
    range.selectNodeContents(byId("token-value"));
    var selection = getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    say("The token is selected: press Ctrl+C (or Command+C) to copy it.");
  });
});
function renderIssued() {
  fillTable("issued", issued.map(issuedRow), "issued-empty");
}
/** Loads every client of the organisation (GET /api/access lists them, without tokens). */
loaders.clients = function () {
  return api("GET", "/api/access").then(function (access) {
    (access.clients || []).forEach(function (client) {
      var known = remember(client);
      known.issued_at = client.created_at;
      known.revoked = Boolean(client.revoked_at);
    });
    renderIssued();
  }, fail);
};
function issuedRow(client) {
  var actions = el("td", null, "actions-cell");
  if (client.revoked) actions.textContent = "Revoked";
  else {
    var rotate = button("Rotate", "Rotate " + client.name, true);
    var revoke = button("Revoke", "Revoke " + client.name, true);
    rotate.addEventListener("click", function () {
      askRotateClient(rotate, client.client_id, client.name);
    });
    revoke.addEventListener("click", function () {
      askRevokeClient(revoke, client.client_id, client.name);
    });
    actions.append(rotate, revoke);
  }
  return row([rowHeader(client.name), client.kind, client.environment, el("td", client.client_id, "mono"),
    timeCell(client.issued_at), actions]);
}
function askRotateClient(opener, id, name) {
  confirmStep(opener, "Rotate " + name + "? Its current token stops working at once.", "Rotate now", function () {
    return api("POST", "/api/clients/" + enc(id) + "/rotate").then(function (answer) {
      remember(answer);
      renderIssued();
      say("Rotated " + answer.name + ". The old token no longer works; copy the new one now.");
      showToken(answer);
    });
  });
}
function askRevokeClient(opener, id, name) {
  confirmStep(opener, "Revoke " + name + "? Its token and approvals stop working for good.", "Revoke for good", function () {
    return api("POST", "/api/clients/" + enc(id) + "/revoke").then(function () {
      issued.forEach(function (c) {
        if (c.client_id === id) c.revoked = true;
      });
      renderIssued();
      if (shownClientId === id) hideToken();
      say("Revoked " + name + ". Its token and approvals no longer work.");
      byId("clients-heading").focus();
    });
  });
}
var clientForm = byId("client-form");
onSubmit(clientForm, function () {
  var name = byId("client-name"), kind = byId("client-kind").value;
  if (!name.value.trim()) return refuse(name, "Give the client a name, for example the agent it is for.");
  if (kind !== "model" && kind !== "trusted") return refuse(byId("client-kind"), "Choose the kind of client.");
  var issuedNow = api("POST", "/api/clients/" + kind, {
    name: name.value.trim(),
    environment: byId("client-environment").value,
  });
  busy(clientForm, issuedNow.then(function (answer) {
    remember(answer);
    renderIssued();
    clientForm.reset();
    say("Issued " + answer.name + ". Copy its token now: it is shown only once.");
    showToken(answer);
  }), name);
});
var clientIdField = byId("client-id");
function clientIdOrRefuse() {
  var id = clientIdField.value.trim().replace(/^agent:/, "");
  if (!id) refuse(clientIdField, "Enter the client ID (it starts with cli_).");
  return id;
}
byId("client-id-rotate").addEventListener("click", function () {
  var id = clientIdOrRefuse();
  if (id) askRotateClient(byId("client-id-rotate"), id, "client " + id);
});
byId("client-id-revoke").addEventListener("click", function () {
  var id = clientIdOrRefuse();
  if (id) askRevokeClient(byId("client-id-revoke"), id, "client " + id);
});
onSubmit(byId("client-id-form"), function () {
  say("Choose Rotate or Revoke.");
});
renderIssued();

`;

/** /assets/console-activity.js (after console-clients.js): inbox, audit, access. */
export const CONSOLE_ACTIVITY = String.raw`
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
  return api("GET", "/api/inbox").then(function (answer) {
    var approvals = answer.approvals || [], requests = answer.requests || [];
    var count = approvals.length + requests.length;
    byId("inbox-count").textContent = count ? "(" + count + ")" : "";
    if (isBackground && waitingCount >= 0 && count > waitingCount) {
      say(count === 1 ? "1 request is waiting in the inbox." : count + " requests are waiting in the inbox.");
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
  var focused = document.activeElement && document.activeElement.getAttribute("data-key");
  fillTable("approvals", approvals.map(approvalRow), "approvals-empty");
  fillTable("requests", requests.map(requestRow), "requests-empty");
  if (!focused) return;
  var again = byId("inbox").querySelector('[data-key="' + CSS.escape(focused) + '"]');
  if (again) again.focus();
  else byId("inbox-heading").focus();
}
function approvalRow(grant) {
  var label = grant.item_name + " for " + agentName(grant.agent_id);
  var decide = el("td", null, "actions-cell");
  DECISIONS.forEach(function (decision) {
    var b = button(decision[1], decision[1] + ": " + label, decision[0] !== "prompt");
    b.setAttribute("data-key", grant.grant_id + ":" + decision[0]);
    b.addEventListener("click", function () {
      act(b, function () {
        return api("POST", "/api/grants/" + enc(grant.grant_id) + "/approve", { policy: decision[0] })
          .then(function () {
            return inboxChanged("Approved " + label + " " + POLICY_TEXT[decision[0]] + ".");
          });
      });
    });
    decide.appendChild(b);
  });
  var revoke = button("Revoke", "Revoke: " + label, true);
  revoke.setAttribute("data-key", grant.grant_id + ":revoke");
  revoke.addEventListener("click", function () {
    act(revoke, function () {
      return api("POST", "/api/grants/" + enc(grant.grant_id) + "/revoke").then(function () {
        return inboxChanged("Revoked the request for " + label + ".");
      });
    });
  });
  decide.appendChild(revoke);
  return row([rowHeader(grant.item_name), grant.environment_id, agentName(grant.agent_id),
    requestCell(grant.call, function (call, path) {
      return "Once: exactly this request. 8 hours: " + call.method + " on " + call.host + " under " +
        path.slice(0, path.lastIndexOf("/") + 1) + ". Always: every call.";
    }), grant.task_description, timeCell(grant.created_at), decide]);
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
  cell.appendChild(el("div", call.body_sha256 ? "Body SHA-256 " + call.body_sha256 : "No body", "digest"));
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
    var url = new URL(address, location.href);
    return url.origin === location.origin ? url.pathname + url.search : "";
  } catch (error) {
    return "";
  }
}
function requestRow(need) {
  var answer = el("td", null, "actions-cell");
  var path = need.kind === "secret" ? sameSitePath(need.collect_url || "") : "";
  if (path) {
    var link = el("a", "Enter the value");
    link.href = path;
    link.setAttribute("aria-label", "Enter the value for " + (need.suggested_name || need.host));
    answer.appendChild(link);
  }
  var deny = button("Deny", "Deny the request for " + (need.suggested_name || need.host), true);
  deny.setAttribute("data-key", need.need_id + ":deny");
  deny.addEventListener("click", function () {
    act(deny, function () {
      return api("POST", "/api/need-items/" + enc(need.need_id) + "/deny").then(function () {
        return inboxChanged("Denied the request for " + (need.suggested_name || need.host) + ".");
      });
    });
  });
  answer.appendChild(deny);
  return row([need.kind, need.suggested_name, need.host, agentName(need.client_name || ""),
    requestCell(need.call, function () {
      return "Storing the value approves exactly this request once; Always allow: every call.";
    }), need.message, timeCell(need.created_at), answer]);
}
var codeForm = byId("code-form");
onSubmit(codeForm, function () {
  var field = byId("approval-code"), code = field.value.replace(/\s+/g, ""), policy = byId("code-policy").value;
  if (!/^\d{8}$/.test(code)) return refuse(field, "An approval code has 8 digits.");
  busy(codeForm, api("POST", "/api/grants/approve-by-code", { code: code, policy: policy }).then(function (answer) {
    field.value = "";
    var grant = answer.grant;
    say("Approved " + grant.item_name + " for " + agentName(grant.agent_id) + " " + POLICY_TEXT[policy] + ".");
    return loadInbox(false);
  }), field);
});
loaders.inbox = function () {
  return loadInbox(false);
};
setInterval(function () {
  if (!document.hidden) loadInbox(true).catch(fail);
}, 5000);
window.addEventListener("DOMContentLoaded", function () {
  if (currentSection !== "inbox") loadInbox(false).catch(fail);
});

/* ---------- audit ---------- */
function actorText(actor) {
  var agent = /^agent:(.+)$/.exec(actor || "");
  return agent ? "agent " + agentName(agent[1]) : actor;
}
function detailText(detail) {
  return Object.keys(detail || {}).map(function (key) {
    var value = detail[key];
    return key + ": " + (typeof value === "string" ? value : JSON.stringify(value));
  }).join("; ");
}
function loadAudit() {
  var query = new URLSearchParams();
  var item = byId("audit-item").value.trim(), client = byId("audit-client").value.trim().replace(/^agent:/, "");
  if (item) query.set("item_name", item);
  if (client) query.set("client_id", client);
  var suffix = query.toString();
  return api("GET", "/api/audit" + (suffix ? "?" + suffix : "")).then(function (answer) {
    fillTable("events", answer.events.map(eventRow), "events-empty");
    return answer.events.length;
  });
}
function eventRow(event) {
  return row([timeCell(event.at), event.environment, actorText(event.actor), event.action, event.item_name,
    event.host, event.reason, detailText(event.detail)]);
}
var auditForm = byId("audit-form");
onSubmit(auditForm, function () {
  busy(auditForm, loadAudit().then(function (count) {
    say(count === 1 ? "1 event." : count + " events.");
  }));
});
byId("audit-clear").addEventListener("click", function () {
  auditForm.reset();
  busy(auditForm, loadAudit().then(function (count) {
    say("Filters cleared: " + count + " events.");
  }));
});
loaders.audit = loadAudit;

/* ---------- access ---------- */
function loadAccess() {
  return api("GET", "/api/access").then(function (answer) {
    fillTable("operators", answer.operators.map(function (operator) {
      return row([rowHeader(operator.email), operator.role, timeCell(operator.created_at)]);
    }));
    fillTable("sessions", answer.sessions.map(sessionRow));
    revokeOthers.disabled = answer.sessions.every(function (s) {
      return s.current;
    });
  });
}
function sessionRow(session) {
  var action = el("td", null, "actions-cell");
  if (session.current) action.textContent = "This session";
  else {
    var revoke = button("Revoke", "Revoke the session of " + session.email + " from " + when(session.created_at), true);
    revoke.addEventListener("click", function () {
      act(revoke, function () {
        return api("POST", "/api/sessions/" + enc(session.session_id) + "/revoke").then(function () {
          return accessChanged("Signed out that session of " + session.email + ".");
        });
      });
    });
    action.appendChild(revoke);
  }
  return row([rowHeader(session.email), session.user_agent || "Unknown browser", timeCell(session.created_at),
    timeCell(session.last_access_at), action]);
}
function accessChanged(message) {
  say(message);
  byId("access-heading").focus();
  return loadAccess();
}
var revokeOthers = byId("revoke-others");
revokeOthers.addEventListener("click", function () {
  confirmStep(revokeOthers, "Sign out every other session of this organisation?", "Sign them out", function () {
    return api("POST", "/api/sessions/revoke-others").then(function (answer) {
      var n = answer.revoked;
      return accessChanged(typeof n === "number" ? "Signed out " + n + (n === 1 ? " other session." : " other sessions.")
        : "Signed out the other sessions.");
    });
  });
});
loaders.access = loadAccess;
`;
