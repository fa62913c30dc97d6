// The sign-in, sign-up, enrolment and authenticator-code pages (after common.js), chosen by the
// body's data-page. The QR code (our own server's SVG) is shown as an <img> data: URL, never as DOM.
"use strict";
/** "Sign in with a passkey" on the sign-in page: the passkey names the account, no code is sent. */
function passkeySignInButton() {
  var control = byId("passkey-sign-in");
  if (!control || !canUsePasskeys()) return;
  byId("passkey-row").hidden = false;
  control.addEventListener("click", () => {
    control.disabled = true;
    signInWithPasskey()
      .then(() => {
        say("Signed in with your passkey. Opening the console.");
        location.assign(afterSignIn());
      }, fail)
      .then(() => {
        control.disabled = false;
      });
  });
}

/** The way on when an address signs in with its organisation's single sign-on. */
function showSsoLink(url) {
  var back = sessionStorage.getItem("latch.return_to");
  var link = byId("sso-link");
  if (!link) return;
  link.href = back ? `${url}${url.includes("?") ? "&" : "?"}return_to=${encodeURIComponent(back)}` : url;
  byId("sso-link-row").hidden = false;
}

/** "Sign in with SSO": the address's organisation, found by its domain, then its provider. */
function ssoSignInButton() {
  var control = byId("sso-sign-in");
  if (!control) return;
  control.addEventListener("click", () => {
    var email = byId("email");
    var address = email.value.trim();
    if (!address) return refuse(email, "Enter your work email, then choose Sign in with SSO.");
    control.disabled = true;
    api("POST", "/api/auth/sso/discover", { email: address })
      .then((answer) => {
        var back = sessionStorage.getItem("latch.return_to");
        say("Opening your organisation's sign-in.");
        location.assign(back ? `${answer.sso_url}&return_to=${encodeURIComponent(back)}` : answer.sso_url);
      }, fail)
      .then(() => {
        control.disabled = false;
      });
  });
}

function emailPage() {
  passkeySignInButton();
  ssoSignInButton();
  var emailForm = byId("email-form"),
    codeForm = byId("code-form"),
    email = byId("email"),
    otp = byId("otp");
  var sentTo = "";
  function send() {
    return api("POST", "/api/auth/otp/send", { email: sentTo }).then(() => {
      byId("code-sent").textContent = `We sent a code to ${sentTo}. It is valid for 10 minutes.`;
      emailForm.hidden = true;
      codeForm.hidden = false;
      otp.value = "";
      otp.focus();
      say("Code sent. Check your email.");
    });
  }
  onSubmit(emailForm, () => {
    sentTo = email.value.trim();
    if (!sentTo) return refuse(email, "Enter your email address.");
    busy(emailForm, send(), email);
  });
  onSubmit(codeForm, () => {
    var code = otp.value.replace(/\s+/g, "");
    if (!/^\d{8}$/.test(code)) return refuse(otp, "The code from the email has 8 digits.");
    busy(
      codeForm,
      api("POST", "/api/auth/otp/verify", { email: sentTo, otp: code }).then(
        (answer) => {
          say("Email confirmed. One more step.");
          location.assign(answer.enroll ? "/enroll-totp" : "/verify-totp");
        },
        (error) => {
          // Refused for single sign-on: the sentence names the organisation; the link goes there.
          if (error.code === "sso_required" && error.body?.error?.sso_url)
            showSsoLink(error.body.error.sso_url);
          throw error;
        },
      ),
      otp,
    );
  });
  byId("resend").addEventListener("click", () => {
    busy(codeForm, send(), otp);
  });
  byId("change-email").addEventListener("click", () => {
    codeForm.hidden = true;
    emailForm.hidden = false;
    say("");
    email.focus();
  });
}

function base64(text) {
  var bytes = new TextEncoder().encode(text),
    binary = "";
  for (let i = 0; i < bytes.length; i++) binary += String.fromCharCode(bytes[i]);
  return btoa(binary);
}

function enrollPage() {
  var isReenrolment = document.body.getAttribute("data-reenroll") === "true";
  var setup = byId("setup"),
    reenroll = byId("reenroll"),
    backup = byId("backup"),
    restartRow = byId("restart-row");
  var code = byId("code"),
    current = byId("current-code");
  function show(enrollment, shouldFocus) {
    var url = new URL(enrollment.otpauth_url);
    var secret = url.searchParams.get("secret") || "";
    byId("secret").textContent = secret.replace(/(.{4})(?=.)/g, "$1 ");
    byId("account").textContent = decodeURIComponent(url.pathname.replace(/^\/+/, ""));
    byId("qr").src = `data:image/svg+xml;base64,${base64(enrollment.qr_svg)}`;
    byId("expires").textContent =
      `This setup is valid until ${new Date(enrollment.expires_at).toLocaleTimeString()}.`;
    reenroll.hidden = true;
    restartRow.hidden = true;
    setup.hidden = false;
    code.value = "";
    if (shouldFocus) code.focus();
  }
  function begin(shouldFocus) {
    return api("GET", "/api/auth/totp/pending").then(
      (enrollment) => {
        show(enrollment, shouldFocus);
      },
      (error) => {
        if (error.code !== "no_pending_enrollment") throw error;
        if (isReenrolment) {
          setup.hidden = true;
          restartRow.hidden = true;
          reenroll.hidden = false;
          if (shouldFocus) current.focus();
          return;
        }
        return api("POST", "/api/auth/totp/start", {}).then((enrollment) => {
          show(enrollment, shouldFocus);
        });
      },
    );
  }
  onSubmit(byId("current-form"), () => {
    var value = current.value.replace(/\s+/g, "");
    // A lost phone's way back: an unused backup code (xxxxx-xxxxx) also starts a new authenticator.
    if (!/^\d{6}$/.test(value) && !/^[0-9A-Za-z]{5}-?[0-9A-Za-z]{5}$/.test(value))
      return refuse(current, "Enter the 6-digit code your current app shows, or one of your backup codes.");
    busy(
      byId("current-form"),
      api("POST", "/api/auth/totp/start", { current_code: value }).then((e) => {
        current.value = "";
        say("Scan the new code with your authenticator app.");
        show(e, true);
      }),
      current,
    );
  });
  /** The codes just shown, for copy, download and print; they live only in this page. */
  var backupCodes = [];
  // Leaving the page (Continue, Back, closing the tab) takes the secret and the codes with it, so
  // that a page the browser keeps for Back shows neither.
  window.addEventListener("pagehide", () => {
    backupCodes = [];
    byId("backup-codes").replaceChildren();
    byId("secret").textContent = "";
    byId("qr").removeAttribute("src");
  });
  backupCodeButtons({ copy: "copy-codes", download: "download-codes", print: "print-codes" }, () =>
    backupCodesText(byId("account").textContent, backupCodes),
  );
  onSubmit(byId("confirm-form"), () => {
    var value = code.value.replace(/\s+/g, "");
    if (!/^\d{6}$/.test(value)) return refuse(code, "Enter the 6-digit code the app shows.");
    var confirmed = api("POST", "/api/auth/totp/confirm", { code: value }).then(
      (answer) => {
        var list = byId("backup-codes");
        backupCodes = answer.backup_codes.slice();
        list.replaceChildren();
        answer.backup_codes.forEach((backupCode) => {
          var item = document.createElement("li");
          item.textContent = backupCode;
          list.appendChild(item);
        });
        setup.hidden = true;
        // The authenticator's secret and QR are not needed once it is set up: not kept in the page.
        byId("secret").textContent = "";
        byId("qr").removeAttribute("src");
        backup.hidden = false;
        say("Your authenticator is set up. Save your backup codes.");
        var back = afterSignIn();
        if (back !== "/console") {
          byId("continue").href = back;
          byId("continue").textContent = "Continue";
        }
        byId("backup-heading").focus();
      },
      (error) => {
        if (error.code === "no_pending_enrollment") {
          setup.hidden = true;
          restartRow.hidden = false;
        }
        throw error;
      },
    );
    busy(byId("confirm-form"), confirmed, code);
  });
  byId("restart").addEventListener("click", () => {
    say("");
    begin(true).catch(fail);
  });
  begin(false).catch(fail);
}

function verifyPage() {
  var form = byId("verify-form"),
    code = byId("code");
  // A passkey stands in for the code; an account without an authenticator app types a backup code.
  api("GET", "/api/auth/me").then((me) => {
    if (!(me.passkeys > 0) || !canUsePasskeys()) return;
    byId("passkey-step").hidden = false;
    if (!me.totp_enabled) {
      byId("verify-heading").textContent = "Confirm it is you";
      byId("code-label").textContent = "Or a backup code";
      byId("code-hint").textContent = "A backup code (like ABCDE-FGHJK) works once.";
    }
    byId("passkey-verify").focus();
  }, fail);
  var passkeyButton = byId("passkey-verify");
  passkeyButton.addEventListener("click", () => {
    passkeyButton.disabled = true;
    verifyWithPasskey()
      .then(() => {
        say("Passkey accepted. Opening the console.");
        location.assign(afterSignIn());
      }, fail)
      .then(() => {
        passkeyButton.disabled = false;
      });
  });
  onSubmit(form, () => {
    var value = code.value.trim();
    if (!value) return refuse(code, "Enter a code from your authenticator app or a backup code.");
    busy(
      form,
      api("POST", "/api/auth/totp/verify", { code: value }).then((answer) => {
        say(
          answer.used_backup_code
            ? "Backup code accepted. Opening the console."
            : "Code accepted. Opening the console.",
        );
        location.assign(afterSignIn());
      }),
      code,
    );
  });
  code.focus();
}

var page = document.body.getAttribute("data-page");
if (page === "sign-in" || page === "sign-up") emailPage();
else if (page === "enroll-totp") enrollPage();
else if (page === "verify-totp") verifyPage();
