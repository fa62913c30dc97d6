// Members: the organisation's single sign-on (after console-members.js, whose loader this one
// joins). Every member sees whether it is on and where to sign in; an owner connects the identity
// provider (issuer, client ID, client secret, email domains, the role a new address joins as, and
// whether those domains must sign in with it) or disconnects it. Saving asks for a step-up first
// (step-up.js); the client secret is never shown again, only its last four characters. Each listed
// domain shows whether it is proven and the DNS TXT record that proves it; an owner checks them.
"use strict";
var ssoConnection = null;

function loadSso() {
  return api("GET", "/api/orgs/sso").then((answer) => {
    ssoConnection = answer.connection;
    var c = answer.connection;
    byId("sso-summary").hidden = !c;
    byId("sso-remove").hidden = !c;
    byId("sso-domains-proof").hidden = !c;
    byId("sso-redirect-uri").textContent = answer.redirect_uri;
    if (!c) {
      byId("sso-state").textContent =
        `No identity provider is connected. Its redirect URI will be ${answer.redirect_uri}.`;
      return;
    }
    fillTable("sso-domain-table", c.domains.map(domainRow));
    byId("sso-state").textContent =
      `Signs in ${c.email_domains.join(", ")} addresses through ${c.issuer}; a new address of a` +
      ` proven domain joins as ${c.default_role}.${requirement(c)}` +
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

/**
 * Of whom single sign-on is required: only a proven domain's addresses (a listed one is required
 * of nobody), so the sentence never claims more than the server enforces.
 */
function requirement(c) {
  if (!c.require_sso) return "";
  var proven = c.domains.filter((d) => d.verified).map((d) => d.domain);
  var unproven = c.domains.filter((d) => !d.verified).map((d) => d.domain);
  if (!proven.length) return " Required of no address yet: no domain is proven.";
  var rest = unproven.length ? `; not yet of ${unproven.join(", ")}, until proven` : "";
  return ` Required of ${proven.join(", ")} addresses${rest}.`;
}

/** Whether a domain counts, and, when its record went missing, for how many daily checks. */
function domainState(d) {
  if (!d.verified) return "Not proven yet";
  if (d.missed_checks === 0) return "Proven";
  var checks = d.missed_checks === 1 ? "the last daily check" : `the last ${d.missed_checks} daily checks`;
  return `Proven, but its record was missing on ${checks}: publish it again, or the domain stops counting after 3`;
}

/** A listed domain: proven or not, and the TXT record (name and value) that proves it. */
function domainRow(d) {
  var codeCell = (text) => {
    var td = el("td");
    td.appendChild(el("code", text));
    return td;
  };
  return row([rowHeader(d.domain), domainState(d), codeCell(d.record.name), codeCell(d.record.value)]);
}

var ssoVerify = byId("sso-verify");
ssoVerify.addEventListener("click", () => {
  busy(
    byId("sso-domains-proof"),
    api("POST", "/api/orgs/sso/verify-domains").then((answer) => {
      var proven = answer.checked.filter((check) => check.verified).map((check) => check.domain);
      var open = answer.checked.filter((check) => !check.verified);
      var parts = [];
      if (proven.length) parts.push(`Proven: ${proven.join(", ")}.`);
      open.forEach((check) => {
        parts.push(`${check.domain}: ${check.reason || "not proven"}.`);
      });
      say(parts.length ? parts.join(" ") : "Every domain is proven already.", open.length > 0);
      return loadSso();
    }),
  );
});

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
    api("PUT", "/api/orgs/sso", body).then((answer) => {
      secret.value = "";
      var unproven = answer.connection.domains.filter((d) => !d.verified).map((d) => d.domain);
      say(
        unproven.length
          ? `Saved. Publish the DNS record of ${unproven.join(", ")} below, then check: until then a new address of it cannot join.`
          : "Saved. Members of those domains can sign in with single sign-on.",
      );
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
