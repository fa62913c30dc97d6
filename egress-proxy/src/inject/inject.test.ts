import { AppError } from "@latch/shared/errors";
import { type InjectMode, parseInjectMode } from "@latch/shared/inject/inject-mode";
import { describe, expect, it } from "vitest";
import { type InjectedCredential, injectCredential, type OutgoingRequest } from "./inject.ts";

const SECRET = "sk_test_51HxAbCdEf";

function credential(secret: string, username?: string): InjectedCredential {
  return { secret, username, itemName: "PAYMENTS_KEY" };
}

function inject(
  mode: string,
  secret = SECRET,
  req: OutgoingRequest = { path: "/v1/charges", headers: [] },
  username?: string,
) {
  return injectCredential(req, parseInjectMode(mode), credential(secret, username));
}

function refusalOf(run: () => unknown): AppError {
  try {
    run();
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error("accepted");
}

const base64 = (text: string) => Buffer.from(text, "utf8").toString("base64");

describe("injectCredential: each mode", () => {
  it.each<[string, string | undefined, { name: string; value: string }]>([
    ["bearer", undefined, { name: "authorization", value: `Bearer ${SECRET}` }],
    ["basic", "acct_42", { name: "authorization", value: `Basic ${base64(`acct_42:${SECRET}`)}` }],
    // No username: the secret is the user id with an empty password (`sk_...:`), as payment APIs expect.
    ["basic", undefined, { name: "authorization", value: `Basic ${base64(`${SECRET}:`)}` }],
    ["basic", "", { name: "authorization", value: `Basic ${base64(`${SECRET}:`)}` }],
    ["header:X-Api-Key", undefined, { name: "x-api-key", value: SECRET }],
    ["header:Authorization", undefined, { name: "authorization", value: SECRET }],
    ["cookie:session", undefined, { name: "cookie", value: `session=${SECRET}` }],
  ])("%s (username %j) sets one header", (mode, username, expected) => {
    const out = inject(
      mode,
      SECRET,
      { path: "/v1/charges?limit=3", headers: [{ name: "accept", value: "*/*" }] },
      username,
    );
    expect(out.headers).toEqual([{ name: "accept", value: "*/*" }, expected]);
    expect(out.path).toBe("/v1/charges?limit=3");
  });

  it("basic encodes user id and password as UTF-8 (RFC 7617)", () => {
    const out = inject("basic", "pässword", { path: "/", headers: [] }, "jürgen");
    const encoded = out.headers[0]?.value.slice("Basic ".length) ?? "";
    expect(Buffer.from(encoded, "base64").toString("utf8")).toBe("jürgen:pässword");
  });

  it("basic keeps a colon inside the password", () => {
    const out = inject("basic", "a:b", { path: "/", headers: [] }, "user");
    expect(out.headers[0]?.value).toBe(`Basic ${base64("user:a:b")}`);
  });

  it.each([
    ["/v1/items", "/v1/items?api_key=sk_test_51HxAbCdEf"],
    ["/v1/items?", "/v1/items?api_key=sk_test_51HxAbCdEf"],
    ["/v1/items?limit=5", "/v1/items?limit=5&api_key=sk_test_51HxAbCdEf"],
    ["/v1/items?limit=5&&x", "/v1/items?limit=5&&x&api_key=sk_test_51HxAbCdEf"],
  ])("query:api_key appends the parameter to %s", (path, expected) => {
    expect(inject("query:api_key", SECRET, { path, headers: [] }).path).toBe(expected);
  });

  it("query percent-encodes every character that could end or change the parameter", () => {
    const secret = "a&b=c d+e#f?g/h%i;jé";
    const out = inject("query:key", secret, { path: "/x", headers: [] });
    expect(out.path).toBe(`/x?key=${encodeURIComponent(secret)}`);
    expect(new URLSearchParams(out.path.split("?")[1]).getAll("key")).toEqual([secret]);
  });

  it("query carries a secret with control characters safely, because they are percent-encoded", () => {
    const out = inject("query:key", "a\r\nb", { path: "/x", headers: [] });
    expect(out.path).toBe("/x?key=a%0D%0Ab");
  });
});

describe("injectCredential: the agent cannot pre-set the credential's slot", () => {
  it.each([
    ["header:X-Api-Key", "x-api-key", "x-api-key"],
    ["header:X-Api-Key", "X-API-KEY", "x-api-key"],
    // CGI, WSGI and Rack read "_" as "-": both arrive as HTTP_X_API_KEY.
    ["header:X-Api-Key", "x_api_key", "x-api-key"],
    ["header:X-Api-Key", "X_Api-KEY", "x-api-key"],
    ["header:X_Api_Key", "x-api-key", "x_api_key"],
    ["bearer", "authorization", "authorization"],
    ["basic", "Authorization", "authorization"],
    ["header:Authorization", "authorization", "authorization"],
    ["cookie:sid", "cookie", "cookie"],
  ])("%s replaces every caller %s header", (mode, callerName, injectedName) => {
    const req = {
      path: "/v1/me",
      headers: [
        { name: callerName, value: "agent-own-credential" },
        { name: "accept", value: "application/json" },
        { name: callerName, value: "second-smuggled-one" },
      ],
    };
    const out = inject(mode, SECRET, req, "user");
    const slot = out.headers.filter((h) => h.name.toLowerCase() === injectedName);
    expect(slot).toHaveLength(1);
    expect(slot[0]?.value).toContain(mode === "basic" ? "Basic " : SECRET);
    expect(JSON.stringify(out.headers)).not.toContain("agent-own-credential");
    expect(JSON.stringify(out.headers)).not.toContain("second-smuggled-one");
    expect(out.headers).toContainEqual({ name: "accept", value: "application/json" });
  });

  it("header keeps names that only look alike", () => {
    const headers = [
      { name: "x-api-keys", value: "1" },
      { name: "xapikey", value: "2" },
      { name: "x-api-key-id", value: "3" },
    ];
    const out = inject("header:X-Api-Key", SECRET, { path: "/v1/me", headers });
    expect(out.headers).toEqual([...headers, { name: "x-api-key", value: SECRET }]);
  });

  it.each([
    ["a plain pair", "/x?api_key=mine&limit=5", "/x?limit=5&api_key=SECRET"],
    ["several pairs", "/x?api_key=a&limit=5&api_key=b", "/x?limit=5&api_key=SECRET"],
    ["a pair without a value", "/x?api_key&limit=5", "/x?limit=5&api_key=SECRET"],
    ["an empty value", "/x?api_key=&limit=5", "/x?limit=5&api_key=SECRET"],
    ["a percent-encoded name", "/x?api%5Fkey=mine&limit=5", "/x?limit=5&api_key=SECRET"],
    ["a lowercase percent escape", "/x?api%5fkey=mine", "/x?api_key=SECRET"],
    ["a name in another case", "/x?API_KEY=mine&limit=5", "/x?limit=5&api_key=SECRET"],
    ["a ;-separated pair", "/x?limit=5;api_key=mine", "/x?api_key=SECRET"],
    ["a + in the name", "/x?api+key=mine", "/x?api+key=mine&api_key=SECRET"],
  ])("query removes %s of the same name", (_case, path, expected) => {
    expect(inject("query:api_key", "SECRET", { path, headers: [] }).path).toBe(expected);
  });

  // Each row: the caller's query, then whether its one pair is dropped (an origin may read it as
  // `key`) or kept (it only starts with the letters).
  it.each<[string, "dropped" | "kept"]>([
    ["key=mine", "dropped"],
    ["KEY=mine", "dropped"],
    ["Key=mine", "dropped"],
    ["k%65y=mine", "dropped"],
    ["%4B%45%59=mine", "dropped"],
    ["key[]=mine", "dropped"],
    ["key[a]=mine", "dropped"],
    ["key[=mine", "dropped"],
    ["KEY[]=mine", "dropped"],
    ["key%5b%5d=mine", "dropped"],
    ["key%5B0%5D=mine", "dropped"],
    ["key%00=mine", "dropped"],
    ["key%00x=mine", "dropped"],
    ["k%65y%00=mine", "dropped"],
    ["key%ff=mine", "dropped"], // not UTF-8 once decoded: fails closed
    ["k%65y%c0%af=mine", "dropped"],
    ["%E2%84%AAey=mine", "dropped"], // KELVIN SIGN lowercases to "k"
    ["key", "dropped"],
    ["key[]", "dropped"],
    ["keyboard=1", "kept"],
    ["key_id=1", "kept"],
    ["key.x=1", "kept"],
    ["keys[]=1", "kept"],
    ["ke=1", "kept"],
    ["x[key]=1", "kept"],
    ["monkey=1", "kept"],
    ["key+=1", "kept"],
    ["%ffkey=1", "kept"],
    ["q=key[]", "kept"],
  ])("query:key with %s: %s", (query, outcome) => {
    const out = inject("query:key", "SECRET", { path: `/x?limit=5&${query}`, headers: [] }).path;
    expect(out).toBe(outcome === "dropped" ? "/x?limit=5&key=SECRET" : `/x?limit=5&${query}&key=SECRET`);
  });

  it("query drops every agent copy and adds the credential exactly once", () => {
    const path = "/x?key[]=a&KEY=b&key%00=c&k%65y=d&key%5b%5d=e&keyboard=f&key[x]=g;key=h";
    const out = inject("query:key", "SECRET", { path, headers: [] }).path;
    expect(out).toBe("/x?keyboard=f&key=SECRET");
    expect(new URLSearchParams(out.split("?")[1]).getAll("key")).toEqual(["SECRET"]);
  });

  it("query keeps names that only look alike", () => {
    const path = "/x?api_key2=1&xapi_key=2&api_ke=3&q=api_key";
    expect(inject("query:api_key", "S", { path, headers: [] }).path).toBe(`${path}&api_key=S`);
  });

  it("query refuses a path with a fragment", () => {
    expect(refusalOf(() => inject("query:k", SECRET, { path: "/x?a=1#k=2", headers: [] })).code).toBe(
      "invalid_path",
    );
  });

  it("is pure: the request passed in is not changed", () => {
    const req = { path: "/v1?api_key=x", headers: [{ name: "x-api-key", value: "x" }] };
    const snapshot = structuredClone(req);
    for (const mode of ["bearer", "basic", "header:X-Api-Key", "query:api_key", "cookie:sid"]) {
      const out = inject(mode, SECRET, req);
      expect(out).not.toBe(req);
      expect(out.headers).not.toBe(req.headers);
    }
    expect(req).toEqual(snapshot);
  });
});

describe("injectCredential: secrets that cannot be sent safely", () => {
  const headerModes = ["bearer", "header:X-Api-Key", "header:Authorization", "cookie:sid"];
  const badForHeaders = [
    ["CRLF", "\r\nX-Evil: 1"],
    ["LF", "\nX-Evil: 1"],
    ["CR", "\r"],
    ["NUL", "\0"],
    ["a C0 control", "\x08"],
    ["DEL", "\x7f"],
    ["non-ASCII", "é"],
  ];
  const cases = headerModes.flatMap((mode) => badForHeaders.map(([what, bad]) => [mode, what, bad] as const));

  it.each(cases)("%s refuses a secret with %s and never echoes it", (mode, _what, bad) => {
    const secret = `TOPSECRET${bad}TAIL`;
    const error = refusalOf(() => inject(mode, secret));
    expect(error.code).toBe("invalid_header");
    expect(error.message).toContain(
      "the stored credential PAYMENTS_KEY contains characters that cannot be sent in",
    );
    expect(error.message).not.toContain("TOPSECRET");
    expect(error.message).not.toContain("TAIL");
    expect(JSON.stringify(error.toBody())).not.toContain("TOPSECRET");
  });

  it.each([
    ["a semicolon (a second cookie)", ";admin=1"],
    ["a space", " x"],
    ["a comma", ",x"],
    ["a double quote", '"x'],
    ["a backslash", "\\x"],
  ])("cookie refuses a secret with %s, which RFC 6265 cookie-octets exclude", (_what, bad) => {
    const error = refusalOf(() => inject("cookie:sid", `TOPSECRET${bad}`));
    expect(error.code).toBe("invalid_header");
    expect(error.message).toContain("cannot be sent in cookie sid");
    expect(error.message).not.toContain("TOPSECRET");
  });

  it.each([
    ["LF", "\n"],
    ["NUL", "\0"],
    ["DEL", "\x7f"],
  ])("basic refuses a password with %s (RFC 7617 forbids control characters)", (_what, bad) => {
    const error = refusalOf(() => inject("basic", `TOPSECRET${bad}`, undefined, "user"));
    expect(error.message).toContain("cannot be sent in an HTTP Basic password");
    expect(error.message).not.toContain("TOPSECRET");
  });

  it("basic refuses a username with a colon or a control character", () => {
    expect(refusalOf(() => inject("basic", SECRET, undefined, "us:er")).message).toContain(
      "contains a colon",
    );
    expect(refusalOf(() => inject("basic", SECRET, undefined, "us\ner")).message).toContain("cannot carry");
  });

  it.each(["bearer", "basic", "header:X-Api-Key", "query:key", "cookie:sid"])(
    "%s refuses a secret that is not valid Unicode instead of sending U+FFFD",
    (mode) => {
      const error = refusalOf(() => inject(mode, "TOPSECRET\ud800"));
      expect(error.code).toBe("invalid_header");
      expect(error.message).not.toContain("TOPSECRET");
    },
  );

  it("refuses an empty secret", () => {
    expect(refusalOf(() => inject("bearer", "")).code).toBe("empty_value");
  });

  it("does not print an item name that is not a valid item name", () => {
    const mode: InjectMode = { kind: "bearer" };
    const error = refusalOf(() =>
      injectCredential({ path: "/", headers: [] }, mode, {
        secret: "x\n",
        username: undefined,
        itemName: "evil\r\nname",
      }),
    );
    expect(error.message).toBe(
      "the stored credential contains characters that cannot be sent in an Authorization header",
    );
  });

  it("accepts every printable ASCII character in header modes (spaces and tabs included)", () => {
    const printable = Array.from({ length: 0x7f - 0x20 }, (_, i) => String.fromCharCode(0x20 + i)).join("");
    expect(inject("header:X-Api-Key", `${printable}\t`).headers).toEqual([
      { name: "x-api-key", value: `${printable}\t` },
    ]);
  });
});
