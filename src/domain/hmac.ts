import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { isCurrent } from './credential.js';
import type { Credential } from './credential.js';

/** SHA-256's block: an HMAC key is padded (or first hashed) to this length (RFC 2104). */
const BLOCK_BYTES = 64;
const DIGEST_BYTES = 32;
/** Messages up to this many bytes are signed in place; customer ids are at most 255 ASCII characters. */
const MAX_IN_PLACE_BYTES = 1024;

/** FIPS 180-4, section 4.2.2 and 5.3.3. */
const K = Int32Array.from([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2,
]);
const IV = Int32Array.from([
  0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
]);

/** Scratch: reads allocate nothing. One signature at a time (the event loop runs one). */
const W = new Int32Array(64);
const state = new Int32Array(8);
const innerState = new Int32Array(8);
const padded = new Uint8Array(MAX_IN_PLACE_BYTES + 2 * BLOCK_BYTES);
const innerDigest = new Uint8Array(DIGEST_BYTES);
const digestScratch = Buffer.alloc(DIGEST_BYTES);
const presentedScratch = Buffer.alloc(DIGEST_BYTES);

function rotr(x: number, n: number): number {
  return (x >>> n) | (x << (32 - n));
}

/** SHA-256's compression of the 64-byte block at `bytes[offset..]` into `h`. */
function compress(h: Int32Array, bytes: Uint8Array, offset: number): void {
  for (let t = 0; t < 16; t += 1) {
    const i = offset + t * 4;
    W[t] = ((bytes[i] ?? 0) << 24) | ((bytes[i + 1] ?? 0) << 16) | ((bytes[i + 2] ?? 0) << 8) | (bytes[i + 3] ?? 0);
  }
  compressWords(h);
}

/** SHA-256's compression of the block whose 16 words are in `W[0..15]`, into `h`. */
function compressWords(h: Int32Array): void {
  for (let t = 16; t < 64; t += 1) {
    const w15 = W[t - 15] ?? 0;
    const w2 = W[t - 2] ?? 0;
    const s0 = rotr(w15, 7) ^ rotr(w15, 18) ^ (w15 >>> 3);
    const s1 = rotr(w2, 17) ^ rotr(w2, 19) ^ (w2 >>> 10);
    W[t] = ((W[t - 16] ?? 0) + s0 + (W[t - 7] ?? 0) + s1) | 0;
  }
  let a = h[0] ?? 0;
  let b = h[1] ?? 0;
  let c = h[2] ?? 0;
  let d = h[3] ?? 0;
  let e = h[4] ?? 0;
  let f = h[5] ?? 0;
  let g = h[6] ?? 0;
  let hh = h[7] ?? 0;
  for (let t = 0; t < 64; t += 1) {
    const t1 = (hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + (K[t] ?? 0) + (W[t] ?? 0)) | 0;
    const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
    hh = g;
    g = f;
    f = e;
    e = (d + t1) | 0;
    d = c;
    c = b;
    b = a;
    a = (t1 + t2) | 0;
  }
  h[0] = ((h[0] ?? 0) + a) | 0;
  h[1] = ((h[1] ?? 0) + b) | 0;
  h[2] = ((h[2] ?? 0) + c) | 0;
  h[3] = ((h[3] ?? 0) + d) | 0;
  h[4] = ((h[4] ?? 0) + e) | 0;
  h[5] = ((h[5] ?? 0) + f) | 0;
  h[6] = ((h[6] ?? 0) + g) | 0;
  h[7] = ((h[7] ?? 0) + hh) | 0;
}

/** Copies a SHA-256 state: a loop the compiler inlines, where `TypedArray#set` is a call. */
function copy8(from: Int32Array, offset: number, to: Int32Array): void {
  for (let i = 0; i < 8; i += 1) to[i] = from[offset + i] ?? 0;
}

/** Where each pad's midstate starts in `HmacKey.pads`. */
const INNER = 0;
const OUTER = 8;

/**
 * The outer hash of an HMAC, whose message is the inner digest (the 8 words of `inner`):
 * one block, built as words, on top of the outer pad's midstate in `h`.
 */
function finishOuter(h: Int32Array, inner: Int32Array): void {
  for (let i = 0; i < 8; i += 1) W[i] = inner[i] ?? 0;
  W[8] = 0x80000000 | 0;
  for (let i = 9; i < 15; i += 1) W[i] = 0;
  // (64 + 32) bytes, in bits.
  W[15] = (BLOCK_BYTES + DIGEST_BYTES) * 8;
  compressWords(h);
}

/**
 * The inner hash of an HMAC of an ASCII message of at most 55 characters (every customer
 * id of the usual length): one block, built as words straight from the string, on top of
 * the inner pad's midstate in `h`. False, `h` untouched, for any other message.
 */
function finishInnerShortAscii(h: Int32Array, message: string): boolean {
  const length = message.length;
  if (length > BLOCK_BYTES - 9) return false;
  for (let i = 0; i < 16; i += 1) W[i] = 0;
  for (let i = 0; i < length; i += 1) {
    const c = message.charCodeAt(i);
    if (c > 0x7f) return false;
    W[i >> 2] = (W[i >> 2] ?? 0) | (c << (24 - 8 * (i & 3)));
  }
  W[length >> 2] = (W[length >> 2] ?? 0) | (0x80 << (24 - 8 * (length & 3)));
  W[15] = (BLOCK_BYTES + length) * 8;
  compressWords(h);
  return true;
}

/**
 * Finishes a hash whose first 64-byte block is already in `h` (a pad's midstate): the
 * `length` message bytes of `src`, then SHA-256's padding, then the state written
 * big-endian into `out`.
 */
function finish(h: Int32Array, src: Uint8Array, length: number, out: Uint8Array): void {
  const whole = length - (length % BLOCK_BYTES);
  for (let offset = 0; offset < whole; offset += BLOCK_BYTES) compress(h, src, offset);
  const rest = length - whole;
  if (src === padded) padded.copyWithin(0, whole, length);
  else padded.set(src.subarray(whole, length));
  padded[rest] = 0x80;
  let end = rest + 1;
  while (end % BLOCK_BYTES !== 56) padded[end++] = 0;
  // The length in bits, 64-bit big-endian (the pad's block included).
  const bits = (BLOCK_BYTES + length) * 8;
  padded[end] = 0;
  padded[end + 1] = 0;
  padded[end + 2] = 0;
  padded[end + 3] = Math.floor(bits / 2 ** 32) & 0xff;
  padded[end + 4] = (bits >>> 24) & 0xff;
  padded[end + 5] = (bits >>> 16) & 0xff;
  padded[end + 6] = (bits >>> 8) & 0xff;
  padded[end + 7] = bits & 0xff;
  end += 8;
  for (let offset = 0; offset < end; offset += BLOCK_BYTES) compress(h, padded, offset);
  digestInto(h, out);
}

/** A SHA-256 state as its digest: the 8 words big-endian into `out`. */
function digestInto(h: Int32Array, out: Uint8Array): void {
  for (let i = 0; i < 8; i += 1) {
    const word = h[i] ?? 0;
    out[i * 4] = word >>> 24;
    out[i * 4 + 1] = (word >>> 16) & 0xff;
    out[i * 4 + 2] = (word >>> 8) & 0xff;
    out[i * 4 + 3] = word & 0xff;
  }
}

/** The value a tenant's backend computes: lowercase hex HMAC-SHA256(secret, customer id). */
export function computeHmac(secret: string, customerId: string): string {
  return hmacDigest(secret, customerId).toString('hex');
}

/** HMAC-SHA256 by the book (node:crypto): the reference `HmacKey` is tested against. */
export function hmacDigest(secret: string, customerId: string): Buffer {
  return createHmac('sha256', secret).update(customerId, 'utf8').digest();
}

/**
 * A tenant's HMAC secret, ready to sign: the SHA-256 states after its inner and outer pads
 * (RFC 2104) are computed once, so that signing a customer id is two compressions in
 * place (one block of id, one of inner digest), with no HMAC object per request and no
 * memo per customer. The secret itself is not kept.
 */
export class HmacKey {
  /** The inner pad's midstate, then the outer's: one array, so that a signature touches one allocation. */
  private readonly pads = new Int32Array(16);

  constructor(secret: string) {
    let key = Buffer.from(secret, 'utf8');
    if (key.length > BLOCK_BYTES) key = createHash('sha256').update(key).digest();
    const pad = new Uint8Array(BLOCK_BYTES);
    for (const [offset, byte] of [
      [INNER, 0x36],
      [OUTER, 0x5c],
    ] as const) {
      for (let i = 0; i < BLOCK_BYTES; i += 1) pad[i] = (key[i] ?? 0) ^ byte;
      state.set(IV);
      compress(state, pad, 0);
      this.pads.set(state, offset);
    }
  }

  /** HMAC-SHA256(secret, message) into `out` (32 bytes). */
  signInto(message: string, out: Uint8Array): void {
    copy8(this.pads, INNER, state);
    if (finishInnerShortAscii(state, message)) {
      copy8(state, 0, innerState);
      copy8(this.pads, OUTER, state);
      finishOuter(state, innerState);
      digestInto(state, out);
      return;
    }
    const length = message.length;
    let src: Uint8Array = padded;
    let ascii = length <= MAX_IN_PLACE_BYTES;
    for (let i = 0; ascii && i < length; i += 1) {
      const c = message.charCodeAt(i);
      if (c > 0x7f) ascii = false;
      else padded[i] = c;
    }
    // Not a customer id (those are short and ASCII): its UTF-8 bytes, made for it.
    if (!ascii) src = Buffer.from(message, 'utf8');
    copy8(this.pads, INNER, state);
    finish(state, src, ascii ? length : src.length, innerDigest);
    copy8(this.pads, OUTER, state);
    finish(state, innerDigest, DIGEST_BYTES, out);
  }

  /** HMAC-SHA256(secret, message), as a new buffer. */
  sign(message: string): Buffer {
    const out = Buffer.alloc(DIGEST_BYTES);
    this.signInto(message, out);
    return out;
  }
}

/** A hex digit's value by its char code (`0-9`, `a-f`, `A-F`: the contract accepts either case), else -1. */
const HEX_VALUE = Int8Array.from({ length: 128 }, (_, c) => {
  if (c >= 48 && c <= 57) return c - 48;
  const lower = c | 0x20;
  return lower >= 97 && lower <= 102 ? lower - 87 : -1;
});

/** Decodes exactly 64 hex characters into `out`; false (out left partial) for anything else. */
function hexInto(text: string, out: Uint8Array): boolean {
  if (text.length !== DIGEST_BYTES * 2) return false;
  for (let i = 0; i < DIGEST_BYTES; i += 1) {
    const a = text.charCodeAt(2 * i);
    const b = text.charCodeAt(2 * i + 1);
    // Codes past 127 are not hex (and would read past the table).
    const hi = (a | b) > 127 ? -1 : (HEX_VALUE[a] ?? -1);
    const lo = (a | b) > 127 ? -1 : (HEX_VALUE[b] ?? -1);
    if ((hi | lo) < 0) return false;
    out[i] = (hi << 4) | lo;
  }
  return true;
}

/**
 * True when `presented` is the hex HMAC of `message` under one of `keys` current at `nowMs`.
 * Every current key is tried, each digest compared through `timingSafeEqual`, with no early
 * exit.
 */
export function verifyHmac(
  presented: string,
  message: string,
  keys: readonly Credential<HmacKey>[],
  nowMs: number,
): boolean {
  if (!hexInto(presented, presentedScratch)) return false;
  let matched = false;
  for (const key of keys) {
    if (!isCurrent(key, nowMs)) continue;
    key.value.signInto(message, digestScratch);
    if (timingSafeEqual(digestScratch, presentedScratch)) matched = true;
  }
  return matched;
}
