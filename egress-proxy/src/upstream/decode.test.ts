import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from "node:zlib";
import { AppError } from "@latch/shared/errors";
import { describe, expect, it } from "vitest";
import { decodeBody, MAX_BODY_BYTES, MAX_CODINGS, parseContentEncoding } from "./decode.ts";

function codeOf(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    return (error as AppError).code;
  }
  return undefined;
}

const text = Buffer.from('{"hello":"world"}'.repeat(100));

describe("decodeBody", () => {
  it("returns identity bodies unchanged", () => {
    expect(decodeBody(text, undefined)).toEqual(text);
    expect(decodeBody(text, "identity")).toEqual(text);
    expect(decodeBody(text, "")).toEqual(text);
  });

  it.each([
    ["gzip", gzipSync(text)],
    ["x-gzip", gzipSync(text)],
    ["GZIP", gzipSync(text)],
    ["deflate", deflateSync(text)],
    ["br", brotliCompressSync(text)],
  ])("decodes %s", (coding, encoded) => {
    expect(decodeBody(encoded, coding)).toEqual(text);
  });

  it("decodes raw deflate sent as deflate (a common server mistake)", () => {
    expect(decodeBody(deflateRawSync(text), "deflate")).toEqual(text);
  });

  it("undoes a chain last-applied first", () => {
    expect(decodeBody(brotliCompressSync(gzipSync(text)), "gzip, br")).toEqual(text);
    expect(decodeBody(brotliCompressSync(gzipSync(text)), ["gzip", "identity, br"])).toEqual(text);
  });

  it("accepts exactly 1 MiB once decoded and refuses one byte more", () => {
    expect(decodeBody(gzipSync(Buffer.alloc(MAX_BODY_BYTES)), "gzip").length).toBe(MAX_BODY_BYTES);
    expect(codeOf(() => decodeBody(gzipSync(Buffer.alloc(MAX_BODY_BYTES + 1)), "gzip"))).toBe(
      "body_too_large",
    );
    expect(codeOf(() => decodeBody(Buffer.alloc(MAX_BODY_BYTES + 1), undefined))).toBe("body_too_large");
  });

  it("cuts gzip, deflate and brotli bombs", () => {
    const zeros = Buffer.alloc(20 * 1024 * 1024);
    expect(codeOf(() => decodeBody(gzipSync(zeros), "gzip"))).toBe("body_too_large");
    expect(codeOf(() => decodeBody(deflateSync(zeros), "deflate"))).toBe("body_too_large");
    expect(codeOf(() => decodeBody(brotliCompressSync(zeros), "br"))).toBe("body_too_large");
  });

  it("undoes at most MAX_CODINGS stacked codings, and refuses a longer chain before decoding any", () => {
    let stacked = text;
    for (let i = 0; i < MAX_CODINGS; i++) stacked = deflateSync(stacked);
    expect(decodeBody(stacked, Array(MAX_CODINGS).fill("deflate").join(", "))).toEqual(text);
    // Thousands of stored-deflate layers each cost a pass over the body, on the event loop.
    let deep = text;
    for (let i = 0; i < 200; i++) deep = deflateSync(deep, { level: 0 });
    expect(codeOf(() => decodeBody(deep, Array(200).fill("deflate").join(",")))).toBe("bad_origin_response");
    expect(
      codeOf(() =>
        decodeBody(
          stacked,
          Array(MAX_CODINGS + 1)
            .fill("identity, deflate")
            .join(","),
        ),
      ),
    ).toBe("bad_origin_response");
  });

  it("refuses unknown codings before decoding anything", () => {
    expect(codeOf(() => decodeBody(text, "compress"))).toBe("bad_origin_response");
    expect(codeOf(() => decodeBody(gzipSync(text), "gzip, zstd"))).toBe("bad_origin_response");
  });

  it("refuses corrupt and truncated compressed data", () => {
    const gz = gzipSync(text);
    expect(codeOf(() => decodeBody(Buffer.from("not gzip"), "gzip"))).toBe("bad_origin_response");
    expect(codeOf(() => decodeBody(gz.subarray(0, gz.length - 8), "gzip"))).toBe("bad_origin_response");
    expect(codeOf(() => decodeBody(Buffer.from("not brotli at all"), "br"))).toBe("bad_origin_response");
  });

  it("passes an empty body through whatever the label", () => {
    expect(decodeBody(Buffer.alloc(0), "gzip").length).toBe(0);
  });

  it("never echoes the origin's coding name in the message (it reaches the agent unredacted)", () => {
    expect(() => decodeBody(text, "sk-live-echoed-token")).toThrow(AppError);
    expect(() => decodeBody(text, "sk-live-echoed-token")).not.toThrow(/sk-live/);
  });

  it("never puts body bytes in the message", () => {
    expect(() => decodeBody(Buffer.from("SECRET-TOKEN-123"), "gzip")).toThrow(AppError);
    expect(() => decodeBody(Buffer.from("SECRET-TOKEN-123"), "gzip")).not.toThrow(/SECRET/);
  });
});

describe("parseContentEncoding", () => {
  it("lowercases, trims and drops identity", () => {
    expect(parseContentEncoding(" GZip , identity,br ")).toEqual(["gzip", "br"]);
    expect(parseContentEncoding(undefined)).toEqual([]);
  });
});
