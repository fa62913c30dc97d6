// The console's clients section (after console.js): issue, rotate and revoke clients.
"use strict";
/* ---------- clients ---------- */
/** The organisation's clients, from the access snapshot, plus any issued in this tab since. */
var issued = [];
/** client_id to name, for the inbox and the audit. */
var clientNames = {};
function remember(client) {
  clientNames[client.client_id] = client.name;
  var known = issued.filter((c) => c.client_id === client.client_id)[0];
  if (known) return known;
  known = {
    client_id: client.client_id,
    kind: client.oauth ? "model (OAuth)" : client.kind,
    oauth: Boolean(client.oauth),
    name: client.name,
    environment: client.environment,
    issued_at: new Date().toISOString(),
    last_used_at: null,
    revoked: false,
  };
  issued.push(known);
  return known;
}
// biome-ignore lint/correctness/noUnusedVariables: console-activity.js names agents with it
function agentName(id) {
  return clientNames[id] || id;
}
/** The client whose token the token panel shows, if any. */
var shownClientId = "";
function showToken(answer) {
  shownClientId = answer.client_id;
  var isModel = answer.kind === "model";
  byId("token-client").textContent = `${answer.name} (${answer.kind}, ${answer.environment})`;
  byId("token-value").textContent = answer.token;
  byId("token-mcp").hidden = !isModel;
  byId("token-trusted").hidden = isModel;
  byId("mcp-url").textContent = isModel ? answer.mcp_url || "" : "";
  byId("mcp-header").textContent = isModel ? `Authorization: Bearer ${answer.token}` : "";
  byId("mcp-command").textContent = isModel
    ? `claude mcp add --transport http latch ${answer.mcp_url} --header "Authorization: Bearer ${answer.token}"`
    : "";
  byId("token-panel").hidden = false;
  byId("token-heading").focus();
}
function hideToken() {
  shownClientId = "";
  byId("token-value").textContent = "";
  byId("mcp-header").textContent = "";
  byId("mcp-command").textContent = "";
  byId("token-panel").hidden = true;
}
byId("token-done").addEventListener("click", () => {
  hideToken();
  say("The token is hidden. Latch cannot show it again.");
  byId("clients-heading").focus();
});
byId("copy-token").addEventListener("click", () => {
  var token = byId("token-value").textContent;
  var copied =
    navigator.clipboard && window.isSecureContext
      ? navigator.clipboard.writeText(token)
      : Promise.reject(new Error("no clipboard"));
  copied.then(
    () => {
      say("Token copied to the clipboard.");
    },
    () => {
      var range = document.createRange();
      range.selectNodeContents(byId("token-value"));
      var selection = getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      say("The token is selected: press Ctrl+C (or Command+C) to copy it.");
    },
  );
});
[
  ["copy-mcp-url", "mcp-url", "MCP URL"],
  ["copy-mcp-header", "mcp-header", "header"],
  ["copy-mcp-command", "mcp-command", "command"],
].forEach((copy) => {
  byId(copy[0]).addEventListener("click", () => copyText(byId(copy[1]).textContent, copy[2]));
});
function renderIssued() {
  var here = issued.filter((client) => inEnvironment(client.environment));
  byId("issued-empty-text").textContent = `No clients in ${environment} yet.`;
  pagedTable("issued", here.map(issuedRow), "issued-empty");
  elsewhereNote("issued-elsewhere", issued.length - here.length, "client", "clients");
  auditClientOptions();
}
/** Loads every client of the organisation (GET /api/access lists them, without tokens). */
loaders.clients = () =>
  api("GET", "/api/access").then((access) => {
    (access.clients || []).forEach((client) => {
      var known = remember(client);
      known.issued_at = client.created_at;
      known.last_used_at = client.last_access_at;
      known.revoked = Boolean(client.revoked_at);
    });
    renderIssued();
  }, fail);
function issuedRow(client) {
  var actions = el("td", null, "actions-cell");
  if (client.revoked) actions.textContent = "Revoked";
  else if (!may("clients.write")) actions.textContent = "—";
  else {
    const revoke = button("Revoke", `Revoke ${client.name}`, true);
    revoke.addEventListener("click", () => {
      askRevokeClient(revoke, client.client_id, client.name);
    });
    // An OAuth client holds no token of ours to rotate: it signs in again through its own app.
    if (client.oauth) actions.append(revoke);
    else {
      const rotate = button("Rotate", `Rotate ${client.name}`, true);
      rotate.addEventListener("click", () => {
        askRotateClient(rotate, client.client_id, client.name);
      });
      actions.append(rotate, revoke);
    }
  }
  return row([
    rowHeader(client.name),
    client.kind,
    client.environment,
    el("td", client.client_id, "mono"),
    timeCell(client.issued_at),
    timeCell(client.last_used_at, "Never"),
    actions,
  ]);
}
function askRotateClient(opener, id, name) {
  confirmStep(opener, `Rotate ${name}? Its current token stops working at once.`, "Rotate now", () =>
    api("POST", `/api/clients/${enc(id)}/rotate`).then((answer) => {
      remember(answer);
      renderIssued();
      say(`Rotated ${answer.name}. The old token no longer works; copy the new one now.`);
      showToken(answer);
    }),
  );
}
function askRevokeClient(opener, id, name) {
  confirmStep(
    opener,
    `Revoke ${name}? Its token and approvals stop working for good.`,
    "Revoke for good",
    () =>
      api("POST", `/api/clients/${enc(id)}/revoke`).then(() => {
        issued.forEach((c) => {
          if (c.client_id === id) c.revoked = true;
        });
        renderIssued();
        if (shownClientId === id) hideToken();
        say(`Revoked ${name}. Its token and approvals no longer work.`);
        byId("clients-heading").focus();
      }),
  );
}
var clientForm = byId("client-form");
onSubmit(clientForm, () => {
  var name = byId("client-name"),
    kind = byId("client-kind").value;
  if (!name.value.trim()) return refuse(name, "Give the client a name, for example the agent it is for.");
  if (kind !== "model" && kind !== "trusted")
    return refuse(byId("client-kind"), "Choose the kind of client.");
  var issuedNow = api("POST", `/api/clients/${kind}`, {
    name: name.value.trim(),
    environment: byId("client-environment").value,
  });
  busy(
    clientForm,
    issuedNow.then((answer) => {
      remember(answer);
      renderIssued();
      clientForm.reset();
      defaultEnvironments();
      say(`Issued ${answer.name}. Copy its token now: it is shown only once.`);
      showToken(answer);
    }),
    name,
  );
});
var clientIdField = byId("client-id");
function clientIdOrRefuse() {
  var id = clientIdField.value.trim().replace(/^agent:/, "");
  if (!id) refuse(clientIdField, "Enter the client ID (it starts with cli_).");
  return id;
}
byId("client-id-rotate").addEventListener("click", () => {
  var id = clientIdOrRefuse();
  if (id) askRotateClient(byId("client-id-rotate"), id, `client ${id}`);
});
byId("client-id-revoke").addEventListener("click", () => {
  var id = clientIdOrRefuse();
  if (id) askRevokeClient(byId("client-id-revoke"), id, `client ${id}`);
});
onSubmit(byId("client-id-form"), () => {
  say("Choose Rotate or Revoke.");
});
window.addEventListener("DOMContentLoaded", renderIssued);
