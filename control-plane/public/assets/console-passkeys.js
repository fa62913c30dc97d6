// Access: the operator's passkeys (name, added, last used) with Add and Remove, and removing the
// authenticator app once a passkey stands in for it (after console-activity.js, whose Access
// loader this one joins). Adding or removing asks for a fresh verification first (step-up.js); the
// server refuses to remove the last way to sign in besides the email code.
"use strict";
var accountFactors = { totp: false, passkeys: 0 };
/** What the passkeys table and the authenticator line were last drawn from. */
var passkeysDrawn = "";
/** How to open each Remove of Access again (by "passkey:<id>" or "totp"), as last drawn. */
var removers = {};

/**
 * The Remove being confirmed in Access, if any: which one, and which of its buttons has the focus
 * (-1: neither). One whose Remove it is being sent is left to its answer, which draws the table.
 */
function openConfirmation() {
  var group = document.querySelector("#passkeys .confirm, #authenticator-state .confirm");
  var holder = group?.closest("[data-remove]");
  if (!holder) return null;
  var buttons = Array.prototype.slice.call(group.querySelectorAll("button"));
  if (buttons.some((b) => b.disabled)) return null;
  return { key: holder.getAttribute("data-remove"), focus: buttons.indexOf(document.activeElement) };
}

/**
 * A redraw (a passkey used elsewhere changes its "last used") keeps a Remove being confirmed open,
 * with the focus where it was; one whose passkey is gone goes with it.
 */
function reopenConfirmation(open) {
  if (!open || !removers[open.key]) return;
  var focusedBefore = document.activeElement;
  removers[open.key]();
  var group = document.querySelector(`[data-remove="${CSS.escape(open.key)}"] .confirm`);
  var buttons = group ? group.querySelectorAll("button") : [];
  if (open.focus >= 0 && buttons[open.focus]) buttons[open.focus].focus();
  else if (focusedBefore?.isConnected && focusedBefore !== document.body) focusedBefore.focus();
}

function loadPasskeys() {
  return Promise.all([api("GET", "/api/auth/passkeys"), api("GET", "/api/auth/me")]).then((answers) => {
    var passkeys = answers[0].passkeys;
    accountFactors = { totp: answers[1].totp_enabled, passkeys: passkeys.length };
    // The app removed or added meanwhile: the backup codes form asks for what the account has.
    if (me) {
      me.totp_enabled = answers[1].totp_enabled;
      showRegenForm(me);
    }
    // Loaded again with nothing changed (the section shown twice while the page starts): the rows
    // stay as they are, so a Remove the person has begun to confirm is not drawn away under them.
    var drawing = JSON.stringify([passkeys, accountFactors]);
    if (drawing === passkeysDrawn) return;
    passkeysDrawn = drawing;
    var open = openConfirmation();
    removers = {};
    fillTable(
      "passkeys",
      passkeys.map((passkey) => {
        var remove = button("Remove", `Remove the passkey ${passkey.name}`, true);
        var key = `passkey:${passkey.id}`;
        removers[key] = () => {
          confirmStep(remove, `Remove the passkey ${passkey.name}?`, "Remove it", () =>
            api("DELETE", `/api/auth/passkeys/${enc(passkey.id)}`).then(() =>
              passkeysChanged(`Removed the passkey ${passkey.name}.`),
            ),
          );
        };
        remove.addEventListener("click", removers[key]);
        var action = el("td");
        action.setAttribute("data-remove", key);
        action.appendChild(remove);
        return row([
          rowHeader(passkey.name),
          timeCell(passkey.created_at),
          passkey.last_used_at ? timeCell(passkey.last_used_at) : "Never",
          passkey.backed_up ? "Yes" : "No",
          action,
        ]);
      }),
      "passkeys-empty",
    );
    showAuthenticator();
    reopenConfirmation(open);
  });
}

/** The authenticator line of Access: replace it, set one up, or remove it beside a passkey. */
function showAuthenticator() {
  var cell = byId("authenticator-state");
  cell.setAttribute("data-remove", "totp");
  var link = el("a", accountFactors.totp ? "Replace your authenticator app" : "Set up an authenticator app");
  link.href = "/enroll-totp";
  cell.replaceChildren(link);
  if (!accountFactors.totp || accountFactors.passkeys === 0) return;
  var remove = button("Remove the authenticator app", null, true);
  removers.totp = () => {
    confirmStep(
      remove,
      "Remove the authenticator app? Your passkeys and backup codes still sign you in.",
      "Remove it",
      () => api("DELETE", "/api/auth/totp").then(() => passkeysChanged("Removed the authenticator app.")),
    );
  };
  remove.addEventListener("click", removers.totp);
  cell.append(" ", remove);
}

function passkeysChanged(message) {
  say(message);
  byId("passkeys-heading").focus();
  return loadPasskeys();
}

var passkeyForm = byId("passkey-form");
if (!canUsePasskeys()) {
  passkeyForm.hidden = true;
  byId("passkeys-empty").textContent = "No passkeys yet. This browser cannot make one.";
}
onSubmit(passkeyForm, () => {
  var name = byId("passkey-name");
  var value = name.value.trim();
  if (!value) return refuse(name, "Name the passkey, so you can tell it from others later.");
  busy(
    passkeyForm,
    addPasskey(value).then((answer) => {
      name.value = "";
      return passkeysChanged(`Added the passkey ${answer.passkey.name}.`);
    }),
    name,
  );
});

var loadAccessWithoutPasskeys = loaders.access;
loaders.access = () => Promise.all([loadAccessWithoutPasskeys(), loadPasskeys()]);
