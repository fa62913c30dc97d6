// The console's Inbox (after request-view.js): the requests waiting, each with exactly what it
// would send, decided once, for 8 hours or always (asking first what always covers), or denied;
// under the two-person rule an Always waits "1 of 2" for another member to confirm it; approval by
// code, in two steps (the code shows its request, which is then decided as an Inbox row is); and
// the requests for credentials. A role that may not decide sees the requests only.
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
/**
 * The request an approval code was found to belong to (POST /api/grants/find-by-code): shown under
 * the code form with the Inbox row's choices, and not in the table meanwhile, until it is decided,
 * waits no longer, or is closed. An agent can hand out the code of another request than the one it
 * names ("type A to approve my GET"): the operator decides the request seen, by its id.
 */
var codeFound = null;
/** Decisions a background redraw or the notification's scroll moved under the pointer (shifted-clicks.js). */
var inboxShifts = shiftGuard("inbox", () =>
  say(
    "The inbox changed just before that click: nothing was decided. Check the request, then choose again.",
    true,
  ),
);

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
    // What is drawn depends on the rows, the environment and the role (which decisions show).
    var snapshot = JSON.stringify([answer, environment, me ? me.permissions : null]);
    if (snapshot !== lastInbox) {
      lastInbox = snapshot;
      drawInbox(approvals, requests, count, isBackground);
    }
    if (!isBackground) showNotifiedRequest(approvals);
  });
}
/** The inbox of the environment shown, and a note of what waits in the others. */
function drawInbox(approvals, requests, count, isBackground) {
  var byCode = codeFound && approvals.find((g) => g.grant_id === codeFound.grant_id);
  // Decided or withdrawn meanwhile; a list cut at its 200 rows may just not show it.
  if (codeFound && !byCode && approvals.length < 200) codeFound = null;
  if (byCode) codeFound = byCode;
  var here = approvals.filter((g) => inEnvironment(g.environment_id) && g !== byCode);
  var asking = requests.filter((n) => inEnvironment(n.environment));
  elsewhereNote(
    "inbox-elsewhere",
    count - here.length - asking.length - (byCode ? 1 : 0),
    "request waiting",
    "requests waiting",
  );
  renderInbox(here, asking, isBackground);
}
/**
 * A push notification opens /console#inbox?grant=<id>: once the inbox is drawn, that request's row
 * is marked, brought into view and its header cell focused; a request that waits no longer, or
 * waits in another environment, is said so. The address then goes back to #inbox, so that no
 * redraw does it again.
 */
function showNotifiedRequest(approvals) {
  var id = new URLSearchParams(location.hash.split("?")[1] || "").get("grant");
  if (sectionInHash() !== "inbox" || !id) return;
  history.replaceState(null, "", "#inbox");
  var grant = approvals.find((g) => g.grant_id === id);
  if (!grant) {
    say("The request from the notification is no longer waiting: it was decided, withdrawn or has expired.");
    return;
  }
  var label = `${grant.item_name} for ${grant.agent_name || agentName(grant.agent_id)}`;
  var tr = byId("inbox").querySelector(`tr[data-grant="${CSS.escape(id)}"]`);
  if (!tr) {
    say(
      `The request from the notification (${label}) waits in the ${grant.environment_id} environment: switch to it.`,
    );
    return;
  }
  for (var other of byId("inbox").querySelectorAll("tr.notified")) other.classList.remove("notified");
  tr.classList.add("notified");
  tr.scrollIntoView({ block: "center" });
  // Scrolled there by the page, not the operator: the row's decisions are where the link's author
  // chose, under a pointer aimed at their page (a double-click it asked for), so for a second a
  // click on any of them decides nothing, as after a redraw.
  inboxShifts.markAll();
  // The row's header takes focus, never a decision: anyone can link here (an agent knows the id
  // from its pending answer), and a page that has the operator keep pressing Enter or Space, then
  // opens this address, must not have the next key approve (keyjacking, as on the consent page).
  // A click decides at once; a keyboard user tabs to the decisions.
  var header = tr.querySelector("th");
  header.tabIndex = -1;
  header.focus();
  say(`The request from the notification: ${label}.`);
}
/** Redraws the inbox; a focused decision button keeps focus across a background redraw. */
function renderInbox(approvals, requests, isBackground) {
  var before = isBackground ? inboxShifts.places() : [];
  var focused = document.activeElement?.getAttribute("data-key");
  var isShown = (id) => approvals.some((g) => g.grant_id === id) || codeFound?.grant_id === id;
  if (alwaysOpen && !isShown(alwaysOpen.grantId)) alwaysOpen = null;
  fillTable("pending-approvals", approvals.map(approvalRow), "pending-approvals-empty");
  fillTable("requests", requests.map(requestRow), "requests-empty");
  byId("code-request").hidden = !codeFound;
  fillTable("code-approval", codeFound ? [approvalRow(codeFound)] : []);
  if (before.length) inboxShifts.markShifted(before);
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
/**
 * "Make a rule from this" for a pending request: the Policies form prefilled with its agent (by
 * client id, which no other client can take), credential, host, method and path.
 */
function policyRuleLink(grant, label) {
  var query = new URLSearchParams({ agent: grant.agent_id, name: grant.agent_name || grant.agent_id });
  if (grant.item_name) query.set("item", grant.item_name);
  if (grant.call) {
    query.set("host", grant.call.host);
    query.set("method", grant.call.method);
    query.set("path", grant.call.path.split("?")[0]);
  }
  var link = el("a", "Make a rule from this", "rule-link");
  link.href = `#policies?${query}`;
  link.setAttribute("aria-label", `Make a rule from this: ${label}`);
  return link;
}
/** What a standing approval covers, in words: its scope choice, or the scope the grant carries. */
function standingCoverText(grant, scope) {
  if (scope === "credential")
    return `the whole credential, any method and path on ${hostsText(grant.allowed_hosts)}`;
  if (scope === "path_prefix" && grant.call) {
    return `${grant.call.method} on ${grant.call.host} under ${pathPrefix(grant.call.path)}`;
  }
  if (grant.scope) {
    return `${grant.scope.method || "any method"} on ${grant.scope.host || hostsText(grant.allowed_hosts)}${grant.scope.path ? ` under ${grant.scope.path}` : ""}`;
  }
  return `the whole credential, any method and path on ${hostsText(grant.allowed_hosts)}`;
}
/**
 * The two-person rule: who gave the first approval and what it covers ("1 of 2"); the member who
 * gave it waits for another, who may confirm that same approval, approve once instead, or deny.
 */
function twoPersonCell(grant, label, decide) {
  var first = grant.first_approval;
  var isMine = first.email === me.email;
  var note = el("p", null, "two-person");
  note.append(
    el("strong", grant.approvals || "1 of 2"),
    ` approvals: ${isMine ? "you" : first.email || "a member"} approved ${first.policy === "folder_standing" ? "always, for the whole folder" : "always"} (${standingCoverText(grant, first.scope)})${first.at ? `, ${when(first.at)}` : ""}.`,
  );
  decide.appendChild(note);
  if (!may("approvals.decide")) return;
  if (isMine) {
    decide.appendChild(el("p", "Waiting for another member to confirm it.", "hint"));
  } else if (first.policy === "folder_standing") {
    decide.appendChild(
      el("p", "An owner confirms a whole-folder approval, typing the folder's name.", "hint"),
    );
  } else {
    const confirm = button("Confirm always", `Confirm always allow, as approved first: ${label}`, false);
    confirm.setAttribute("data-key", `${grant.grant_id}:confirm`);
    confirm.addEventListener("click", (event) => {
      if (inboxShifts.isShifted(event, confirm)) return;
      act(confirm, () =>
        api("POST", `/api/grants/${enc(grant.grant_id)}/approve`, { policy: first.policy }).then(() =>
          inboxChanged(`Confirmed: ${label} is allowed always (2 of 2).`),
        ),
      );
    });
    const once = button("Approve once", `Approve once instead: ${label}`, true);
    once.setAttribute("data-key", `${grant.grant_id}:prompt`);
    once.addEventListener("click", (event) => {
      if (inboxShifts.isShifted(event, once)) return;
      act(once, () => approve(grant, label, "prompt"));
    });
    decide.append(confirm, once);
  }
  decide.appendChild(denyButton(grant, label));
}
function approvalRow(grant) {
  var label = `${grant.item_name} for ${grant.agent_name || agentName(grant.agent_id)}`;
  var decide = el("td", null, "actions-cell");
  if (grant.first_approval) twoPersonCell(grant, label, decide);
  else if (!may("approvals.decide")) decide.textContent = "Waiting for a member who may approve";
  else if (alwaysOpen && alwaysOpen.grantId === grant.grant_id)
    decide.appendChild(alwaysChooser(grant, label));
  else decide.append.apply(decide, decisionButtons(grant, label));
  if (may("policies.write")) decide.appendChild(policyRuleLink(grant, label));
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
  var tr = row([
    rowHeader(grant.item_name),
    grant.environment_id,
    agentCell(grant.agent_name, grant.agent_id),
    request,
    grant.task_description,
    timeCell(grant.created_at),
    decide,
  ]);
  tr.setAttribute("data-grant", grant.grant_id);
  return tr;
}
function approve(grant, label, policy, scope) {
  var body = scope ? { policy: policy, scope: scope } : { policy: policy };
  return api("POST", `/api/grants/${enc(grant.grant_id)}/approve`, body).then((answer) => {
    alwaysOpen = null;
    // The two-person rule: the first of two approvals leaves it waiting for another member.
    if (answer.grant.status === "pending" && answer.grant.approvals === "1 of 2") {
      return inboxChanged(
        `Approved ${label} ${POLICY_TEXT[policy]}: 1 of 2. Another member must confirm it.`,
      );
    }
    return inboxChanged(`Approved ${label} ${POLICY_TEXT[policy]}.`);
  });
}
/**
 * Approves from the decision `opener`. A body over 64 KiB is shown cut: approving it approves what
 * the operator could not read, so that is asked first.
 */
function approveFrom(opener, grant, label, policy, scope) {
  if (!grant.body?.is_cut) {
    act(opener, () => approve(grant, label, policy, scope));
    return;
  }
  confirmStep(
    opener,
    "Only the first 64 KiB of this request's body is shown. Approve it without reading the rest?",
    "Approve unread",
    () => approve(grant, label, policy, scope),
  );
}
/** Deny: a pending request is refused (the grant endpoint's revoke); it never becomes usable. */
function denyButton(grant, label) {
  var deny = button("Deny", `Deny: ${label}`, true);
  deny.classList.add("deny");
  deny.setAttribute("data-key", `${grant.grant_id}:deny`);
  deny.addEventListener("click", (event) => {
    if (inboxShifts.isShifted(event, deny)) return;
    act(deny, () =>
      api("POST", `/api/grants/${enc(grant.grant_id)}/revoke`).then(() =>
        inboxChanged(`Denied the request for ${label}.`),
      ),
    );
  });
  return deny;
}
function decisionButtons(grant, label) {
  var buttons = DECISIONS.map((decision) => {
    var b = button(
      decision[1],
      `${decision[0] === "session" ? "Approve for 8 hours" : decision[1]}: ${label}`,
      decision[0] !== "prompt",
    );
    b.setAttribute("data-key", `${grant.grant_id}:${decision[0]}`);
    b.addEventListener("click", (event) => {
      if (inboxShifts.isShifted(event, b)) return;
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
      approveFrom(b, grant, label, decision[0]);
    });
    return b;
  });
  buttons.push(denyButton(grant, label));
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
  confirm.addEventListener("click", (event) => {
    if (inboxShifts.isShifted(event, confirm)) return;
    approveFrom(confirm, grant, label, "item_standing", alwaysOpen.scope);
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
  connect.addEventListener("click", (event) => {
    if (inboxShifts.isShifted(event, connect)) return;
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
  var path = need.kind === "secret" && may("credentials.write") ? sameSitePath(need.collect_url || "") : "";
  if (path) {
    const link = el("a", "Enter the value");
    link.href = path;
    link.setAttribute("aria-label", `Enter the value for ${need.suggested_name || need.host}`);
    answer.appendChild(link);
  }
  if (need.kind === "connect" && need.provider && may("credentials.write"))
    answer.appendChild(connectButton(need));
  if (!may("approvals.decide")) {
    if (!answer.firstChild) answer.textContent = "Waiting for a member who may store it";
  } else {
    answer.appendChild(requestDenyButton(need));
  }
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
    // An agent that named only the credential named no host: the operator gives it when storing.
    need.host || "not named yet",
    agentCell(need.client_name, need.client_id),
    request,
    need.message,
    timeCell(need.created_at),
    answer,
  ]);
}
function requestDenyButton(need) {
  var deny = button("Deny", `Deny the request for ${need.suggested_name || need.host}`, true);
  deny.setAttribute("data-key", `${need.need_id}:deny`);
  deny.addEventListener("click", (event) => {
    if (inboxShifts.isShifted(event, deny)) return;
    act(deny, () =>
      api("POST", `/api/need-items/${enc(need.need_id)}/deny`).then(() =>
        inboxChanged(`Denied the request for ${need.suggested_name || need.host}.`),
      ),
    );
  });
  return deny;
}
var codeForm = byId("code-form");
/** The code's first step: find the request it belongs to and show it; nothing is approved here. */
onSubmit(codeForm, () => {
  var field = byId("approval-code"),
    code = field.value.replace(/\s+/g, "");
  if (!/^\d{8}$/.test(code)) return refuse(field, "An approval code has 8 digits.");
  busy(
    codeForm,
    api("POST", "/api/grants/find-by-code", { code: code }).then((answer) => {
      field.value = "";
      var grant = answer.approval;
      codeFound = grant;
      alwaysOpen = null;
      lastInbox = "";
      var call = grant.call ? `${grant.call.method} ${grant.call.host}${grant.call.path}` : "any call";
      return loadInbox(false).then(() => {
        say(
          `The code is for ${call} with ${grant.item_name} by ${grant.agent_name || agentName(grant.agent_id)}: check it below, then decide.`,
        );
        byId("code-request-heading").focus();
      });
    }),
    field,
  );
});
byId("code-request-close").addEventListener("click", () => {
  codeFound = null;
  lastInbox = "";
  loadInbox(false)
    .then(() => {
      byId("approval-code").focus();
    })
    .catch(fail);
});
loaders.inbox = () => loadInbox(false);
// Polling is the fallback: while the live stream is open (console-live.js) it redraws the inbox,
// and polling only looks once a minute for what no event tells (a credential deleted meanwhile).
var inboxTicks = 0;
setInterval(() => {
  inboxTicks += 1;
  var isLive = window.latchLiveInbox?.isOpen;
  // Drawn once the account is known: which decisions it shows depends on the role.
  if (me && !document.hidden && (!isLive || inboxTicks % 12 === 0)) loadInbox(true).catch(fail);
}, 5000);
meReady.then(() => {
  if (currentSection !== "inbox") loadInbox(false).catch(fail);
});
