// A click a redraw moved: the console's inbox and the local vault's approvals redraw in the
// background (a request arriving or leaving, polled or streamed), and a decision can land where
// another control was a moment before. A click aimed at one request's decision must not land on
// another's that an agent's well-timed request slid under the pointer. A key press is not held
// back: focus follows the same decision across a redraw, by its data-key.
// biome-ignore-all lint/correctness/noUnusedVariables: the pages' scripts call this as a global
"use strict";
/**
 * The guard of the decisions (elements with a data-key) inside the element `rootId`; `sayChanged`
 * tells the operator a click was not taken.
 * - `places()`: where each decision is now, to hand to `markShifted` after the redraw;
 * - `markShifted(before)`: each decision now where another one was is marked, with the time; one
 *   that stayed in its place keeps the mark it had;
 * - `markAll()`: every decision is marked (the page, not the operator, scrolled them into view);
 * - `isShifted(event, control)`: a pointer click (event.detail > 0) within a second of its mark,
 *   which then decides nothing.
 */
function shiftGuard(rootId, sayChanged) {
  var shiftedAt = new WeakMap();
  var GUARD_MS = 1000;
  function places() {
    return Array.prototype.map.call(
      document.getElementById(rootId).querySelectorAll("[data-key]"),
      (node) => ({
        key: node.getAttribute("data-key"),
        node: node,
        rect: node.getBoundingClientRect(),
      }),
    );
  }
  function overlaps(a, b) {
    return a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  }
  function isSamePlace(a, b) {
    return a.top === b.top && a.left === b.left && a.width === b.width && a.height === b.height;
  }
  return {
    places: places,
    markShifted: (before) => {
      var at = performance.now();
      places().forEach((now) => {
        var same = before.find((was) => was.key === now.key);
        if (same && isSamePlace(same.rect, now.rect)) {
          if (shiftedAt.has(same.node)) shiftedAt.set(now.node, shiftedAt.get(same.node));
          return;
        }
        if (before.some((was) => overlaps(was.rect, now.rect))) shiftedAt.set(now.node, at);
      });
    },
    markAll: () => {
      var at = performance.now();
      places().forEach((place) => {
        shiftedAt.set(place.node, at);
      });
    },
    isShifted: (event, control) => {
      var at = shiftedAt.get(control);
      if (!event || event.detail === 0 || at === undefined || performance.now() - at >= GUARD_MS)
        return false;
      sayChanged();
      return true;
    },
  };
}
