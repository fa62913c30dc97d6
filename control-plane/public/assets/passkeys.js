// Passkey ceremonies (after common.js and simplewebauthn-browser.js, @simplewebauthn/browser's
// bundle served from our own origin): sign in with a passkey, the second step, a step-up, adding
// one. The server judges every answer; this file only carries options in and the answer out.
// biome-ignore-all lint/correctness/noUnusedVariables: the scripts loaded after this one call its functions
"use strict";
var webauthn = window.SimpleWebAuthnBrowser;

/**
 * Whether passkeys work here: WebAuthn in this browser, and a site named by a domain (an RP id is
 * never an IP address, so a plane opened at 127.0.0.1 offers none).
 */
function canUsePasskeys() {
  var isAddress = /^[\d.]+$|^\[/.test(location.hostname);
  return !isAddress && Boolean(webauthn?.browserSupportsWebAuthn());
}

/** A browser's refusal as a sentence: a closed prompt is the person's choice, not a failure. */
function passkeyProblem(error) {
  var sentences = {
    NotAllowedError: "The passkey prompt was closed or timed out. Try again when you are ready.",
    AbortError: "The passkey prompt was closed or timed out. Try again when you are ready.",
    InvalidStateError: "This device already holds a passkey of yours for Latch.",
  };
  if (!error || !Object.hasOwn(sentences, error.name)) return error;
  var told = new Error(sentences[error.name]);
  told.status = 400;
  return told;
}

/** "Sign in with a passkey": no email, no code; the passkey names the account. */
function signInWithPasskey() {
  return api("POST", "/api/auth/passkey/sign-in/options", {})
    .then((options) => webauthn.startAuthentication({ optionsJSON: options }))
    .catch((error) => {
      throw passkeyProblem(error);
    })
    .then((response) => api("POST", "/api/auth/passkey/sign-in", { response: response }));
}

/** The signed-in session proves its user with a passkey: the second step, or a step-up. */
function verifyWithPasskey() {
  return api("POST", "/api/auth/passkey/options", {})
    .then((options) => webauthn.startAuthentication({ optionsJSON: options }))
    .catch((error) => {
      throw passkeyProblem(error);
    })
    .then((response) => api("POST", "/api/auth/passkey/verify", { response: response }));
}

/** Creates a passkey on this device and registers it under `name`. */
function addPasskey(name) {
  return api("POST", "/api/auth/passkeys/options", {})
    .then((options) => webauthn.startRegistration({ optionsJSON: options }))
    .catch((error) => {
      throw passkeyProblem(error);
    })
    .then((response) => api("POST", "/api/auth/passkeys", { name: name, response: response }));
}
