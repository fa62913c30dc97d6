// The invitation page (/invite?token=): signed out, it offers sign-in and sign-up, which come back
// here (common.js RETURN_PATH); signed in with the invited address, "Join" posts the token with the
// session's CSRF header and the console opens in the organisation joined.
"use strict";
(() => {
  var state = document.body.getAttribute("data-state");
  var show = (id) => {
    document.getElementById(id).hidden = false;
  };
  if (state === "accept" || state === "signed_out") {
    show("invitation");
    show("role-summary");
  }
  if (state === "signed_out") show("sign-in-row");
  // The expiry as the reader's clock says it; the machine-readable instant stays in datetime.
  var expires = document.getElementById("invite-expires");
  var at = new Date(expires.getAttribute("datetime"));
  if (!Number.isNaN(at.getTime())) expires.textContent = at.toLocaleString();
  if (state !== "accept") return;
  show("accept-row");
  var accept = document.getElementById("accept");
  accept.addEventListener("click", () => {
    accept.disabled = true;
    var token = new URLSearchParams(location.search).get("token") || "";
    api("POST", "/invite", { token: token }).then(
      (answer) => {
        say(`You joined ${answer.organisation.name}. Opening the console...`);
        location.assign("/console");
      },
      (error) => {
        accept.disabled = false;
        fail(error);
      },
    );
  });
})();
