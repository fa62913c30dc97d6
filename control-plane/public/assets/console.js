// The operator console (after common.js): DOM helpers, section navigation, account and vault.
// console-inject.js, console-clients.js, request-view.js, console-inbox.js, console-activity.js,
// console-approvals.js and console-members.js follow in the same global scope; the console starts
// once the account is known and all of them have run. Values reach the page as text, never as
// markup.
"use strict";
/* ---------- the member's role ---------- */
/** The account (GET /api/auth/me): its role here and the actions that role allows. */
var me = null;
/**
 * Whether the member's role allows `action` (the server's permission table, through
 * /api/auth/me): a control a role may not use is not shown. The server judges every call anyway.
 */
function may(action) {
  return Boolean(me && (me.permissions || []).indexOf(action) >= 0);
}
/** Shows `[data-needs=action]` only to a role that may, `[data-needs-not=action]` only to one that may not. */
function applyPermissions() {
  Array.prototype.forEach.call(document.querySelectorAll("[data-needs]"), (node) => {
    node.hidden = !may(node.getAttribute("data-needs"));
  });
  Array.prototype.forEach.call(document.querySelectorAll("[data-needs-not]"), (node) => {
    node.hidden = may(node.getAttribute("data-needs-not"));
  });
}
// Until the account is known, no control a role might lack is shown.
applyPermissions();
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
function timeCell(iso, absentText) {
  var cell = el("td");
  if (!iso) {
    cell.textContent = absentText || "";
    return cell;
  }
  var time = el("time", when(iso));
  time.dateTime = iso;
  cell.appendChild(time);
  return cell;
}
/**
 * A table drawn as cards on a phone (class "cards", site.css): each cell carries its column's name
 * (shown before it there), and the rows keep their table roles when CSS lays them out as blocks.
 */
function labelCells(table) {
  if (!table.classList.contains("cards")) return;
  // The table's own rows only (table.rows): a body's form fields are a table of their own.
  var names = Array.prototype.map.call(table.tHead.rows[0].cells, (th) => th.textContent.trim());
  table.setAttribute("role", "table");
  [table.tHead].concat(Array.prototype.slice.call(table.tBodies)).forEach((group) => {
    group.setAttribute("role", "rowgroup");
  });
  Array.prototype.forEach.call(table.rows, (tr) => {
    var isHead = tr.parentNode === table.tHead;
    tr.setAttribute("role", "row");
    Array.prototype.forEach.call(tr.cells, (cell, index) => {
      if (isHead) cell.setAttribute("role", "columnheader");
      else cell.setAttribute("role", cell.tagName === "TH" ? "rowheader" : "cell");
      if (!isHead && names[index]) cell.setAttribute("data-label", names[index]);
    });
  });
}
/** A table row from cells: a node is used as is, anything else becomes a text cell. */
function row(cells) {
  var tr = el("tr");
  cells.forEach((c) => {
    tr.appendChild(c?.nodeType ? c : el("td", c === undefined || c === null || c === "" ? "—" : c));
  });
  return tr;
}
function rowHeader(text) {
  var th = el("th", text);
  th.scope = "row";
  return th;
}
/**
 * Replaces a table's rows; with emptyId, an empty table gives way to its "nothing here" line. A
 * control that had the focus keeps it in the new rows (found by its label), so a redraw never
 * drops a keyboard user on the page's body.
 */
function fillTable(id, rows, emptyId) {
  var table = byId(id);
  var body = table.tBodies[0];
  var focused = body.contains(document.activeElement)
    ? document.activeElement.getAttribute("aria-label")
    : null;
  body.replaceChildren.apply(body, rows);
  labelCells(table);
  if (focused) {
    const again = Array.prototype.find.call(
      body.querySelectorAll("[aria-label]"),
      (node) => node.getAttribute("aria-label") === focused,
    );
    if (again) again.focus();
  }
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
  return Promise.resolve()
    .then(run)
    .catch(fail)
    .then(() => {
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
  yes.addEventListener("click", () => {
    act(yes, () =>
      run().then(() => {
        if (group.isConnected) container.replaceChildren.apply(container, previous);
      }),
    );
  });
  no.focus();
}
function markInvalid(field) {
  field.setAttribute("aria-invalid", "true");
  field.focus();
}
function clearInvalid(form) {
  Array.prototype.forEach.call(form.querySelectorAll("[aria-invalid]"), (f) => {
    f.removeAttribute("aria-invalid");
  });
}
function listOf(text) {
  return text.split(/[\s,]+/).filter(Boolean);
}

/* ---------- pages of a table ---------- */
var PAGE_SIZE = 25;
/** The page each paged table shows, by table id; a new search or filter starts again at 0. */
var pages = {};
/** Fills a table with one page of `rows` and its pager (Previous, page n of m, Next). */
function pagedTable(id, rows, emptyId) {
  var count = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
  var page = Math.min(pages[id] || 0, count - 1);
  pages[id] = page;
  fillTable(id, rows.slice(page * PAGE_SIZE, (page + 1) * PAGE_SIZE), emptyId);
  var pager = byId(`${id}-pager`);
  pager.hidden = count < 2;
  if (count < 2) return pager.replaceChildren();
  var what = pager.getAttribute("aria-label").replace(/^Pages of /, "");
  var previous = button("Previous", `Previous page of ${what}`, true);
  var next = button("Next", `Next page of ${what}`, true);
  previous.disabled = page === 0;
  next.disabled = page === count - 1;
  function go(to, control) {
    pages[id] = to;
    pagedTable(id, rows, emptyId);
    var again = byId(`${id}-pager`).querySelector(`button:nth-of-type(${control === next ? 2 : 1})`);
    (again && !again.disabled ? again : byId(id)).focus();
  }
  previous.addEventListener("click", () => go(page - 1, previous));
  next.addEventListener("click", () => go(page + 1, next));
  var where = el("span", `Page ${page + 1} of ${count} (${rows.length} in all)`, "where");
  pager.replaceChildren(previous, where, next);
}

/* ---------- organisation and environment ---------- */
var ENVIRONMENTS = ["staging", "production"];
/** The environment the console shows: chosen in the header, kept for the next visit. */
var environment = (() => {
  var saved = localStorage.getItem("latch.environment");
  return ENVIRONMENTS.indexOf(saved) >= 0 ? saved : "staging";
})();
/** Whether a row of environment `env` shows now; a row of no environment always does. */
function inEnvironment(env) {
  return !env || env === environment;
}
/** "3 more in production": what the environment switch hides, with a button to show it. */
function elsewhereNote(id, hiddenCount, one, many) {
  var note = byId(id);
  note.hidden = hiddenCount === 0;
  if (!hiddenCount) return note.replaceChildren();
  var other = ENVIRONMENTS.filter((e) => e !== environment)[0];
  var show = button(`Show ${other}`, null, true);
  show.addEventListener("click", () => switchEnvironment(other, true));
  note.replaceChildren(`${hiddenCount} more ${hiddenCount === 1 ? one : many} in ${other}. `, show);
}
/** Forms that create something start in the environment the console shows. */
function defaultEnvironments() {
  ["item-environment", "client-environment"].forEach((id) => {
    byId(id).value = environment;
  });
}
var envSwitch = byId("env-switch");
function switchEnvironment(to, shouldFocus) {
  environment = to;
  envSwitch.value = to;
  localStorage.setItem("latch.environment", to);
  document.body.setAttribute("data-environment", to);
  defaultEnvironments();
  Object.keys(pages).forEach((id) => {
    pages[id] = 0;
  });
  say(`Showing ${to}.`);
  if (loaders[currentSection]) loaders[currentSection]().catch(fail);
  if (currentSection !== "inbox" && loaders.inbox) loaders.inbox().catch(fail);
  if (shouldFocus) byId(`${currentSection}-heading`).focus();
}
envSwitch.value = environment;
document.body.setAttribute("data-environment", environment);
envSwitch.addEventListener("change", () => switchEnvironment(envSwitch.value, false));
var orgSwitch = byId("org-switch");
function showOrganisations(me) {
  var options = (me.organisations || []).map((o) => {
    var option = el("option", o.role === "owner" ? o.name : `${o.name} (${o.role})`);
    option.value = o.id;
    option.selected = Boolean(me.organisation && me.organisation.id === o.id);
    return option;
  });
  orgSwitch.replaceChildren.apply(orgSwitch, options);
}
orgSwitch.addEventListener("change", () => {
  var name = orgSwitch.options[orgSwitch.selectedIndex].textContent;
  act(orgSwitch, () =>
    api("POST", "/api/orgs/switch", { organisation_id: orgSwitch.value }).then(() => {
      say(`Switched to ${name}.`);
      location.reload();
    }),
  );
});

/* ---------- backup codes ---------- */
var newCodes = [];
var regenForm = byId("regen-form");
onSubmit(regenForm, () => {
  var field = byId("regen-code"),
    code = field.value.replace(/\s+/g, "");
  if (!/^\d{6}$/.test(code)) return refuse(field, "Enter the 6-digit code your authenticator app shows.");
  busy(
    regenForm,
    api("POST", "/api/auth/backup-codes/regenerate", { code: code }).then((answer) => {
      field.value = "";
      newCodes = answer.backup_codes.slice();
      var list = byId("new-backup-codes");
      list.replaceChildren.apply(
        list,
        newCodes.map((c) => el("li", c)),
      );
      byId("new-codes").hidden = false;
      byId("backup-left").textContent = String(newCodes.length);
      say("New backup codes made. Save them now: they are shown only once.");
      byId("new-codes-heading").focus();
    }),
    field,
  );
});
backupCodeButtons({ copy: "new-codes-copy", download: "new-codes-download", print: "new-codes-print" }, () =>
  backupCodesText(byId("header-email").textContent, newCodes),
);
byId("new-codes-done").addEventListener("click", () => {
  newCodes = [];
  byId("new-backup-codes").replaceChildren();
  byId("new-codes").hidden = true;
  say("The new backup codes are hidden. Latch cannot show them again.");
  byId("regen-heading").focus();
});

var orgForm = byId("org-form");
onSubmit(orgForm, () => {
  var name = byId("org-name");
  if (!name.value.trim()) return refuse(name, "Give the organisation a name.");
  busy(
    orgForm,
    api("POST", "/api/orgs", { name: name.value.trim() }).then((answer) => {
      say(`Created ${answer.organisation.name}.`);
      location.reload();
    }),
    name,
  );
});

/* ---------- sections ---------- */
var SECTIONS = ["vault", "clients", "inbox", "approvals", "audit", "members", "access"];
/** Each section's loader (returns a promise), called whenever the section is shown. */
var loaders = {};
var currentSection = "";
function sectionInHash() {
  var name = location.hash.replace(/^#/, "").split("?")[0];
  return SECTIONS.indexOf(name) >= 0 ? name : "";
}
function showSection(name, shouldFocus) {
  currentSection = name;
  SECTIONS.forEach((s) => {
    byId(s).hidden = s !== name;
  });
  Array.prototype.forEach.call(document.querySelectorAll("nav.sections a"), (link) => {
    if (link.getAttribute("href") === `#${name}`) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  });
  // A section's rows wait for the account: which controls they carry depends on the role.
  if (loaders[name]) meReady.then(() => loaders[name]()).catch(fail);
  if (!shouldFocus) return;
  say("");
  byId(`${name}-heading`).focus();
}
function route(shouldFocus) {
  var name = sectionInHash();
  if (name) showSection(name, shouldFocus);
  else if (!currentSection) showSection("vault", false);
}
/** A provider connect comes back as #vault?connected=<provider> or ?connect_error=<provider>&reason=. */
function announceConnect() {
  var query = new URLSearchParams(location.hash.split("?")[1] || "");
  if (query.has("connected")) say(`Connected your ${query.get("connected")} account.`);
  else if (query.has("connect_error")) {
    say(
      "Could not connect " +
        query.get("connect_error") +
        " (" +
        (query.get("reason") || "unknown reason") +
        ").",
      true,
    );
  } else return;
  history.replaceState(null, "", `#${sectionInHash() || "vault"}`);
}

/* ---------- account ---------- */
function showAccount(account) {
  me = account;
  if (!me.session_ready) {
    location.assign(me.totp_enabled ? "/verify-totp" : "/enroll-totp");
    return;
  }
  byId("email").textContent = me.email;
  byId("header-email").textContent = me.email;
  var role = byId("header-role");
  role.hidden = !me.organisation;
  role.textContent = me.organisation ? me.organisation.role : "";
  role.setAttribute("aria-label", me.organisation ? `Your role here: ${me.organisation.role}` : "");
  applyPermissions();
  showOrganisations(me);
  byId("organisation").textContent = me.organisation ? me.organisation.name : "None yet";
  showDeleteOrganisation(me);
  byId("backup-left").textContent = String(me.backup_codes_remaining);
  if (me.backup_codes_remaining < 3) {
    say(`Only ${me.backup_codes_remaining} backup codes left.`, true);
  }
}
var signOut = byId("sign-out");
signOut.addEventListener("click", () => {
  signOut.disabled = true;
  api("POST", "/api/auth/logout").then(
    () => {
      say("Signed out.");
      location.assign("/sign-in");
    },
    (error) => {
      signOut.disabled = false;
      fail(error);
    },
  );
});

/* ---------- vault ---------- */
var itemForms = { rotate: byId("rotate-form"), edit: byId("edit-form") };
/** The item the rotate or edit form is open for, and the button that opened it. */
var editing = null;
var editOpener = null;
function itemLabel(item) {
  return `${item.name} (${item.environment})`;
}
/** Every credential of the organisation; the table shows the environment's, filtered by the search. */
var allItems = [];
function loadItems() {
  return api("GET", "/api/items").then((answer) => {
    allItems = answer.items;
    renderItems();
  });
}
function matchesSearch(item, query) {
  var words = [item.name, item.folder_name || ""].concat(item.allowed_hosts);
  return !query || words.some((word) => word.toLowerCase().indexOf(query) >= 0);
}
function renderItems() {
  var query = byId("items-search").value.trim().toLowerCase();
  var here = allItems.filter((item) => inEnvironment(item.environment));
  var shown = here.filter((item) => matchesSearch(item, query));
  byId("items-empty-text").textContent = query
    ? "No credential matches the search."
    : `No credentials in ${environment} yet.`;
  // The first-run hint, only when the whole vault is empty.
  byId("items-first-run").hidden = Boolean(query) || allItems.length > 0;
  pagedTable("items", shown.map(itemRow), "items-empty");
  elsewhereNote("items-elsewhere", allItems.length - here.length, "credential", "credentials");
}
byId("items-search").addEventListener("input", () => {
  pages.items = 0;
  renderItems();
});
/** Connect a user account for an app credential (any provider, Stripe included), from the Vault. */
function vaultConnectButton(item) {
  var connect = button(
    `Connect ${item.connect_provider}`,
    `Connect a ${item.connect_provider} account for ${item.name}`,
    true,
  );
  connect.addEventListener("click", () => {
    connect.disabled = true;
    api("POST", `/api/integrations/${enc(item.connect_provider)}/start`, {
      item_name: item.name,
      environment: item.environment,
    }).then(
      (answer) => {
        location.assign(answer.authorize_url);
      },
      (error) => {
        connect.disabled = false;
        fail(error);
      },
    );
  });
  return connect;
}
function itemRow(item) {
  var label = itemLabel(item);
  var actions = el("td", null, "actions-cell");
  // A role that may not change credentials sees them, not the controls.
  if (!may("credentials.write")) actions.textContent = "—";
  var rotate = button("Rotate", `Rotate ${label}`, true);
  var edit = button("Edit", `Edit ${label}`, true);
  var remove = button("Delete", `Delete ${label}`, true);
  rotate.addEventListener("click", () => {
    openItemForm("rotate", item, rotate);
  });
  edit.addEventListener("click", () => {
    openItemForm("edit", item, edit);
  });
  remove.addEventListener("click", () => {
    confirmStep(remove, `Delete ${label} and its approvals?`, "Delete for good", () =>
      api("DELETE", `/api/items/${enc(item.id)}`).then(() => {
        say(`Deleted ${label}.`);
        byId("vault-heading").focus();
        return loadItems();
      }),
    );
  });
  if (may("credentials.write")) {
    actions.append(rotate, edit, remove);
    if (item.connect_provider) actions.prepend(vaultConnectButton(item));
  }
  var inject = item.inject + (item.username ? ` (user ${item.username})` : "");
  var hosts = el("td", item.allowed_hosts.join(", "), "hosts");
  return row([
    rowHeader(item.name),
    item.kind,
    item.folder_name,
    hosts,
    inject,
    el("td", `…${item.last4}`, "last4"),
    timeCell(item.last_used_at, "Never"),
    actions,
  ]);
}
function openItemForm(which, item, opener) {
  closeItemForms(false);
  editing = item;
  editOpener = opener;
  var form = itemForms[which];
  byId(`${which}-name`).textContent = itemLabel(item);
  if (which === "edit") {
    byId("edit-hosts").value = item.allowed_hosts.join(", ");
    setInject("edit-inject", item.inject);
    byId("edit-username").value = item.username || "";
  }
  form.hidden = false;
  form.querySelector("input").focus();
}
function closeItemForms(shouldRefocus) {
  Object.keys(itemForms).forEach((key) => {
    itemForms[key].reset();
    if (key === "edit") setInject("edit-inject", "bearer");
    clearInvalid(itemForms[key]);
    itemForms[key].hidden = true;
  });
  if (shouldRefocus && editOpener?.isConnected) editOpener.focus();
  editing = null;
  editOpener = null;
}
Object.keys(itemForms).forEach((key) => {
  itemForms[key].querySelector("[data-close]").addEventListener("click", () => {
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
onSubmit(itemForms.rotate, () => {
  var field = byId("rotate-value"),
    item = editing;
  if (!field.value) return refuse(field, "Enter the new value.");
  var rotated = api("POST", `/api/items/${enc(item.id)}/rotate`, { value: field.value });
  busy(
    itemForms.rotate,
    rotated.then((answer) =>
      itemChanged(`Rotated ${itemLabel(item)}. The new value ends in ${answer.item.last4}.`),
    ),
    field,
  );
});
onSubmit(itemForms.edit, () => {
  var hosts = byId("edit-hosts"),
    inject = byId("edit-inject"),
    item = editing;
  clearInvalid(itemForms.edit);
  if (!listOf(hosts.value).length)
    return refuse(hosts, "Name at least one host the credential may be sent to.");
  var mode = injectValue("edit-inject");
  if (!mode) return refuse(byId("edit-inject-name"), "Name the header, parameter or cookie it is sent in.");
  var saved = api("POST", `/api/items/${enc(item.id)}/meta`, {
    allowed_hosts: listOf(hosts.value),
    inject: mode,
    username: byId("edit-username").value.trim() || null,
  });
  busy(
    itemForms.edit,
    saved.then(
      (answer) => itemChanged(`Saved ${itemLabel(answer.item)}.`),
      (error) => {
        fail(error);
        var code = error.code || "";
        if (/inject/.test(code)) markInvalid(inject);
        else if (/host|ip_literal/.test(code)) markInvalid(hosts);
      },
    ),
  );
});

var addForm = byId("add-form");
/** Which add-form field an error code is about. */
function fieldForError(code) {
  if (/host|ip_literal/.test(code)) return byId("item-hosts");
  if (/inject/.test(code) && injectNeedsName(byId("item-inject").value)) return byId("item-inject-name");
  if (/inject/.test(code)) return byId("item-inject");
  if (/name/.test(code)) return byId("item-name");
  return null;
}
onSubmit(addForm, () => {
  var name = byId("item-name"),
    value = byId("item-value"),
    hosts = byId("item-hosts");
  var username = byId("item-username").value.trim(),
    folder = byId("item-folder").value.trim();
  clearInvalid(addForm);
  if (!/^[A-Z][A-Z0-9_]{0,127}$/.test(name.value.trim())) {
    return refuse(
      name,
      "A name is an uppercase letter, then uppercase letters, digits or underscores (like GITHUB_TOKEN).",
    );
  }
  if (!value.value) return refuse(value, "Enter the value to store.");
  if (!listOf(hosts.value).length)
    return refuse(hosts, "Name at least one host the credential may be sent to.");
  var mode = injectValue("item-inject");
  if (!mode) return refuse(byId("item-inject-name"), "Name the header, parameter or cookie it is sent in.");
  var stored = api("POST", "/api/items", {
    name: name.value.trim(),
    value: value.value,
    environment: byId("item-environment").value,
    kind: byId("item-kind").value,
    allowed_hosts: listOf(hosts.value),
    inject: mode,
    username: username || undefined,
    folder_name: folder || undefined,
  });
  busy(
    addForm,
    stored.then(
      (answer) => {
        addForm.reset();
        setInject("item-inject", "bearer");
        defaultEnvironments();
        say(`Stored ${itemLabel(answer.item)}. Its value ends in ${answer.item.last4}.`);
        name.focus();
        return loadItems();
      },
      (error) => {
        fail(error);
        var field = fieldForError(error.code || "");
        if (field) markInvalid(field);
      },
    ),
  );
});
loaders.vault = loadItems;

/* ---------- start, once every console script has run ---------- */
window.addEventListener("hashchange", () => {
  route(true);
});
/**
 * The account, asked for at once and shown once every console script has run; every section
 * waits for it (which controls show depends on the role), so anything after meReady sees `me`.
 */
var meReady = Promise.all([
  api("GET", "/api/auth/me"),
  new Promise((resolve) => window.addEventListener("DOMContentLoaded", resolve)),
]).then((answers) => {
  showAccount(answers[0]);
  return answers[0];
});
meReady.catch(fail);
window.addEventListener("DOMContentLoaded", () => {
  defaultEnvironments();
  announceConnect();
  route(false);
});
