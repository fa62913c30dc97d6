// The request an approval is for, drawn for the console (both), the collect page and the approval
// lists: its method and address, its body as the server laid it out (JSON indented, form fields as
// a table, anything else as sent) and the body's SHA-256 beneath. Agent text becomes text nodes
// only (textContent), never markup: a body, a path or a task full of <script> is shown as written.
// biome-ignore-all lint/correctness/noUnusedVariables: the pages' scripts call these as globals
"use strict";
function requestViewNode(tag, text, className) {
  var node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}
/** "58 bytes", "4.2 KiB". */
function describeSize(bytes) {
  return bytes < 1024 ? `${bytes} bytes` : `${(bytes / 1024).toFixed(1)} KiB`;
}
/** "JSON, 58 bytes", "form fields, 1.2 KiB". */
function describeBodyKind(body) {
  var kind = body.format === "json" ? "JSON" : body.format === "form" ? "form fields" : body.content_type;
  return `${kind}, ${describeSize(body.size)}`;
}
/** The body: a scrolling, keyboard-reachable block of text, or a table of form fields. */
function bodyBlock(body, label) {
  var block = requestViewNode("div", null, "body");
  block.appendChild(requestViewNode("div", `Body (${describeBodyKind(body)})`, "body-kind"));
  if (body.format === "form" && body.fields) {
    const table = requestViewNode("table", null, "body-fields");
    const caption = requestViewNode("caption", `Form fields of the body: ${label}`, "visually-hidden");
    const head = requestViewNode("thead");
    const headRow = requestViewNode("tr");
    ["Field", "Value"].forEach((name) => {
      const th = requestViewNode("th", name);
      th.scope = "col";
      headRow.appendChild(th);
    });
    head.appendChild(headRow);
    const rows = requestViewNode("tbody");
    body.fields.forEach((field) => {
      const tr = requestViewNode("tr");
      const th = requestViewNode("th", field[0]);
      th.scope = "row";
      tr.append(th, requestViewNode("td", field[1]));
      rows.appendChild(tr);
    });
    table.append(caption, head, rows);
    block.appendChild(table);
  } else {
    // A long body scrolls inside its box; the box takes focus so a keyboard can scroll it too.
    const pre = requestViewNode("pre", null, "body-text");
    pre.tabIndex = 0;
    pre.setAttribute("aria-label", `Body: ${label}`);
    pre.appendChild(requestViewNode("code", body.text));
    block.appendChild(pre);
  }
  if (body.is_cut) {
    block.appendChild(
      requestViewNode("div", "Only the first 64 KiB is kept; the digest is of the whole body.", "hint"),
    );
  }
  if (body.has_hidden_characters) {
    block.appendChild(
      requestViewNode(
        "div",
        "It holds invisible characters (control, direction, zero-width), shown as \uFFFD: read it with care.",
        "hint warning",
      ),
    );
  }
  return block;
}
/**
 * What an approval is for: the exact request (method, host, path with its query), its body and the
 * body's SHA-256, or, for a grant asked without a call, that it covers any call. `label` names the
 * request for screen readers ("API_KEY for console agent").
 */
function requestView(call, body, label) {
  var view = requestViewNode("div", null, "request-view");
  if (!call) {
    view.appendChild(requestViewNode("strong", "Any call"));
    view.appendChild(requestViewNode("span", " with this credential: the agent named no request.", "hint"));
    return view;
  }
  var line = requestViewNode("div", null, "request-line");
  line.appendChild(requestViewNode("code", call.method, "method"));
  line.appendChild(document.createTextNode(" "));
  line.appendChild(requestViewNode("code", call.host + call.path, "target"));
  view.appendChild(line);
  if (body) view.appendChild(bodyBlock(body, label || call.host));
  view.appendChild(
    requestViewNode("div", call.body_sha256 ? `Body SHA-256 ${call.body_sha256}` : "No body", "digest"),
  );
  return view;
}
/** The path prefix "Always" and "8 hours" cover: the path without its query, up to its last /. */
function pathPrefix(path) {
  var bare = String(path || "").split("?")[0];
  return bare.slice(0, bare.lastIndexOf("/") + 1) || "/";
}
