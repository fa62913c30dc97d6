// The live inbox in the console (after the inbox's script): a Server-Sent Events stream of the
// organisation's requests and decisions (GET /api/inbox/stream) redraws the Inbox as they happen;
// the count of waiting requests shows in the page title; a new request shows a browser
// notification when the operator allowed them and the console is in the background; and "Notify
// me on this device" subscribes this browser to Web Push through the push worker. If the stream
// cannot be held, the Inbox's own polling carries on (the stream only makes it prompt).
"use strict";
var BASE_TITLE = document.title;
var live = { source: null, isOpen: false, failures: 0 };
window.latchLiveInbox = live;

/** The waiting count in the title, as the Inbox link shows it. */
function showCountInTitle() {
  var count = byId("inbox-count").textContent.replace(/[()]/g, "").trim();
  document.title = count ? `(${count}) ${BASE_TITLE}` : BASE_TITLE;
}
new MutationObserver(showCountInTitle).observe(byId("inbox-count"), {
  childList: true,
  characterData: true,
  subtree: true,
});

function notifyRequest(data) {
  if (!("Notification" in window) || Notification.permission !== "granted" || !document.hidden) return;
  var call = data.method && data.host ? `${data.method} ${data.host}${data.path || ""}` : "any call";
  var agent = data.agent?.name || data.agent?.id || "An agent";
  var notice = new Notification(`${agent} asks to use ${data.item_name || "a credential"}`, {
    body: call,
    tag: data.grant_id || "latch-approval",
  });
  notice.onclick = () => {
    window.focus();
    location.hash = "#inbox";
    notice.close();
  };
}

function openLiveInbox() {
  if (!("EventSource" in window) || live.source) return;
  var source = new EventSource("/api/inbox/stream");
  live.source = source;
  // The stream may say "ready" before the account is known: the rows wait for the role, which
  // decides the buttons they carry.
  var refresh = () => meReady.then(() => loadInbox(true)).catch(fail);
  source.addEventListener("open", () => {
    live.isOpen = true;
    live.failures = 0;
    document.body.dataset.live = "open";
  });
  source.addEventListener("ready", refresh);
  source.addEventListener("reset", refresh);
  source.addEventListener("approval_requested", (event) => {
    refresh();
    try {
      notifyRequest(JSON.parse(event.data));
    } catch {
      // A notice is a courtesy: the inbox itself is already redrawn.
    }
  });
  ["approval_decided", "need_created", "need_closed"].forEach((type) => {
    source.addEventListener(type, refresh);
  });
  source.addEventListener("error", () => {
    live.isOpen = false;
    document.body.dataset.live = "closed";
    // EventSource reconnects by itself, sending Last-Event-ID; after a few failures in a row
    // (signed out, a proxy that cuts streams) it is closed and polling alone carries on.
    live.failures += 1;
    if (live.failures >= 5 || source.readyState === EventSource.CLOSED) {
      source.close();
      live.source = null;
      setTimeout(openLiveInbox, 60_000);
    }
  });
}

/* ---------- notifications on this device ---------- */
function base64UrlBytes(text) {
  var raw = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(raw, (c) => c.charCodeAt(0));
}
function notifyState(text) {
  var state = byId("notify-state");
  if (state) state.textContent = text;
}
/** Push to this browser: the worker, the subscription to Latch's key, and the subscription stored. */
function subscribePush() {
  if (!("serviceWorker" in navigator) || !("PushManager" in window)) {
    return Promise.resolve("You will be notified while the console is open; this browser has no Web Push.");
  }
  return navigator.serviceWorker
    .register("/assets/push-worker.js", { scope: "/" })
    .then(() => navigator.serviceWorker.ready)
    .then((registration) =>
      api("GET", "/api/push/vapid-public-key").then((key) =>
        registration.pushManager.subscribe({
          userVisibleOnly: true,
          applicationServerKey: base64UrlBytes(key.public_key),
        }),
      ),
    )
    .then((subscription) => api("POST", "/api/push/subscriptions", subscription.toJSON()))
    .then((answer) => {
      localStorage.setItem("latch.push-subscription", answer.subscription.id);
      return "This device is notified of new requests, also while the console is closed.";
    })
    .catch(
      () =>
        "You will be notified while the console is open. Push to this device could not be set up (the browser's push service did not answer).",
    );
}
var notifyButton = byId("notify-device");
if (notifyButton) {
  if (!("Notification" in window)) notifyButton.hidden = true;
  else if (Notification.permission === "granted") notifyState("Notifications are on for this browser.");
  notifyButton.addEventListener("click", () =>
    act(notifyButton, () =>
      Notification.requestPermission().then((permission) => {
        if (permission !== "granted") {
          notifyState("Notifications are blocked for this site; allow them in the browser's site settings.");
          return;
        }
        notifyState("Setting up notifications ...");
        return subscribePush().then(notifyState);
      }),
    ),
  );
}

window.addEventListener("DOMContentLoaded", openLiveInbox);
