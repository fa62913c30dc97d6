// The console's Members section (after console-approvals.js): the organisation's members and
// pending invitations, inviting with a role, changing a role, removing, withdrawing, leaving,
// handing ownership over, and the organisation's settings (name, the two-person rule) for owners.
// Which controls show is the role's (GET /api/orgs/members answers the roles the caller may give).
"use strict";
/* ---------- members ---------- */
var ROLE_HINTS = {
  owner:
    "Everything: credentials, clients, approvals, members, the organisation's settings and its deletion.",
  admin:
    "Stores credentials, issues clients, approves agents' requests, exports the audit and manages members (never an owner).",
  approver: "Approves, denies and revokes agents' requests; reads the vault's names, the audit and access.",
  auditor: "Reads the vault's names, the inbox, the approvals, the audit and access, and exports the audit.",
};
var assignableRoles = [];
var memberList = [];

function loadMembers() {
  return Promise.all([api("GET", "/api/orgs/members"), api("GET", "/api/orgs/settings")]).then((answers) => {
    var listed = answers[0];
    memberList = listed.members;
    assignableRoles = listed.assignable_roles || [];
    byId("members-organisation").textContent = answers[1].organisation.name;
    fillTable("members-table", memberList.map(memberRow));
    fillTable("invites", listed.invites.map(inviteRow), "invites-empty");
    inviteRoleOptions();
    transferOptions();
    showSettings(answers[1].organisation);
  });
}
function roleOptions(select, roles, chosen) {
  select.replaceChildren.apply(
    select,
    roles.map((role) => {
      var option = el("option", role);
      option.value = role;
      option.selected = role === chosen;
      return option;
    }),
  );
}
function inviteRoleOptions() {
  var select = byId("invite-role");
  var chosen = select.value || "approver";
  roleOptions(select, assignableRoles, assignableRoles.indexOf(chosen) >= 0 ? chosen : assignableRoles[0]);
  byId("invite-role-hint").textContent = ROLE_HINTS[select.value] || "";
}
byId("invite-role").addEventListener("change", () => {
  byId("invite-role-hint").textContent = ROLE_HINTS[byId("invite-role").value] || "";
});
/** Whether the caller may change or remove a member of `role` (an admin never touches an owner). */
function mayManage(role) {
  return assignableRoles.indexOf(role) >= 0;
}
function memberRow(member) {
  var isMe = member.email === me.email;
  var actions = el("td", null, "actions-cell");
  var role = el("td", member.role);
  if (!isMe && mayManage(member.role)) {
    const select = el("select");
    select.id = `role-${member.operator_id}`;
    select.setAttribute("aria-label", `Role of ${member.email}`);
    roleOptions(select, assignableRoles, member.role);
    const change = button("Change role", `Change role of ${member.email}`, true);
    change.addEventListener("click", () => {
      if (select.value === member.role) return say(`${member.email} is already an ${member.role}.`);
      act(change, () =>
        api("POST", `/api/orgs/members/${enc(member.operator_id)}/role`, { role: select.value }).then(
          (answer) => membersChanged(`${member.email} is now an ${answer.member.role}.`),
        ),
      );
    });
    const remove = button("Remove", `Remove ${member.email}`, true);
    remove.addEventListener("click", () => {
      confirmStep(
        remove,
        `Remove ${member.email}? Their sessions here end at once; what they approved stays.`,
        "Remove",
        () =>
          api("DELETE", `/api/orgs/members/${enc(member.operator_id)}`).then(() =>
            membersChanged(`Removed ${member.email}.`),
          ),
      );
    });
    role.replaceChildren(select);
    actions.append(change, remove);
  } else actions.textContent = isMe ? "You" : "—";
  return row([
    rowHeader(member.email),
    role,
    timeCell(member.joined_at),
    timeCell(member.last_seen_at, "Not yet"),
    actions,
  ]);
}
function inviteRow(invite) {
  var action = el("td", null, "actions-cell");
  if (mayManage(invite.role)) {
    const withdraw = button("Withdraw", `Withdraw the invitation of ${invite.email}`, true);
    withdraw.addEventListener("click", () => {
      act(withdraw, () =>
        api("DELETE", `/api/orgs/invites/${enc(invite.id)}`).then(() =>
          membersChanged(`Withdrew the invitation of ${invite.email}: its link no longer works.`),
        ),
      );
    });
    action.appendChild(withdraw);
  } else action.textContent = "—";
  return row([
    rowHeader(invite.email),
    invite.role,
    invite.invited_by.email || "",
    timeCell(invite.created_at),
    timeCell(invite.expires_at),
    action,
  ]);
}
function membersChanged(message) {
  say(message);
  byId("members-heading").focus();
  return loadMembers();
}
var inviteForm = byId("invite-form");
onSubmit(inviteForm, () => {
  var email = byId("invite-email");
  if (!/^[^\s@]+@[^\s@]+$/.test(email.value.trim()))
    return refuse(email, "Enter the colleague's email address.");
  var role = byId("invite-role").value;
  busy(
    inviteForm,
    api("POST", "/api/orgs/members/invite", { email: email.value.trim(), role: role }).then((answer) => {
      email.value = "";
      return membersChanged(
        answer.notify_failed
          ? `Invited ${answer.invite.email} as ${role}, but the mail could not be sent: withdraw it and invite again later.`
          : `Invited ${answer.invite.email} as ${role}. The link in their mail works for 7 days.`,
      );
    }),
    email,
  );
});

/* ---------- settings (owners change them; every member reads them) ---------- */
function showSettings(organisation) {
  byId("settings-name").value = organisation.name;
  byId("settings-slug").textContent = organisation.slug;
  byId(`settings-need-${organisation.standing_approvals_need === 2 ? 2 : 1}`).checked = true;
  byId("summary-name").textContent = organisation.name;
  byId("summary-slug").textContent = organisation.slug;
  byId("summary-need").textContent =
    organisation.standing_approvals_need === 2 ? "Two members (the two-person rule)" : "One member";
}
var settingsForm = byId("settings-form");
onSubmit(settingsForm, () => {
  var name = byId("settings-name");
  if (!name.value.trim()) return refuse(name, "Give the organisation a name.");
  var need = Number(settingsForm.querySelector('input[name="standing_approvals_need"]:checked').value);
  busy(
    settingsForm,
    api("PATCH", "/api/orgs/settings", { name: name.value.trim(), standing_approvals_need: need }).then(
      (answer) => {
        showSettings(answer.organisation);
        orgSwitch.options[orgSwitch.selectedIndex].textContent = answer.organisation.name;
        byId("organisation").textContent = answer.organisation.name;
        say(
          answer.organisation.standing_approvals_need === 2
            ? "Saved. Every Always allow now needs a second member to confirm it."
            : "Saved. One member's Always allow is in force at once.",
        );
      },
    ),
    name,
  );
});

/* ---------- transfer and leave ---------- */
function transferOptions() {
  var select = byId("transfer-to");
  var others = memberList.filter((m) => m.email !== me.email);
  select.replaceChildren.apply(
    select,
    others.map((m) => {
      var option = el("option", `${m.email} (${m.role})`);
      option.value = m.operator_id;
      return option;
    }),
  );
  byId("transfer-submit").disabled = others.length === 0;
}
var transferForm = byId("transfer-form");
onSubmit(transferForm, () => {
  var select = byId("transfer-to");
  var to = memberList.filter((m) => m.operator_id === select.value)[0];
  if (!to) return refuse(select, "Invite the member who will own it first.");
  confirmStep(
    byId("transfer-submit"),
    `Make ${to.email} the owner? You stay as an admin.`,
    "Transfer ownership",
    () =>
      api("POST", "/api/orgs/transfer", { operator_id: to.operator_id }).then(() => {
        say(`${to.email} owns this organisation now; you are an admin.`);
        location.reload();
      }),
  );
});
var leave = byId("leave");
leave.addEventListener("click", () => {
  confirmStep(leave, "Leave this organisation? You lose access to it at once.", "Leave", () =>
    api("POST", "/api/orgs/leave").then(() => {
      say("You left the organisation.");
      location.assign("/console");
    }),
  );
});
loaders.members = loadMembers;
