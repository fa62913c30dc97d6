// The approval link's page (/approve?token=): "Revoke this approval" withdraws what the link just
// approved, with the session's CSRF header (common.js api), and says so in place.
"use strict";
(() => {
  var revoke = document.getElementById("revoke");
  if (!revoke) return;
  revoke.addEventListener("click", () => {
    revoke.disabled = true;
    api("POST", `/api/grants/${encodeURIComponent(revoke.getAttribute("data-grant-id"))}/revoke`).then(
      () => {
        document.getElementById("approved").textContent = "Revoked: the agent's next call asks again.";
        revoke.remove();
        say("Revoked. The agent's next call waits for approval again.");
        document.querySelector("main h1").textContent = "Revoked";
        document.title = "Revoked · Latch";
      },
      (error) => {
        revoke.disabled = false;
        fail(error);
      },
    );
  });
})();
