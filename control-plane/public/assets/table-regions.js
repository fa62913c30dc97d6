// Loaded by the pages with tables (the console, the local vault's console) after their other
// scripts.
"use strict";
/*
 * A table wider than the window scrolls inside its .table-wrap. Only while it does, the wrapper is
 * a named region in the Tab order, so a keyboard can scroll it as well (WCAG 2.1.1, axe's
 * scrollable-region-focusable); a table that fits adds no Tab stop.
 */
(() => {
  var wraps = document.querySelectorAll(".table-wrap");
  if (!wraps.length || typeof ResizeObserver !== "function") return;
  function update(wrap) {
    var scrolls = wrap.scrollWidth > wrap.clientWidth;
    var caption = wrap.querySelector("caption");
    if (scrolls === wrap.hasAttribute("tabindex")) return;
    if (scrolls) {
      wrap.setAttribute("tabindex", "0");
      wrap.setAttribute("role", "region");
      wrap.setAttribute("aria-label", caption ? caption.textContent.trim() : "Table");
    } else {
      wrap.removeAttribute("tabindex");
      wrap.removeAttribute("role");
      wrap.removeAttribute("aria-label");
    }
  }
  var observer = new ResizeObserver(() => {
    wraps.forEach(update);
  });
  wraps.forEach((wrap) => {
    observer.observe(wrap);
    if (wrap.firstElementChild) observer.observe(wrap.firstElementChild);
  });
})();
