// The collect page (/collect/:id): loads the request only for a signed-in operator of its
// organisation and posts the typed value straight to fulfil, where it is sealed on arrival.
"use strict";
(() => {
  var id = location.pathname.split("/").pop();
  var status = document.getElementById("status");
  var form = document.getElementById("collect");
  function csrf() {
    var m =
      /(?:^|; )__Host-latch_csrf=([^;]+)/.exec(document.cookie) ||
      /(?:^|; )latch_csrf=([^;]+)/.exec(document.cookie);
    return m ? decodeURIComponent(m[1]) : "";
  }
  function api(method, path, body) {
    return fetch(path, {
      method: method,
      headers: Object.assign({ "x-csrf-token": csrf() }, body ? { "content-type": "application/json" } : {}),
      body: body ? JSON.stringify(body) : undefined,
    }).then((r) =>
      r.json().then((j) => {
        if (!r.ok) throw new Error(j.error?.message || j.error || r.status);
        return j;
      }),
    );
  }
  /** Spec 3.2: a connect request is answered by connecting the account, never by a typed value. */
  function showConnect(need) {
    var item = need.suggested_name.replace(/_REFRESH$/, "");
    status.textContent = `${need.client_name} needs a connected ${need.provider || need.host} account for ${item} (${need.environment}).`;
    if (need.recipe) {
      // Spec 2.5: the public recipe (the app to create, the redirect URI, the scopes).
      const steps = document.createElement("ol");
      for (const step of need.recipe.steps) {
        const li = document.createElement("li");
        li.textContent = step;
        steps.appendChild(li);
      }
      status.after(steps);
    }
    var connect = document.getElementById("connect");
    connect.textContent = `Connect ${need.provider || "the account"}`;
    connect.hidden = !need.provider;
    connect.addEventListener("click", () => {
      api("POST", `/api/integrations/${encodeURIComponent(need.provider)}/start`, {
        item_name: item,
        environment: need.environment,
        need_id: need.need_id,
      }).then(
        (answer) => location.assign(answer.authorize_url),
        (err) => {
          status.textContent = err.message;
        },
      );
    });
  }
  api("GET", `/api/need-items/${encodeURIComponent(id)}`).then(
    (j) => {
      var need = j.need;
      if (need.status !== "pending") {
        status.textContent = `This request is ${need.status}.`;
        return;
      }
      if (need.kind === "connect") {
        showConnect(need);
        return;
      }
      // Spec 4.2: an agent that named only the credential named no host; the operator gives it.
      var hostField = document.getElementById("host");
      document.getElementById("host-field").hidden = Boolean(need.host);
      hostField.required = !need.host;
      document.getElementById("summary").textContent = need.host
        ? `${need.client_name} needs a credential for ${need.host} (${need.environment}).`
        : `${need.client_name} needs a credential named ${need.suggested_name} (${need.environment}) and named no API host: give the host it may be sent to.`;
      // DECISIONS "Approvals": storing the value approves the request that asked, once, and no other.
      document.getElementById("call").textContent = need.call
        ? "Storing it approves this request once: " +
          need.call.method +
          " " +
          need.call.host +
          need.call.path +
          (need.call.body_sha256 ? ` (body SHA-256 ${need.call.body_sha256})` : " (no body)") +
          ". Always allow lets this agent make any call with it until you revoke it."
        : "Storing it approves one call of any kind by this agent (it named no request).";
      document.getElementById("name").value = need.suggested_name;
      status.textContent = "";
      form.hidden = false;
    },
    () => {
      status.textContent = "Sign in as an operator of this organisation to see this request.";
    },
  );
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    var value = document.getElementById("value");
    var host = document.getElementById("host");
    api("POST", `/api/need-items/${encodeURIComponent(id)}/fulfill`, {
      name: document.getElementById("name").value,
      value: value.value,
      always_allow: document.getElementById("always").checked,
      ...(host.required ? { allowed_hosts: [host.value.trim()] } : {}),
    }).then(
      () => {
        value.value = "";
        form.hidden = true;
        status.textContent = "Stored. The agent can retry now.";
      },
      (err) => {
        status.textContent = err.message;
      },
    );
  });
  document.getElementById("deny").addEventListener("click", () => {
    api("POST", `/api/need-items/${encodeURIComponent(id)}/deny`).then(
      () => {
        form.hidden = true;
        status.textContent = "Denied.";
      },
      (err) => {
        status.textContent = err.message;
      },
    );
  });
})();
