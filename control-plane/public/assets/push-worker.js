// The console's service worker (Web Push, DECISIONS "Approvals that reach the operator"): shows a
// pushed approval request as a notification, and opens the approval page when it is tapped. It
// handles no fetch. A push carries no secret and no approval code; what it names is shown as text.
"use strict";
self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

self.addEventListener("push", (event) => {
  var data = {};
  try {
    data = event.data ? event.data.json() : {};
  } catch {
    data = {};
  }
  var title = data.item
    ? `${data.agent || "An agent"} asks to use ${data.item}`
    : "An agent is waiting for your approval";
  var call = data.method && data.host ? `${data.method} ${data.host}${data.path || ""}` : "";
  event.waitUntil(
    self.registration.showNotification(title, {
      body: call ? `${call}\nTap to decide in the Latch inbox.` : "Tap to decide in the Latch inbox.",
      tag: data.grant_id || "latch-approval",
      icon: "/android-chrome-192x192.png",
      data: { url: data.url },
      requireInteraction: true,
    }),
  );
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  var home = new URL("/console#inbox", self.location.origin);
  var target;
  try {
    target = new URL(event.notification.data?.url || home.href, self.location.origin);
  } catch {
    target = home;
  }
  // Only ever this site's own pages: a notification never opens another origin.
  if (target.origin !== self.location.origin) target = home;
  event.waitUntil(
    self.clients.matchAll({ type: "window", includeUncontrolled: true }).then((windows) => {
      var open = windows.find((w) => new URL(w.url).pathname === "/console");
      if (open && "navigate" in open) return open.navigate(target.href).then((w) => (w || open).focus());
      return self.clients.openWindow(target.href);
    }),
  );
});
