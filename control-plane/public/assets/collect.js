// The collect page (/collect/:id, after common.js and request-view.js): loads the request only for
// a signed-in operator of its organisation, shows the request that asked (its body laid out) and
// the provider's setup steps, and posts the typed value straight to fulfil, where it is sealed on
// arrival. One answer only: the buttons stay disabled while it is on its way, and a request
// someone else answered first says so in a sentence.
"use strict";
(() => {
  var id = location.pathname.split("/").pop();
  var form = byId("collect");
  var store = byId("store");
  var deny = byId("deny");
  var isSending = false;

  /** The request is gone from the pending ones: the form closes, and the sentence says why. */
  function closed(sentence) {
    form.hidden = true;
    say(sentence);
  }
  /** A failed answer in words; a request already answered is not an error to the operator. */
  function answerFailed(error) {
    if (error.code === "need_closed")
      return closed("This request was already answered: there is nothing left to do.");
    fail(error);
  }
  /** Spec 2.5: the public recipe of a known provider host (the app to create, the scopes). */
  function showRecipe(recipe) {
    if (!recipe?.steps?.length) return;
    var list = byId("recipe-steps");
    list.replaceChildren.apply(
      list,
      recipe.steps.map((step) => el("li", step)),
    );
    byId("recipe-next").textContent = recipe.next || "";
    byId("recipe").hidden = false;
  }
  function el(tag, text) {
    var node = document.createElement(tag);
    node.textContent = text;
    return node;
  }
  /** Spec 3.2: a connect request is answered by connecting the account, never by a typed value. */
  function showConnect(need) {
    var item = need.suggested_name.replace(/_REFRESH$/, "");
    say(
      `${need.client_name} needs a connected ${need.provider || need.host} account for ${item} (${need.environment}).`,
    );
    var connect = byId("connect");
    connect.textContent = `Connect ${need.provider || "the account"}`;
    connect.hidden = !need.provider;
    connect.addEventListener("click", () => {
      connect.disabled = true;
      api("POST", `/api/integrations/${encodeURIComponent(need.provider)}/start`, {
        item_name: item,
        environment: need.environment,
        need_id: need.need_id,
      }).then(
        (answer) => location.assign(answer.authorize_url),
        (error) => {
          connect.disabled = false;
          fail(error);
        },
      );
    });
  }
  function showForm(need) {
    // Spec 4.2: an agent that named only the credential named no host; the operator gives it.
    byId("host-field").hidden = Boolean(need.host);
    byId("host").required = !need.host;
    byId("summary").textContent = need.host
      ? `${need.client_name} needs a credential for ${need.host} (${need.environment}).`
      : `${need.client_name} needs a credential named ${need.suggested_name} (${need.environment}) and named no API host: give the host it may be sent to.`;
    var call = byId("call");
    if (need.call) {
      call.appendChild(el("p", "Storing it approves, once, the request that asked:"));
      call.appendChild(requestView(need.call, need.body, need.suggested_name));
      byId("allow-prefix-label").textContent =
        `Always: ${need.call.method} on ${need.call.host} under ${pathPrefix(need.call.path)}`;
    } else {
      call.appendChild(el("p", "The agent named no request: storing it approves one call of any kind."));
      byId("allow-prefix-row").hidden = true;
    }
    byId("allow-credential-label").textContent =
      `Always: the whole credential, any method and path on ${need.host || "its host"}`;
    if (need.message) {
      byId("task").textContent = `Task (written by the agent): ${need.message}`;
      byId("task").hidden = false;
    }
    byId("name").value = need.suggested_name;
    say("");
    form.hidden = false;
  }
  function showInjectFields() {
    var mode = byId("inject").value;
    byId("inject-name-row").hidden = !/:$/.test(mode);
    byId("username-row").hidden = mode !== "basic";
  }
  byId("inject").addEventListener("change", showInjectFields);

  api("GET", `/api/need-items/${encodeURIComponent(id)}`).then(
    (answer) => {
      var need = answer.need;
      if (need.status !== "pending")
        return say(`This request is ${need.status}: there is nothing left to do.`);
      showRecipe(need.recipe);
      if (need.kind === "connect") return showConnect(need);
      showForm(need);
    },
    () => {
      // Not signed in, or not in this request's organisation: the same answer (404) either way.
      say("Sign in as an operator of this organisation to see this request.");
      byId("sign-in").href = `/sign-in?return_to=${encodeURIComponent(location.pathname)}`;
      byId("sign-in-row").hidden = false;
    },
  );

  /** Disables both answers while one is on its way; a second click does nothing. */
  function sending(run) {
    if (isSending) return;
    isSending = true;
    store.disabled = true;
    deny.disabled = true;
    form.setAttribute("aria-busy", "true");
    run().finally(() => {
      isSending = false;
      store.disabled = false;
      deny.disabled = false;
      form.removeAttribute("aria-busy");
    });
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    var value = byId("value");
    var name = byId("name");
    if (!/^[A-Z][A-Z0-9_]{0,127}$/.test(name.value)) {
      return refuse(name, "A name is an uppercase letter, then uppercase letters, digits or underscores.");
    }
    var host = byId("host");
    if (host.required && !host.value.trim()) return refuse(host, "Give the API host it may be sent to.");
    if (!value.value) return refuse(value, "Enter the value to store.");
    var mode = byId("inject").value;
    if (/:$/.test(mode)) {
      const field = byId("inject-name");
      if (!field.value.trim()) return refuse(field, "Name the header, parameter or cookie it is sent in.");
      mode += field.value.trim();
    }
    var allow = form.querySelector('input[name="allow"]:checked').value;
    var body = { name: name.value, value: value.value, inject: mode };
    if (host.required) body.allowed_hosts = [host.value.trim()];
    if (mode === "basic") body.username = byId("username").value.trim();
    if (allow !== "once") {
      body.always_allow = true;
      body.scope = allow;
    }
    sending(() =>
      api("POST", `/api/need-items/${encodeURIComponent(id)}/fulfill`, body).then((answer) => {
        value.value = "";
        // The two-person rule: an Always waits for a second member ("1 of 2") in the Inbox.
        var isWaiting = answer.grant && answer.grant.approvals === "1 of 2";
        closed(
          allow === "once"
            ? "Stored. The agent can retry its request now."
            : isWaiting
              ? "Stored. The agent can retry its request now, once; the Always you chose waits in the Inbox for a second member to confirm it (1 of 2)."
              : "Stored, and always allowed as you chose. The agent can retry its request now.",
        );
      }, answerFailed),
    );
  });
  deny.addEventListener("click", () => {
    sending(() =>
      api("POST", `/api/need-items/${encodeURIComponent(id)}/deny`).then(() => {
        // A value typed before the Deny is not kept in the page.
        value.value = "";
        closed("Denied. The agent is told nothing was stored.");
      }, answerFailed),
    );
  });
})();
