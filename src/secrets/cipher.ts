import { createCipheriv, createDecipheriv, createHash, createSecretKey, randomBytes } from 'node:crypto';
import type { KeyObject } from 'node:crypto';

/** AES-256: the key is 32 bytes. */
export const ENCRYPTION_KEY_BYTES = 32;
/** 96-bit IVs are GCM's native size; a fresh random one per value. */
const IV_BYTES = 12;
const AUTH_TAG_BYTES = 16;
/** Hex characters of a key id: enough to tell a handful of configured keys apart. */
const KEY_ID_HEX_CHARS = 8;
const ALGORITHM = 'aes-256-gcm';

/**
 * Every sealed value starts with this; anything else is a secret written in clear before a
 * key was set. Clear secrets never start with it: HMAC secrets are base64url, Stripe
 * signing secrets `whsec_...` and Stripe API keys `rk_...` / `sk_...`; none holds a colon.
 */
export const SEALED_PREFIX = 'enc:';
const FORMAT_V1 = 'enc:v1';
/** `enc:v1:<key id>:<base64url(iv | ciphertext | tag)>` */
const SEALED_V1_RE = new RegExp(`^${FORMAT_V1}:([0-9a-f]{${KEY_ID_HEX_CHARS}}):([A-Za-z0-9_-]+)$`);

const HEX_KEY_RE = /^[0-9a-fA-F]{64}$/;
/** 32 bytes in base64 or base64url: 43 characters and an optional `=`. */
const BASE64_KEY_RE = /^(?:[A-Za-z0-9+/]{43}|[A-Za-z0-9_-]{43})=?$/;

/** The secrets kept usable (publishable keys are kept as digests, never sealed). */
export type SealedKind = 'hmac_secret' | 'stripe_webhook_secret' | 'webhook_signing_secret' | 'stripe_api_key';

/** The row a sealed value belongs to: bound to it, so that a copy elsewhere does not open. */
export interface SecretOwner {
  tenantId: number;
  kind: SealedKind;
}

/** A stored value names a key that is not configured. */
export class UnknownEncryptionKeyError extends Error {
  constructor(readonly keyIds: readonly string[]) {
    super(
      `stored secrets are encrypted under key id ${keyIds.join(', ')}, which is not configured: ` +
        'set that key in DUNWALL_ENCRYPTION_KEY or DUNWALL_ENCRYPTION_KEYS_OLD',
    );
    this.name = 'UnknownEncryptionKeyError';
  }
}

/** A sealed value does not open: altered, truncated, or moved from another row. Names the row, never the value. */
export class SecretDecryptionError extends Error {
  constructor(owner: SecretOwner, keyId: string | null) {
    super(
      `the stored ${owner.kind} of tenant ${owner.tenantId} does not decrypt` +
        `${keyId === null ? ' (not in a known format)' : ` under key id ${keyId}`}: it was altered or belongs to another row`,
    );
    this.name = 'SecretDecryptionError';
  }
}

/**
 * A key from the environment: 64 hex characters, or base64 / base64url of 32 bytes.
 * null: not a valid key (the caller reports it without echoing the value).
 */
export function parseEncryptionKey(text: string): KeyObject | null {
  const value = text.trim();
  let bytes: Buffer;
  if (HEX_KEY_RE.test(value)) {
    bytes = Buffer.from(value, 'hex');
  } else if (BASE64_KEY_RE.test(value)) {
    bytes = Buffer.from(value, 'base64');
    // Only the canonical spelling: two texts must never name one key differently.
    const canonical = value.replace(/=$/, '').replace(/\+/g, '-').replace(/\//g, '_');
    if (bytes.toString('base64url') !== canonical) return null;
  } else {
    return null;
  }
  return bytes.length === ENCRYPTION_KEY_BYTES ? createSecretKey(bytes) : null;
}

/**
 * A short digest naming a key in each sealed value, so that decryption picks the right one
 * and an operator can tell which key a store needs. Domain-separated from any other use
 * of the key; a few bytes of a digest of 32 random bytes tell nothing about them.
 */
export function encryptionKeyId(key: KeyObject): string {
  return createHash('sha256')
    .update('dunwall encryption key id\0')
    .update(key.export())
    .digest('hex')
    .slice(0, KEY_ID_HEX_CHARS);
}

/** The key id of a stored value; null: a clear (legacy) value. Throws on an `enc:` value of unknown shape. */
export function sealedKeyId(stored: string, owner: SecretOwner): string | null {
  if (!stored.startsWith(SEALED_PREFIX)) return null;
  const match = SEALED_V1_RE.exec(stored);
  if (!match?.[1]) throw new SecretDecryptionError(owner, null);
  return match[1];
}

/** The ciphertext is bound to its format, its key id, its tenant and its kind. */
function associatedData(keyId: string, owner: SecretOwner): Buffer {
  return Buffer.from(`${FORMAT_V1}:${keyId}\0tenant:${owner.tenantId}\0kind:${owner.kind}`, 'utf8');
}

export interface SecretBoxKeys {
  /** The key new values are sealed under; null: they are written in clear. */
  current: KeyObject | null;
  /** Keys accepted for opening only (a rotation in progress). */
  previous?: readonly KeyObject[];
}

/**
 * Seals HMAC and Stripe signing secrets for the store with AES-256-GCM and opens them
 * again. Without a current key it writes clear text, as before encryption existed; clear
 * values are always read, so that turning encryption on breaks nothing.
 */
export class SecretBox {
  readonly currentKeyId: string | null;
  private readonly current: KeyObject | null;
  private readonly keys = new Map<string, KeyObject>();

  constructor({ current, previous = [] }: SecretBoxKeys) {
    this.current = current;
    this.currentKeyId = current === null ? null : encryptionKeyId(current);
    for (const key of [...(current ? [current] : []), ...previous]) {
      const id = encryptionKeyId(key);
      if (!this.keys.has(id)) this.keys.set(id, key);
    }
  }

  /** No keys at all: secrets in clear. */
  static clear(): SecretBox {
    return new SecretBox({ current: null });
  }

  get encrypts(): boolean {
    return this.current !== null;
  }

  knows(keyId: string): boolean {
    return this.keys.has(keyId);
  }

  /** The value to store: sealed under the current key, or the secret itself without one. */
  seal(secret: string, owner: SecretOwner): string {
    if (this.current === null || this.currentKeyId === null) return secret;
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv(ALGORITHM, this.current, iv, { authTagLength: AUTH_TAG_BYTES });
    cipher.setAAD(associatedData(this.currentKeyId, owner));
    const ciphertext = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
    const payload = Buffer.concat([iv, ciphertext, cipher.getAuthTag()]).toString('base64url');
    return `${FORMAT_V1}:${this.currentKeyId}:${payload}`;
  }

  /** The secret a stored value holds. Throws when its key is not configured or it does not authenticate. */
  open(stored: string, owner: SecretOwner): string {
    const keyId = sealedKeyId(stored, owner);
    if (keyId === null) return stored;
    const key = this.keys.get(keyId);
    if (!key) throw new UnknownEncryptionKeyError([keyId]);
    const payload = Buffer.from(stored.slice(FORMAT_V1.length + keyId.length + 2), 'base64url');
    if (payload.length <= IV_BYTES + AUTH_TAG_BYTES) throw new SecretDecryptionError(owner, keyId);
    const iv = payload.subarray(0, IV_BYTES);
    const tag = payload.subarray(payload.length - AUTH_TAG_BYTES);
    const ciphertext = payload.subarray(IV_BYTES, payload.length - AUTH_TAG_BYTES);
    try {
      const decipher = createDecipheriv(ALGORITHM, key, iv, { authTagLength: AUTH_TAG_BYTES });
      decipher.setAAD(associatedData(keyId, owner));
      decipher.setAuthTag(tag);
      return Buffer.concat([decipher.update(ciphertext), decipher.final()]).toString('utf8');
    } catch {
      throw new SecretDecryptionError(owner, keyId);
    }
  }
}
