// The operator console (after common.js): DOM helpers, section navigation and the account.
// console-vault.js, console-inject.js, console-clients.js, request-view.js, console-inbox.js and
// the other console-*.js follow in the same global scope; the console starts once the account is
// known and all of them have run. Values reach the page as text, never as markup.
// biome-ignore-all lint/correctness/noUnusedVariables: the console scripts loaded after this one call its helpers
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
/**
 * An account without an authenticator app (a passkey alone) has no code to give: its passkey,
 * asked for by the step-up prompt, confirms the new codes instead.
 */
function showRegenForm(account) {
  var hasApp = Boolean(account.totp_enabled);
  byId("regen-code").hidden = !hasApp;
  byId("regen-code").required = hasApp;
  regenForm.querySelector('label[for="regen-code"]').hidden = !hasApp;
  regenForm.querySelector(".hint").textContent = hasApp
    ? "Replaces every unused backup code. Confirm with a code from your authenticator app."
    : "Replaces every unused backup code. Confirm with your passkey.";
}
onSubmit(regenForm, () => {
  var field = byId("regen-code"),
    code = field.value.replace(/\s+/g, ""),
    hasApp = Boolean(me?.totp_enabled);
  if (hasApp && !/^\d{6}$/.test(code))
    return refuse(field, "Enter the 6-digit code your authenticator app shows.");
  busy(
    regenForm,
    api("POST", "/api/auth/backup-codes/regenerate", hasApp ? { code: code } : {}).then((answer) => {
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
/** A provider id (DECISIONS "Product") and the four reasons of spec 4.3: nothing else is said. */
var PROVIDER_ID = /^[a-z][a-z0-9-]{0,31}$/;
var CONNECT_REASONS = ["state_expired", "provider_denied", "exchange_failed", "no_refresh_token"];
function announceConnect() {
  var query = new URLSearchParams(location.hash.split("?")[1] || "");
  // Any site can link here: only what the connect callback itself sends is shown.
  var provider = query.get("connected") || query.get("connect_error") || "";
  var reason = query.get("reason") || "";
  var isOurs = PROVIDER_ID.test(provider) && (query.has("connected") || CONNECT_REASONS.indexOf(reason) >= 0);
  if (!isOurs) {
    if (query.has("connected") || query.has("connect_error")) {
      history.replaceState(null, "", `#${sectionInHash() || "vault"}`);
    }
    return;
  }
  if (query.has("connected")) say(`Connected your ${provider} account.`);
  else say(`Could not connect ${provider} (${reason}).`, true);
  history.replaceState(null, "", `#${sectionInHash() || "vault"}`);
}

/* ---------- account ---------- */
function showAccount(account) {
  me = account;
  if (!me.session_ready) {
    location.assign(me.totp_enabled || me.passkeys > 0 ? "/verify-totp" : "/enroll-totp");
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
  showRegenForm(me);
  // Backup codes stand in for the account's own factors; an account that signs in only through
  // its organisation's provider has none to run short of.
  if (me.backup_codes_remaining < 3 && (me.totp_enabled || me.passkeys > 0)) {
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
