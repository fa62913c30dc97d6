// The landing page's copy buttons: each copies the text of the element it names (data-copy). The
// buttons are hidden in the page and shown here, so a browser without script never shows one that
// does nothing. No request leaves the page (its policy allows no fetch).
"use strict";
(() => {
  var status = document.getElementById("copy-status");
  Array.prototype.forEach.call(document.querySelectorAll("button[data-copy]"), (button) => {
    var source = document.getElementById(button.getAttribute("data-copy"));
    var what = button.getAttribute("data-what");
    button.setAttribute("aria-label", `Copy ${what}`);
    button.hidden = false;
    button.addEventListener("click", () => {
      var text = source.textContent;
      var copied = navigator.clipboard
        ? navigator.clipboard.writeText(text)
        : Promise.reject(new Error("no clipboard"));
      copied.then(
        () => {
          status.textContent = `Copied ${what}.`;
        },
        () => {
          // Where the clipboard is refused, the text is selected for the reader to copy.
          var range = document.createRange();
          range.selectNodeContents(source);
          var selection = getSelection();
          selection.removeAllRanges();
          selection.addRange(range);
          status.textContent = `Select ${what} and copy it (it is selected).`;
        },
      );
    });
  });
})();
