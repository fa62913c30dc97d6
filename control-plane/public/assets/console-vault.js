// The console's Vault section (after console.js): the organisation's credentials in the environment
// shown, searched by name, folder or host; adding one, rotating its value, editing its hosts and
// folder, deleting it, and connecting a provider account.
"use strict";
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
