// Encoding an http_request body for the wire: JSON by default, form-encoded on request.
import { AppError } from "@latch/shared/errors";

export function encodeRequestBody(body: unknown, contentType: string | undefined): Buffer {
  if (body === undefined) return Buffer.alloc(0);
  if (contentType === "application/x-www-form-urlencoded") {
    if (typeof body !== "object" || body === null || Array.isArray(body)) {
      throw new AppError("invalid_request", "a form-encoded body must be an object of fields");
    }
    const form = new URLSearchParams();
    for (const [key, value] of Object.entries(body)) {
      if (value === null || value === undefined) continue;
      if (typeof value === "object") {
        throw new AppError(
          "invalid_request",
          `form field ${key.slice(0, 64)} must be a string, number or boolean`,
        );
      }
      form.append(key, String(value));
    }
    return Buffer.from(form.toString(), "utf8");
  }
  return Buffer.from(JSON.stringify(body), "utf8");
}
