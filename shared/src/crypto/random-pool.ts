// Random bytes for ids made on every request (request ids, call ticket ids), drawn from the
// operating system's CSPRNG 4 KiB at a time: one randomBytes call per id was a measurable share of
// an agent call's CPU (loadtest/README.md, issue 27). The bytes are as unpredictable as
// randomBytes' own; each is handed out once.
import { randomBytes } from "node:crypto";

const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let offset = 0;

/** `length` (at most 4096) fresh random bytes, copied out of the pool. */
export function pooledRandomBytes(length: number): Buffer {
  if (length > POOL_BYTES) return randomBytes(length);
  if (offset + length > pool.length) {
    pool = randomBytes(POOL_BYTES);
    offset = 0;
  }
  const bytes = Buffer.from(pool.subarray(offset, offset + length));
  // Handed out once: what is left in the pool is only what no id has used yet.
  pool.fill(0, offset, offset + length);
  offset += length;
  return bytes;
}
