// One CSV field of the console's audit export (before console-activity.js). A cell a spreadsheet
// would read as a formula (OWASP CSV injection: = + - @ first, also after leading spaces, tabs or
// line breaks, which spreadsheets skip; or a leading tab or carriage return) gets a ' in front;
// a field with a quote, comma, line break or ' is quoted.
"use strict";
// biome-ignore lint/correctness/noUnusedVariables: console-activity.js calls it for each cell it exports
function csvField(value) {
  var text =
    value === null || value === undefined ? "" : typeof value === "string" ? value : JSON.stringify(value);
  if (/^(?:[\t\r]|[ \t\r\n]*[=+\-@])/.test(text)) text = `'${text}`;
  return /[",\r\n']/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}
