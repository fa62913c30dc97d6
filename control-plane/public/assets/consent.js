// The consent page (after common.js): shows who asks and what it may do, then posts the operator's
// decision as JSON with the CSRF header and follows the answer's location (the client's redirect).
"use strict";
(() => {
  var uid = new URLSearchParams(location.search).get("uid") || "";
  var form = byId("consent");
  var select = byId("organisation");
  var environmentSelect = byId("environment");
  var organisations = [];
  /**
   * When the form was shown. A page that has the operator click, or double-click, on it, then opens
   * an authorization for its own client under the pointer, must not have the next click land on
   * Approve (double-clickjacking): a pointer click within a second of the form showing approves
   * nothing and says so. Keys are safe already (the heading has the focus).
   */
  var shownAt = Number.POSITIVE_INFINITY;
  var SHOWN_GUARD_MS = 1000;

  /** The chosen organisation's environments (spec 1.4: the agent is bound to one of them). */
  function showEnvironments() {
    var chosen = organisations.find((org) => org.id === select.value);
    var previous = environmentSelect.value;
    environmentSelect.replaceChildren();
    (chosen ? chosen.environments : []).forEach((name) => {
      var option = document.createElement("option");
      option.value = name;
      option.textContent = name;
      option.selected = name === previous;
      environmentSelect.appendChild(option);
    });
  }

  function fill(details) {
    byId("client-name").textContent = details.client.name;
    if (details.client.metadata_host) {
      byId("client-origin-label").textContent = "Published by";
      byId("client-origin").textContent = details.client.metadata_host;
    } else {
      // The same words as the device page (oauth/client-display.ts SELF_NAMED_NOTE).
      byId("client-origin").textContent = "registered itself with this name (unverified)";
    }
    byId("redirect-host").textContent =
      details.flow === "device"
        ? "a device you are signing in (no redirect)"
        : details.client.redirect_target || "";
    var list = byId("abilities");
    details.abilities.forEach((sentence) => {
      var item = document.createElement("li");
      item.textContent = sentence;
      list.appendChild(item);
    });
    organisations = details.organisations;
    details.organisations.forEach((org) => {
      var option = document.createElement("option");
      option.value = org.id;
      option.textContent = org.name;
      option.selected = org.current;
      select.appendChild(option);
    });
    showEnvironments();
    if (details.organisations.length === 0) {
      say(
        "None of your organisations lets you connect an agent: that needs the owner or admin role there. Ask one of them, or create an organisation in the console, then start again from your agent.",
        true,
      );
      return;
    }
    form.hidden = false;
    shownAt = performance.now();
    say("");
    // The heading takes focus, never Approve: a page that has the operator keep pressing Enter or
    // Space, then opens an authorization for its own client, must not have the next key approve it
    // (keyjacking). A keyboard user tabs to Approve; a click works at once.
    byId("heading").focus();
  }

  function decide(decision) {
    var body = { uid: uid, decision: decision };
    if (decision === "approve" && select.value) body.organisation_id = select.value;
    if (decision === "approve" && environmentSelect.value) body.environment = environmentSelect.value;
    busy(
      form,
      api("POST", "/consent", body).then((answer) => {
        say(
          decision === "approve"
            ? "Approved. Returning to your agent..."
            : "Denied. Returning to your agent...",
        );
        location.assign(answer.location);
      }),
    );
  }

  byId("approve").addEventListener("click", (event) => {
    if (event.detail === 0 || performance.now() - shownAt >= SHOWN_GUARD_MS) return;
    event.preventDefault();
    say("The page had only just opened: nothing was approved. Read what it asks, then choose Approve.", true);
  });
  select.addEventListener("change", showEnvironments);
  onSubmit(form, () => decide("approve"));
  byId("deny").addEventListener("click", () => decide("deny"));
  api("GET", `/consent/details?uid=${encodeURIComponent(uid)}`)
    .then(fill)
    .catch(fail);
})();
