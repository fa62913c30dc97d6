// Members: the organisation's single sign-on (after console-members.js, whose loader this one
// joins). Every member sees whether it is on and where to sign in; an owner connects the identity
// provider (issuer, client ID, client secret, email domains, the role a new address joins as, and
// whether those domains must sign in with it) or disconnects it. Saving asks for a step-up first
// (step-up.js); the client secret is never shown again, only its last four characters.
"use strict";
var ssoConnection = null;

function loadSso() {
  return api("GET", "/api/orgs/sso").then((answer) => {
    ssoConnection = answer.connection;
    var c = answer.connection;
    byId("sso-summary").hidden = !c;
    byId("sso-remove").hidden = !c;
    byId("sso-redirect-uri").textContent = answer.redirect_uri;
    if (!c) {
      byId("sso-state").textContent =
        `No identity provider is connected. Its redirect URI will be ${answer.redirect_uri}.`;
      return;
    }
    byId("sso-state").textContent =
      `Signs in ${c.email_domains.join(", ")} addresses through ${c.issuer}` +
      `${c.require_sso ? ", and only that way" : ""}; a new address joins as ${c.default_role}.` +
      `${c.client_secret_last4 ? ` Client secret ends in ${c.client_secret_last4}.` : ""}`;
    byId("sso-sign-in-url").textContent = c.sign_in_url;
    byId("sso-issuer").value = c.issuer;
    byId("sso-client-id").value = c.client_id;
    byId("sso-client-secret").value = "";
    byId("sso-domains").value = c.email_domains.join(", ");
    byId("sso-role").value = c.default_role;
    byId("sso-require").checked = c.require_sso;
  });
}

var ssoForm = byId("sso-form");
onSubmit(ssoForm, () => {
  var issuer = byId("sso-issuer");
  var clientId = byId("sso-client-id");
  var secret = byId("sso-client-secret");
  var domains = byId("sso-domains");
  if (!issuer.value.trim()) return refuse(issuer, "Enter the identity provider's issuer (an https address).");
  if (!clientId.value.trim()) return refuse(clientId, "Enter the client ID the provider gave Latch.");
  if (!ssoConnection && !secret.value)
    return refuse(secret, "Enter the client secret the provider gave Latch.");
  if (!listOf(domains.value).length)
    return refuse(domains, "Enter at least one email domain, such as example.com.");
  var body = {
    issuer: issuer.value.trim(),
    client_id: clientId.value.trim(),
    email_domains: listOf(domains.value.toLowerCase()),
    default_role: byId("sso-role").value,
    require_sso: byId("sso-require").checked,
  };
  if (secret.value) body.client_secret = secret.value;
  busy(
    ssoForm,
    api("PUT", "/api/orgs/sso", body).then(() => {
      secret.value = "";
      say("Saved. Members of those domains can sign in with single sign-on.");
      return loadSso();
    }),
    issuer,
  );
});

var ssoRemove = byId("sso-remove");
ssoRemove.addEventListener("click", () => {
  confirmStep(
    ssoRemove,
    "Disconnect the identity provider? Its members sign in with email codes again.",
    "Disconnect",
    () =>
      api("DELETE", "/api/orgs/sso").then(() => {
        say("Disconnected the identity provider.");
        byId("sso-heading").focus();
        return loadSso();
      }),
  );
});

var loadMembersWithoutSso = loaders.members;
loaders.members = () => Promise.all([loadMembersWithoutSso(), loadSso()]);
