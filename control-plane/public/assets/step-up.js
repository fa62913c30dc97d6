// The step-up prompt (after common.js and passkeys.js). When the API answers 403 step_up_required
// (a standing approval, members and roles, policies, single sign-on: DECISIONS "Passkeys and single
// sign-on"), api() calls stepUp(): a dialog asks for the method the server named (a passkey, an
// authenticator code, or signing in again with SSO), and the request is sent once more when it is
// done. Concurrent refusals share one prompt.
"use strict";
var stepUpBox = buildStepUpBox();

/** The prompt's dialog, the same on every page that loads this file (the console, collect). */
function buildStepUpBox() {
  function part(tag, attributes, children) {
    var node = document.createElement(tag);
    for (var name of Object.keys(attributes)) {
      if (name === "text") node.textContent = attributes.text;
      else if (name === "hidden") node.hidden = true;
      else node.setAttribute(name, attributes[name]);
    }
    for (var child of children || []) node.append(child);
    return node;
  }
  var box = part(
    "dialog",
    {
      id: "step-up",
      class: "step-up",
      "aria-labelledby": "step-up-heading",
      "aria-describedby": "step-up-why",
    },
    [
      part("h2", { id: "step-up-heading", text: "Confirm it is you" }),
      part("p", { id: "step-up-why" }),
      part("p", { id: "step-up-passkey", hidden: true }, [
        part("button", { type: "button", id: "step-up-passkey-button", text: "Confirm with your passkey" }),
      ]),
      part("form", { id: "step-up-totp", novalidate: "", hidden: true }, [
        // A backup code signs in; it confirms nothing on a signed-in session (auth/step-up.ts).
        part("label", { for: "step-up-code", text: "Code from your authenticator app" }),
        part("input", {
          id: "step-up-code",
          name: "code",
          type: "text",
          autocomplete: "one-time-code",
          autocapitalize: "characters",
          spellcheck: "false",
          maxlength: "32",
          required: "",
        }),
        part("button", { type: "submit", id: "step-up-code-button", text: "Confirm" }),
      ]),
      part("p", { id: "step-up-sso", hidden: true }, [
        part("a", { id: "step-up-sso-link", href: "/sign-in", text: "Sign in again with single sign-on" }),
      ]),
      part("p", { id: "step-up-problem", class: "status error", role: "alert" }),
      part("p", {}, [
        part("button", { type: "button", id: "step-up-cancel", class: "secondary", text: "Cancel" }),
      ]),
    ],
  );
  document.body.append(box);
  return box;
}
var stepUpInFlight = null;
/**
 * The control the operator last focused outside the prompt: focus goes back there. (The button that
 * asked is disabled while its request runs, and a disabled button drops focus, so the focused
 * element when the prompt opens is the page's body.)
 */
var stepUpOpener = null;
document.addEventListener("focusin", (event) => {
  if (!stepUpBox.contains(event.target)) stepUpOpener = event.target;
});

/** Shows the prompt for `error` ({code, message, methods}); resolves once the session is verified. */
window.stepUp = (error) => {
  stepUpInFlight ??= askStepUp(error).finally(() => {
    stepUpInFlight = null;
  });
  return stepUpInFlight;
};

function askStepUp(error) {
  var methods = Array.isArray(error.methods) ? error.methods : ["totp"];
  var method = methods[0];
  var opener = stepUpOpener;
  byId("step-up-why").textContent = sentence(error.message);
  byId("step-up-passkey").hidden = method !== "passkey";
  byId("step-up-totp").hidden = method !== "totp";
  byId("step-up-sso").hidden = method !== "sso";
  if (method === "sso") {
    // Signing in again through the provider, which is asked to check the person afresh.
    api("GET", "/api/auth/me").then((me) => {
      if (!me.organisation) return;
      var back = `/console${/^#[a-z]+$/.test(location.hash) ? location.hash : ""}`;
      byId("step-up-sso-link").href =
        `/sso/${encodeURIComponent(me.organisation.slug)}?step_up=1&return_to=${encodeURIComponent(back)}`;
    }, fail);
  }
  byId("step-up-problem").textContent = "";
  byId("step-up-code").value = "";
  return new Promise((resolve, reject) => {
    var isSettled = false;
    function settle(ok, reason) {
      if (isSettled) return;
      isSettled = true;
      cleanUp();
      if (stepUpBox.open) stepUpBox.close();
      // Back where the operator was, once the control that asked is enabled again (act() re-enables
      // it when the request it runs has settled, a few microtasks from now).
      setTimeout(() => {
        if (opener && typeof opener.focus === "function" && opener.isConnected) opener.focus();
      }, 0);
      if (ok) resolve();
      else reject(reason);
    }
    function problem(failure) {
      byId("step-up-problem").textContent = failure?.message || "That did not work. Try again.";
    }
    function onPasskey() {
      var control = byId("step-up-passkey-button");
      control.disabled = true;
      verifyWithPasskey()
        .then(() => settle(true), problem)
        .then(() => {
          control.disabled = false;
        });
    }
    function onCode(event) {
      event.preventDefault();
      var code = byId("step-up-code").value.trim();
      if (!code) {
        problem({ message: "Enter a code from your authenticator app." });
        byId("step-up-code").focus();
        return;
      }
      var control = byId("step-up-code-button");
      control.disabled = true;
      api("POST", "/api/auth/totp/verify", { code: code })
        .then(() => settle(true), problem)
        .then(() => {
          control.disabled = false;
        });
    }
    function onCancel(event) {
      if (event) event.preventDefault();
      var cancelled = new Error("Not done: the verification was cancelled.");
      cancelled.status = 403;
      settle(false, cancelled);
    }
    function cleanUp() {
      byId("step-up-passkey-button").removeEventListener("click", onPasskey);
      byId("step-up-totp").removeEventListener("submit", onCode);
      byId("step-up-cancel").removeEventListener("click", onCancel);
      stepUpBox.removeEventListener("cancel", onCancel);
    }
    byId("step-up-passkey-button").addEventListener("click", onPasskey);
    byId("step-up-totp").addEventListener("submit", onCode);
    byId("step-up-cancel").addEventListener("click", onCancel);
    stepUpBox.addEventListener("cancel", onCancel);
    stepUpBox.showModal();
    if (method === "passkey") byId("step-up-passkey-button").focus();
    else if (method === "totp") byId("step-up-code").focus();
    else byId("step-up-sso-link").focus();
  });
}
