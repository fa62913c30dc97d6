// Every value a token URL's answer holds under a credential's name, read from the answer's own
// text rather than from the parsed object: JSON.parse and Object.fromEntries keep only the last of
// two members with one name, so a list made from their result alone leaves the first copy in the
// body an agent posting to the token endpoint reads (spec 4.2 rule 7). Also tells whether a name
// repeats, which RFC 6749 3.1 forbids ("response parameters MUST NOT be included more than once").

/**
 * Names whose value is a credential, in any case and either spelling: `access_token`, `id_token`,
 * `refreshToken`, `client_secret`, `api_key`, `password`, Slack's `incoming_webhook` (its URL
 * posts to the channel). Not `token_type`, nor `refresh_token_expires_in`. Everything inside such a
 * value (an object or a list under the name) counts, its member names too.
 */
const SECRET_NAME = /(?:token|secret|password|passphrase|key|credential|signature|webhook)s?\W*$/i;
/** A JSON number as RFC 8259 6 writes it, read where it starts. */
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;

/** Values an answer may list at most: a provider sends a few; thousands only make redaction slow. */
export const MAX_ANSWER_SECRETS = 256;
/**
 * Characters the listed values may hold in all (half what one stored value may, 32 KiB): each
 * value becomes hundreds of spellings, compiled for the answer's redaction, so a token endpoint
 * answering one long token (a repetitive one makes the automaton keep every spelling whole) held
 * the proxy's event loop for seconds and took gigabytes, for every organisation. Real answers
 * hold a few kilobytes (a JWT access token with its claims, an ID token, a refresh token).
 */
export const MAX_ANSWER_SECRET_CHARS = 16 * 1024;
/**
 * The shortest value listed that is not a credential name's own value: a string or number inside
 * an object or list under such a name (a webhook's "#general", a channel id), short words that
 * would otherwise be redacted wherever the answer says them.
 */
const MIN_NESTED_SECRET = 16;

export interface AnswerSecrets {
  /**
   * Each value under a credential's name at any depth, every copy of a repeated name, numbers as
   * written; for one escaped or percent-encoded in an unusual way, its spelling in the answer too,
   * so redaction finds it whatever the encoder chose.
   */
  secrets: string[];
  /** A name given twice in one object, or twice in the form. */
  hasRepeatedName: boolean;
  /**
   * More than MAX_ANSWER_SECRETS values, or more than MAX_ANSWER_SECRET_CHARS in all: the list
   * stops there, and the answer is not readable.
   */
  isCrowded: boolean;
}

interface Frame {
  /** The member names so far; undefined in a list. */
  names: Set<string> | undefined;
  /** Inside a value under a credential's name. */
  isSecret: boolean;
  /** The member whose value comes next. */
  name: string;
  isNameNext: boolean;
}

/**
 * Reads `text`, which JSON.parse has accepted, member by member.
 * @example findJsonSecrets('{"refresh_token":"r1","refresh_token":"r2","token_type":"Bearer"}')
 *   // { secrets: ["r1", "r2"], hasRepeatedName: true }
 */
export function findJsonSecrets(text: string): AnswerSecrets {
  const secrets = new Set<string>();
  let hasRepeatedName = false;
  let isCrowded = false;
  // Iterative, so that a deeply nested answer cannot overflow the stack.
  const frames: Frame[] = [];
  /** A credential name's own value (its string at once), not one inside it. */
  const isNamedValue = () => {
    const frame = frames.at(-1);
    return (
      frame !== undefined && !frame.isSecret && frame.names !== undefined && SECRET_NAME.test(frame.name)
    );
  };
  const isSecretValue = () => frames.at(-1)?.isSecret === true || isNamedValue();
  let chars = 0;
  const add = (value: string, spelling: string, shortest: number) => {
    for (const each of new Set([value, spelling])) {
      if (each.length < Math.max(shortest, 1) || secrets.has(each)) continue;
      chars += each.length;
      if (secrets.size >= MAX_ANSWER_SECRETS || chars > MAX_ANSWER_SECRET_CHARS) isCrowded = true;
      else secrets.add(each);
    }
  };
  let i = 0;
  while (i < text.length) {
    const char = text[i];
    if (char === "{" || char === "[") {
      const isSecret = isSecretValue();
      frames.push({
        names: char === "{" ? new Set() : undefined,
        isSecret,
        name: "",
        isNameNext: char === "{",
      });
      i += 1;
    } else if (char === "}" || char === "]") {
      frames.pop();
      i += 1;
    } else if (char === ",") {
      const frame = frames.at(-1);
      if (frame?.names) frame.isNameNext = true;
      i += 1;
    } else if (char === '"') {
      const end = endOfString(text, i);
      const spelling = text.slice(i + 1, end - 1);
      const value = JSON.parse(text.slice(i, end)) as string;
      i = end;
      const frame = frames.at(-1);
      if (frame?.names && frame.isNameNext) {
        if (frame.names.has(value)) hasRepeatedName = true;
        frame.names.add(value);
        frame.name = value;
        frame.isNameNext = false;
      } else if (isSecretValue()) {
        add(value, spelling, isNamedValue() ? 1 : MIN_NESTED_SECRET);
      }
    } else {
      NUMBER.lastIndex = i;
      const number =
        char === "-" || (char !== undefined && char >= "0" && char <= "9") ? NUMBER.exec(text) : null;
      if (number) {
        if (isSecretValue()) add(number[0], number[0], isNamedValue() ? 1 : MIN_NESTED_SECRET);
        i += number[0].length;
      } else {
        // White space, ":", and the letters of true, false and null: none is a credential.
        i += 1;
      }
    }
  }
  return { secrets: [...secrets], hasRepeatedName, isCrowded };
}

/** The index just past the closing quote of the string that opens at `start`. */
function endOfString(text: string, start: number): number {
  let i = start + 1;
  while (i < text.length) {
    if (text[i] === "\\") i += 2;
    else if (text[i] === '"') return i + 1;
    else i += 1;
  }
  return text.length;
}

/**
 * Reads a form-encoded answer pair by pair, each decoded as URLSearchParams decodes it.
 * @example findFormSecrets("access_token=a&token_type=bearer&access_token=b")
 *   // { secrets: ["a", "b"], hasRepeatedName: true }
 */
export function findFormSecrets(text: string): AnswerSecrets {
  const secrets = new Set<string>();
  const names = new Set<string>();
  let hasRepeatedName = false;
  let isCrowded = false;
  let chars = 0;
  const add = (value: string) => {
    if (secrets.has(value)) return;
    chars += value.length;
    secrets.add(value);
  };
  for (const pair of text.split("&")) {
    if (secrets.size >= MAX_ANSWER_SECRETS || chars > MAX_ANSWER_SECRET_CHARS) {
      isCrowded = true;
      break;
    }
    const [entry] = new URLSearchParams(pair);
    if (!entry) continue;
    const [name, value] = entry;
    if (names.has(name)) hasRepeatedName = true;
    names.add(name);
    if (!SECRET_NAME.test(name)) continue;
    if (value.length > 0) add(value);
    // The value as written, when decoding changed it in a way the redactor may not spell back
    // (an invalid percent sequence becomes U+FFFD).
    const spelling = pair.slice(pair.indexOf("=") + 1);
    if (pair.includes("=") && spelling !== value && spelling.length > 0) add(spelling);
  }
  if (chars > MAX_ANSWER_SECRET_CHARS) isCrowded = true;
  return { secrets: [...secrets], hasRepeatedName, isCrowded };
}
