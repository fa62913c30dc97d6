// The initialize `instructions` (spec 4.1): how a model should use the six tools.
const COMMON = [
  "Latch calls third-party APIs for you with credentials you never see.",
  "When data is wanted, call http_request directly in the same turn, without listing items first.",
  "Call setup only when the user wants credentials set up without a call.",
  "Never ask for a secret and never put one in a tool argument.",
  "Follow next.for_model when an answer has it.",
  "On a 4xx answer fix the path, query or body and retry; on a 5xx retry once, except body_too_large: narrow the call first (pagination, a smaller page, a fields filter).",
  "A one-call approval is spent by any answer from the API.",
];

export const HOSTED_INSTRUCTIONS = [
  ...COMMON,
  "When an answer has collect_url or connect_url, give that link to the user.",
  "On status pending tell the user to approve in the Latch inbox (or with the approval code), then retry with next.arguments.",
].join(" ");

export const LOCAL_INSTRUCTIONS = [
  ...COMMON,
  "On status need_item give the user the `vault set` command from the answer; the value is typed at a prompt, never given to you.",
  "On status pending tell the user to run the `vault approve` command from the answer (or approve in the local console), then retry with next.arguments.",
].join(" ");
