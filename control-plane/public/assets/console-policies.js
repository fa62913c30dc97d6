// The console's Policies (after console.js): the organisation's ordered rules, edited in the page
// (add, edit, reorder, disable, remove), previewed against the last 7 days of calls, then saved
// whole under the version they were loaded at (a newer one is never overwritten). A request in the
// Inbox opens the form prefilled (#policies?agent=&host=&method=&path=). Under the two-person rule
// a save that may allow more is kept as a proposal (202): shown with who made it and its rules,
// confirmed or discarded by another member. Values reach the page as text, never as markup.
"use strict";
SECTIONS.push("policies");
var EFFECT_TEXT = { allow: "Allow", ask: "Ask", deny: "Deny" };
var MATCH_TEXT = {
  agents: "agents",
  items: "credentials",
  hosts: "hosts",
  methods: "methods",
  paths: "paths",
  environments: "environments",
};
/**
 * The list as loaded, the list being edited, the rule being edited (its index), the preview and
 * the proposal waiting for a second member (or null).
 */
var policy = { version: 0, saved: [], rules: [], editing: -1, preview: null, proposal: null };

/** Loads the saved rules; edits in progress are kept unless `isDiscarding`. */
function loadPolicies(isDiscarding) {
  return api("GET", "/api/policies").then((answer) => {
    var isEditing = !isDiscarding && isPolicyChanged();
    policy.version = answer.version;
    policy.saved = answer.rules;
    policy.proposal = answer.proposal || null;
    if (!isEditing) policy.rules = answer.rules.map((r) => JSON.parse(JSON.stringify(r)));
    policy.preview = null;
    byId("policy-preview-result").hidden = true;
    showPolicyWarnings([]);
    renderPolicies();
    return showProposal();
  });
}

/* ---------- the proposal waiting for a second member ---------- */
/** A rule's content, as the server compares them (its name and id aside). */
function ruleContent(rule) {
  return JSON.stringify([rule.effect, rule.match, rule.rate_limit || null, rule.enabled]);
}
/** Who proposed it, by email (the members' list; every member may read it), and whether it is me. */
function proposerOf(proposal) {
  return api("GET", "/api/orgs/members").then(
    (listed) => {
      var id = proposal.proposed_by.replace(/^operator:/, "");
      var member = listed.members.filter((m) => m.operator_id === id)[0];
      return {
        name: member ? member.email : "a member no longer here",
        isMe: Boolean(member && member.email === me.email),
      };
    },
    () => ({ name: "a member", isMe: false }),
  );
}
function showProposal() {
  var proposal = policy.proposal;
  byId("policy-proposal").hidden = !proposal;
  if (!proposal) return Promise.resolve();
  var saved = policy.saved.map(ruleContent);
  byId("policy-proposal-rules").replaceChildren(
    ...proposal.rules.map((rule) => {
      var isNew = saved.indexOf(ruleContent(rule)) < 0;
      var text =
        `${isNew ? "New or changed: " : ""}${EFFECT_TEXT[rule.effect]} ${ruleLabel(rule)}: ${matchText(rule.match)}` +
        (rule.rate_limit ? `, ${rateText(rule)}` : "") +
        (rule.enabled ? "" : " (disabled)");
      return el("li", text, isNew ? "changed" : "");
    }),
  );
  return proposerOf(proposal).then((who) => {
    byId("policy-proposal-who").textContent =
      `${who.isMe ? "You" : who.name} proposed ${proposal.rules.length} rule${proposal.rules.length === 1 ? "" : "s"} ` +
      `on ${when(proposal.proposed_at)}, made from version ${proposal.base_version}. Approvals: 1 of 2.`;
    byId("policy-proposal-waiting").hidden = !who.isMe;
    byId("policy-proposal-confirm").hidden = who.isMe;
  });
}
var confirmProposalButton = byId("policy-proposal-confirm");
confirmProposalButton.addEventListener("click", () =>
  act(confirmProposalButton, () =>
    api("POST", "/api/policies/proposal/confirm", { proposal_id: policy.proposal.id }).then(
      (json) =>
        loadPolicies(true).then(() => {
          say(
            `Confirmed: version ${json.version} is in force, ${json.rules.length} rule${json.rules.length === 1 ? "" : "s"}.`,
          );
          showPolicyWarnings(json.warnings);
          byId("policies-heading").focus();
        }),
      (failure) => {
        if (failure.code === "stale_version") {
          failure.message =
            "The rules were saved again since this proposal was made, so it no longer applies and was dropped. Propose it again from the saved rules.";
        }
        fail(failure);
        return loadPolicies(false);
      },
    ),
  ),
);
var discardProposalButton = byId("policy-proposal-discard");
discardProposalButton.addEventListener("click", () =>
  act(discardProposalButton, () =>
    api("DELETE", "/api/policies/proposal").then(
      () =>
        loadPolicies(false).then(() => {
          say("Discarded the proposal; the saved rules are unchanged.");
          byId("policies-heading").focus();
        }),
      (failure) => {
        fail(failure);
        return loadPolicies(false);
      },
    ),
  ),
);
function isPolicyChanged() {
  return JSON.stringify(policy.rules) !== JSON.stringify(policy.saved);
}
function matchText(match) {
  var parts = Object.keys(MATCH_TEXT)
    .filter((field) => match[field])
    .map((field) => `${MATCH_TEXT[field]}: ${match[field].join(", ")}`);
  return parts.length ? parts.join("; ") : "every call";
}
function rateText(rule) {
  return rule.rate_limit ? `${rule.rate_limit.calls} per ${rule.rate_limit.per}` : "";
}
/** The preview answers its rules in the list's order (a new rule has no id until it is saved). */
function previewText(index) {
  var counted = policy.preview?.rules[index];
  if (!counted) return "";
  var text = `${counted.calls} call${counted.calls === 1 ? "" : "s"}`;
  return counted.rate_limited ? `${text}, ${counted.rate_limited} over its limit` : text;
}
function ruleLabel(rule) {
  return !rule.id || rule.name === rule.id ? rule.name : `${rule.name} (${rule.id})`;
}
function policyChanged(message) {
  policy.preview = null;
  byId("policy-preview-result").hidden = true;
  renderPolicies();
  if (message) say(message);
}
function moveRule(index, by) {
  var moved = policy.rules.splice(index, 1)[0];
  policy.rules.splice(index + by, 0, moved);
  policyChanged(`Moved ${ruleLabel(moved)} to place ${index + by + 1}. Save to apply.`);
}
/** A row as a role that may not change the policy reads it: no controls. */
function readOnlyPolicyRow(rule, index) {
  return row([
    String(index + 1),
    rowHeader(ruleLabel(rule)),
    el("td", EFFECT_TEXT[rule.effect], `effect ${rule.effect}`),
    matchText(rule.match),
    rateText(rule),
    previewText(index),
    rule.enabled ? "Yes" : "No",
    "—",
  ]);
}
function policyRow(rule, index) {
  if (!may("policies.write")) return readOnlyPolicyRow(rule, index);
  var label = ruleLabel(rule);
  var order = el("td");
  order.appendChild(el("span", String(index + 1), "order"));
  var up = button("Up", `Move ${label} up`, true);
  up.disabled = index === 0;
  up.dataset.key = `up:${rule.id}`;
  up.addEventListener("click", () => moveRule(index, -1));
  var down = button("Down", `Move ${label} down`, true);
  down.disabled = index === policy.rules.length - 1;
  down.dataset.key = `down:${rule.id}`;
  down.addEventListener("click", () => moveRule(index, 1));
  order.append(" ", up, " ", down);
  var enabledCell = el("td");
  var toggle = el("input");
  toggle.type = "checkbox";
  toggle.checked = rule.enabled;
  toggle.setAttribute("aria-label", `${label} enabled`);
  toggle.dataset.key = `enabled:${rule.id}`;
  toggle.addEventListener("change", () => {
    rule.enabled = toggle.checked;
    policyChanged(`${label} ${rule.enabled ? "enabled" : "disabled"}. Save to apply.`);
  });
  enabledCell.appendChild(toggle);
  var actions = el("td");
  var edit = button("Edit", `Edit ${label}`, true);
  edit.dataset.key = `edit:${rule.id}`;
  edit.addEventListener("click", () => openPolicyForm(index));
  var remove = button("Remove", `Remove ${label}`, true);
  remove.dataset.key = `remove:${rule.id}`;
  remove.addEventListener("click", () => {
    policy.rules.splice(index, 1);
    policyChanged(`Removed ${label}. Save to apply.`);
    byId("policies-heading").focus();
  });
  actions.append(edit, " ", remove);
  return row([
    order,
    rowHeader(label),
    el("td", EFFECT_TEXT[rule.effect], `effect ${rule.effect}`),
    matchText(rule.match),
    rateText(rule),
    previewText(index),
    enabledCell,
    actions,
  ]);
}
function renderPolicies() {
  var focused = document.activeElement?.dataset?.key;
  fillTable("policy-rules", policy.rules.map(policyRow), "policy-rules-empty");
  var changed = isPolicyChanged();
  byId("policy-state").textContent =
    `Version ${policy.version}` +
    (changed ? ": unsaved changes (Save applies them, Discard goes back)." : ".");
  byId("policy-save").disabled = !changed;
  byId("policy-discard").disabled = !changed;
  if (!focused) return;
  var again = byId("policy-rules").querySelector(`[data-key="${CSS.escape(focused)}"]`);
  if (again && !again.disabled) again.focus();
}

/* ---------- the form ---------- */
var policyForm = byId("policy-form");
function splitList(text) {
  return text
    .split(/[,\n]/)
    .map((s) => s.trim())
    .filter(Boolean);
}
function checkedValues(name) {
  return Array.prototype.filter
    .call(policyForm.querySelectorAll(`input[name="${name}"]`), (box) => box.checked)
    .map((box) => box.value);
}
function setChecked(name, values) {
  Array.prototype.forEach.call(policyForm.querySelectorAll(`input[name="${name}"]`), (box) => {
    box.checked = (values || []).indexOf(box.value) >= 0;
  });
}
function fillPolicyForm(rule) {
  byId("policy-name").value = rule.name || "";
  byId("policy-effect").value = rule.effect || "ask";
  byId("policy-agents").value = (rule.match.agents || []).join(", ");
  byId("policy-items").value = (rule.match.items || []).join(", ");
  byId("policy-hosts").value = (rule.match.hosts || []).join(", ");
  byId("policy-paths").value = (rule.match.paths || []).join(", ");
  setChecked("methods", rule.match.methods);
  setChecked("environments", rule.match.environments);
  byId("policy-rate-calls").value = rule.rate_limit ? String(rule.rate_limit.calls) : "";
  byId("policy-rate-per").value = rule.rate_limit ? rule.rate_limit.per : "minute";
  byId("policy-enabled").checked = rule.enabled !== false;
}
/** Opens the form on rule `index` (its Edit), or empty to add one. */
function openPolicyForm(index, prefill) {
  policy.editing = index;
  var rule = index >= 0 ? policy.rules[index] : prefill || { effect: "ask", match: {}, enabled: true };
  policyForm.reset();
  clearInvalid(policyForm);
  fillPolicyForm(rule);
  byId("policy-form-heading").textContent = index >= 0 ? `Edit ${ruleLabel(rule)}` : "Add a rule";
  byId("policy-submit").textContent = index >= 0 ? "Update rule" : "Add rule";
  byId("policy-cancel").hidden = index < 0 && !prefill;
  byId("policy-name").focus();
}
function closePolicyForm() {
  policy.editing = -1;
  policyForm.reset();
  clearInvalid(policyForm);
  byId("policy-form-from").hidden = true;
  byId("policy-form-heading").textContent = "Add a rule";
  byId("policy-submit").textContent = "Add rule";
  byId("policy-cancel").hidden = true;
}
function ruleFromForm() {
  var match = {};
  var lists = {
    agents: splitList(byId("policy-agents").value),
    items: splitList(byId("policy-items").value),
    hosts: splitList(byId("policy-hosts").value),
    methods: checkedValues("methods"),
    paths: splitList(byId("policy-paths").value),
    environments: checkedValues("environments"),
  };
  Object.keys(lists).forEach((field) => {
    if (lists[field].length) match[field] = lists[field];
  });
  var rule = {
    name: byId("policy-name").value.trim(),
    effect: byId("policy-effect").value,
    match: match,
    enabled: byId("policy-enabled").checked,
  };
  var calls = byId("policy-rate-calls").value.trim();
  if (calls) rule.rate_limit = { calls: Number(calls), per: byId("policy-rate-per").value };
  var editing = policy.rules[policy.editing];
  if (editing) rule.id = editing.id;
  return rule;
}
policyForm.addEventListener("submit", (event) => {
  event.preventDefault();
  clearInvalid(policyForm);
  var name = byId("policy-name");
  if (!name.value.trim()) {
    markInvalid(name);
    say("Give the rule a name.", true);
    name.focus();
    return;
  }
  var calls = byId("policy-rate-calls");
  if (calls.value.trim() && !(Number(calls.value) >= 1)) {
    markInvalid(calls);
    say("A rate limit is a number of calls of 1 or more, or empty for none.", true);
    calls.focus();
    return;
  }
  var rule = ruleFromForm();
  var isNew = policy.editing < 0;
  if (isNew) policy.rules.push(rule);
  else policy.rules[policy.editing] = rule;
  closePolicyForm();
  policyChanged(
    `${isNew ? "Added" : "Updated"} ${rule.name}. Preview to see what it would have decided; Save to apply.`,
  );
  byId("policies-heading").focus();
});
byId("policy-cancel").addEventListener("click", () => {
  closePolicyForm();
  byId("policies-heading").focus();
});

/* ---------- preview, save, discard ---------- */
/** A refusal naming a rule by its place points at that rule's row. */
function policyFailure(error) {
  fail(error);
  var index = error.body?.error?.rule_index;
  if (typeof index === "number") {
    const rowNode = byId("policy-rules").tBodies[0].rows[index];
    if (rowNode) rowNode.classList.add("invalid");
  }
}
function previewSummary(preview) {
  var t = preview.totals;
  var days = preview.truncated
    ? "the last 7 days (not every call: the preview stopped at its limit)"
    : "the last 7 days";
  return (
    `Over ${preview.calls} call${preview.calls === 1 ? "" : "s"} of ${days}, these rules would have allowed ${t.allow}, ` +
    `asked for approval on ${t.ask}, denied ${t.deny} and rate-limited ${t.rate_limited}; ${t.none} matched no rule ` +
    `(approvals decide). ${preview.changed} call${preview.changed === 1 ? "" : "s"} would have been decided otherwise than by the saved rules.`
  );
}
var previewButton = byId("policy-preview");
previewButton.addEventListener("click", () =>
  act(previewButton, () =>
    api("POST", "/api/policies/preview", { rules: policy.rules }).then((preview) => {
      policy.preview = preview;
      renderPolicies();
      byId("policy-preview-summary").textContent = previewSummary(preview);
      byId("policy-preview-result").hidden = false;
      byId("policy-preview-heading").focus();
    }, policyFailure),
  ),
);
/** What the saved list trusts that its author may not have meant (PUT's `warnings`), or nothing. */
function showPolicyWarnings(warnings) {
  var list = byId("policy-warnings-list");
  list.replaceChildren(
    ...warnings.map((text) => {
      var item = document.createElement("li");
      item.textContent = text;
      return item;
    }),
  );
  byId("policy-warnings").hidden = warnings.length === 0;
}
var saveButton = byId("policy-save");
saveButton.addEventListener("click", () =>
  act(saveButton, () =>
    api("PUT", "/api/policies", { rules: policy.rules }, false, { "if-match": `"${policy.version}"` }).then(
      (json) => {
        if (json.status === "pending") {
          // Nothing applied: the proposal waits for another member; the edits stay as they are.
          policy.proposal = json.proposal;
          renderPolicies();
          return showProposal().then(() => {
            say(
              "Not saved yet: these rules may allow calls the saved ones do not, so a second member must confirm them. " +
                "They are kept as a proposal until then.",
            );
            byId("policy-proposal-heading").focus();
          });
        }
        policy.version = json.version;
        policy.saved = json.rules;
        policy.rules = json.rules.map((r) => JSON.parse(JSON.stringify(r)));
        policyChanged(
          `Saved version ${json.version}: ${json.rules.length} rule${json.rules.length === 1 ? "" : "s"} in force.` +
            (json.warnings.length ? " Read the caution below the rules." : ""),
        );
        showPolicyWarnings(json.warnings);
        // Any save applied drops a proposal waiting (it was made from the list replaced).
        policy.proposal = null;
        return showProposal();
      },
      (failure) => {
        if (failure.code === "stale_version") {
          failure.message = `Someone saved version ${failure.body.error.version} since you loaded version ${policy.version}. Your changes are kept here: Discard to load theirs, then make your change again.`;
        }
        return policyFailure(failure);
      },
    ),
  ),
);
var discardButton = byId("policy-discard");
discardButton.addEventListener("click", () => {
  policy.rules = [];
  policy.saved = [];
  closePolicyForm();
  act(discardButton, () =>
    loadPolicies().then(() => say("Discarded your changes; showing the saved rules.")),
  );
});

/** #policies?agent=&host=&method=&path= (the Inbox's "Make a rule from this"): the form, prefilled. */
function prefillFromHash() {
  if (sectionInHash() !== "policies") return;
  var query = new URLSearchParams(location.hash.split("?")[1] || "");
  if (!query.has("host") && !query.has("path") && !query.has("agent")) return;
  var match = {};
  if (query.get("agent")) match.agents = [query.get("agent")];
  if (query.get("item")) match.items = [query.get("item")];
  if (query.get("host")) match.hosts = [query.get("host")];
  if (query.get("method")) match.methods = [query.get("method")];
  if (query.get("path")) match.paths = [query.get("path").split("?")[0]];
  var from = byId("policy-form-from");
  // The agent by the name this organisation knows it by, never a name the link carries: any site
  // can link here, and a rule "from the request of" a trusted bot must be that bot's. The clients
  // are asked for when this tab has not listed them yet.
  var agentId = query.get("agent") || "";
  var sayFrom = () => {
    var agent = !agentId
      ? "an agent"
      : agentName(agentId) !== agentId
        ? agentName(agentId)
        : `${agentId}, which is not a client here`;
    from.textContent = `From the request of ${agent}: narrow or widen it, then Add rule and Save.`;
  };
  sayFrom();
  if (agentId && agentName(agentId) === agentId) loaders.clients().then(sayFrom);
  from.hidden = false;
  openPolicyForm(-1, {
    name: `${query.get("method") || ""} ${query.get("host") || ""}`.trim(),
    effect: "allow",
    match: match,
    enabled: true,
  });
  history.replaceState(null, "", "#policies");
}
window.addEventListener("hashchange", prefillFromHash);
window.addEventListener("DOMContentLoaded", prefillFromHash);
loaders.policies = () => loadPolicies(false).then(prefillFromHash);
