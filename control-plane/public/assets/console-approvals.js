// The console's Approvals section (after console-activity.js): every approval in force with what
// it covers, who approved it, when it was last used and when it ends, filtered, each with Revoke
// (DECISIONS "The approval, readable and reversible"). Values reach the page as text only.
"use strict";
var POLICY_NAMES = {
  prompt: "One call",
  session: "8 hours",
  item_standing: "Always",
  folder_standing: "Always, whole folder",
};
/** Every active approval of the organisation, as last loaded; the table shows the filtered ones. */
var activeApprovals = [];

/** What an approval lets its agent do, in words. */
function coversText(grant) {
  var call = grant.call;
  var scope = grant.scope;
  if (grant.policy === "prompt") {
    return call ? `Once: ${call.method} ${call.host}${call.path}` : "Once: any call with this credential";
  }
  if (grant.policy === "session") {
    return call
      ? `${call.method} on ${call.host} under ${pathPrefix(call.path)}`
      : "Any call with this credential";
  }
  if (scope && (scope.host || scope.method || scope.path)) {
    return `${scope.method || "Any method"} on ${scope.host || hostsText(grant.allowed_hosts)} under ${scope.path || "/"}`;
  }
  if (grant.policy === "folder_standing") return "Every credential in its folder: any method, any path";
  return `The whole credential: any method, any path on ${hostsText(grant.allowed_hosts)}`;
}
function isWholeCredential(grant) {
  return (
    (grant.policy === "item_standing" || grant.policy === "folder_standing") &&
    !(grant.scope && (grant.scope.host || grant.scope.method || grant.scope.path))
  );
}
function approvedByText(grant) {
  if (!grant.approved_by) return "";
  var second = grant.approved_by.email || grant.approved_by.operator_id;
  // The two-person rule: both members, the first one first.
  if (!grant.first_approved_by) return second;
  return `${grant.first_approved_by.email || grant.first_approved_by.operator_id}, confirmed by ${second}`;
}
function loadApprovals() {
  var clients = issued.length ? Promise.resolve() : loaders.clients();
  return clients
    .then(() => api("GET", "/api/approvals"))
    .then((answer) => {
      activeApprovals = answer.approvals || [];
      approvalFilterOptions();
      renderApprovals();
    });
}
/** The filters' choices: the agents and credentials that hold an approval in this environment. */
function approvalFilterOptions() {
  var here = activeApprovals.filter((g) => inEnvironment(g.environment_id));
  var agents = {};
  var items = {};
  here.forEach((g) => {
    agents[g.agent_id] = g.agent_name || agentName(g.agent_id);
    items[g.item_name] = true;
  });
  fillOptions(
    byId("approvals-agent"),
    Object.keys(agents).map((id) => [id, agents[id]]),
  );
  fillOptions(
    byId("approvals-item"),
    Object.keys(items)
      .sort()
      .map((name) => [name, name]),
  );
}
function fillOptions(select, pairs) {
  var chosen = select.value;
  var any = el("option", "Any");
  any.value = "";
  var options = [any].concat(
    pairs.map((pair) => {
      var option = el("option", pair[1]);
      option.value = pair[0];
      return option;
    }),
  );
  select.replaceChildren.apply(select, options);
  select.value = pairs.some((pair) => pair[0] === chosen) ? chosen : "";
}
function renderApprovals() {
  var agent = byId("approvals-agent").value;
  var item = byId("approvals-item").value;
  var policy = byId("approvals-policy").value;
  var here = activeApprovals.filter((g) => inEnvironment(g.environment_id));
  var shown = here.filter(
    (g) =>
      (!agent || g.agent_id === agent) && (!item || g.item_name === item) && (!policy || g.policy === policy),
  );
  byId("active-approvals-empty-text").textContent =
    here.length === 0 ? `No approval is in force in ${environment}.` : "No approval matches the filters.";
  fillTable("active-approvals", shown.map(activeApprovalRow), "active-approvals-empty");
  elsewhereNote(
    "approvals-elsewhere",
    activeApprovals.length - here.length,
    "approval in force",
    "approvals in force",
  );
}
function activeApprovalRow(grant) {
  var agent = grant.agent_name || agentName(grant.agent_id);
  var label = `${grant.item_name} for ${agent}`;
  var covers = el("td", coversText(grant), isWholeCredential(grant) ? "covers whole" : "covers");
  var action = el("td", null, "actions-cell");
  var revoke = button("Revoke", `Revoke: ${label}, ${coversText(grant)}`, true);
  revoke.classList.add("deny");
  revoke.setAttribute("data-key", `${grant.grant_id}:revoke`);
  revoke.addEventListener("click", () => {
    act(revoke, () =>
      api("POST", `/api/grants/${enc(grant.grant_id)}/revoke`).then(() => {
        say(`Revoked ${label}. Its next call waits in the Inbox.`);
        byId("approvals-heading").focus();
        return loadApprovals();
      }),
    );
  });
  if (may("approvals.decide")) action.appendChild(revoke);
  else action.textContent = "—";
  return row([
    rowHeader(grant.item_name),
    agentCell(grant.agent_name, grant.agent_id),
    covers,
    POLICY_NAMES[grant.policy] || grant.policy,
    approvedByText(grant),
    timeCell(grant.approved_at),
    timeCell(grant.last_used_at, "Not yet"),
    timeCell(grant.expires_at, grant.policy === "prompt" ? "After one call" : "When revoked"),
    action,
  ]);
}
["approvals-agent", "approvals-item", "approvals-policy"].forEach((id) => {
  byId(id).addEventListener("change", renderApprovals);
});
onSubmit(byId("approvals-form"), renderApprovals);
loaders.approvals = loadApprovals;
