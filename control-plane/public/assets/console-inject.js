// The Vault's "Inject as" (after console.js): a choice of the inject modes, with the name a header,
// parameter or cookie needs, read back from a stored mode when a credential is edited.
"use strict";
/* ---------- inject as: a choice, with the name a header, parameter or cookie needs ---------- */
var INJECT_MODES = [
  ["bearer", "Bearer token (Authorization: Bearer)", "The value goes in Authorization: Bearer."],
  [
    "basic",
    "Basic (user name and password)",
    "Authorization: Basic with the user name below and the value as password.",
  ],
  ["header:", "A header of its own", "The value goes in the header you name, for example X-Api-Key."],
  ["query:", "A query parameter", "The value is added as the query parameter you name, for example api_key."],
  ["cookie:", "A cookie", "The value is sent as the cookie you name."],
  [
    "client_credentials",
    "Provider app (client credentials)",
    "A provider app's client secret: the client ID goes in User name or client ID below.",
  ],
  ["sigv4", "AWS Signature Version 4", "The secret access key; the access key ID goes in User name below."],
  ["hmac:stripe_sig", "Stripe webhook signature", "Signs the body as Stripe does (Stripe-Signature)."],
  ["hmac:slack_sig", "Slack request signature", "Signs the body as Slack does (X-Slack-Signature)."],
  ["hmac:github_sig", "GitHub webhook signature", "Signs the body as GitHub does (X-Hub-Signature-256)."],
];
function injectNeedsName(mode) {
  return /:$/.test(mode);
}
/** The inject mode a form's choice and name make ("" when a name is needed and missing). */
// biome-ignore lint/correctness/noUnusedVariables: console.js reads the forms' modes with it
function injectValue(selectId) {
  var mode = byId(selectId).value;
  if (!injectNeedsName(mode)) return mode;
  var name = byId(`${selectId}-name`).value.trim();
  return name ? mode + name : "";
}
function showInjectChoice(selectId) {
  var select = byId(selectId);
  var mode = INJECT_MODES.filter((m) => m[0] === select.value)[0];
  select.form.querySelector(".inject-name").hidden = !injectNeedsName(select.value);
  select.form.querySelector(".inject-hint").textContent = mode ? mode[2] : "";
}
/** Sets a form's choice from a stored mode ("header:X-Api-Key" is "A header" named X-Api-Key). */
function setInject(selectId, stored) {
  var select = byId(selectId);
  var prefix = /^(header|query|cookie):/.exec(stored || "");
  var known = INJECT_MODES.some((m) => m[0] === stored);
  if (prefix) {
    select.value = prefix[0];
    byId(`${selectId}-name`).value = stored.slice(prefix[0].length);
  } else if (known) {
    select.value = stored;
    byId(`${selectId}-name`).value = "";
  } else {
    // A mode this list does not offer (refresh, made by a connect): kept as it is.
    const option = el("option", stored);
    option.value = stored;
    select.appendChild(option);
    select.value = stored;
  }
  showInjectChoice(selectId);
}
["item-inject", "edit-inject"].forEach((id) => {
  var select = byId(id);
  INJECT_MODES.forEach((mode) => {
    var option = el("option", mode[1]);
    option.value = mode[0];
    select.appendChild(option);
  });
  select.addEventListener("change", () => showInjectChoice(id));
  setInject(id, "bearer");
});
