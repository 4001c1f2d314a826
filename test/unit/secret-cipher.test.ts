import { createSecretKey, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/runtime/config.js';
import {
  SecretBox,
  SecretDecryptionError,
  UnknownEncryptionKeyError,
  encryptionKeyId,
  parseEncryptionKey,
  sealedKeyId,
} from '../../src/secrets/cipher.js';
import type { SecretOwner } from '../../src/secrets/cipher.js';

const RAW_A = randomBytes(32);
const RAW_B = randomBytes(32);
const KEY_A = createSecretKey(RAW_A);
const KEY_B = createSecretKey(RAW_B);
const HMAC_OF_1: SecretOwner = { tenantId: 1, kind: 'hmac_secret' };
const SECRET = 'bm90LWEtcmVhbC1zZWNyZXQtYnV0LTMyLWJ5dGVzLWxvbmc';

/** The stored value with one byte of its binary payload flipped at `index` (negative: from the end). */
function flipByte(stored: string, index: number): string {
  const cut = stored.lastIndexOf(':') + 1;
  const payload = Buffer.from(stored.slice(cut), 'base64url');
  const at = index < 0 ? payload.length + index : index;
  payload[at] = (payload[at] ?? 0) ^ 0x01;
  return `${stored.slice(0, cut)}${payload.toString('base64url')}`;
}

describe('SecretBox (AES-256-GCM)', () => {
  const box = new SecretBox({ current: KEY_A });

  it('round-trips, with a fresh IV each time, in the versioned format naming the key', () => {
    const one = box.seal(SECRET, HMAC_OF_1);
    const two = box.seal(SECRET, HMAC_OF_1);
    expect(one).toMatch(new RegExp(`^enc:v1:${encryptionKeyId(KEY_A)}:[A-Za-z0-9_-]+$`));
    expect(one).not.toBe(two);
    expect(one).not.toContain(SECRET);
    expect(box.open(one, HMAC_OF_1)).toBe(SECRET);
    expect(box.open(two, HMAC_OF_1)).toBe(SECRET);
    // iv (12) + ciphertext (as long as the secret) + tag (16)
    expect(Buffer.from(one.split(':')[3] ?? '', 'base64url')).toHaveLength(12 + Buffer.byteLength(SECRET) + 16);
    expect(
      box.open(box.seal('whsec_ünïcødé', { tenantId: 9, kind: 'stripe_webhook_secret' }), {
        tenantId: 9,
        kind: 'stripe_webhook_secret',
      }),
    ).toBe('whsec_ünïcødé');
  });

  it('refuses a tampered IV, ciphertext or tag', () => {
    const sealed = box.seal(SECRET, HMAC_OF_1);
    for (const index of [0, 11, 12, 20, -17, -16, -1]) {
      expect(() => box.open(flipByte(sealed, index), HMAC_OF_1), `byte ${index}`).toThrow(SecretDecryptionError);
    }
    expect(() => box.open(sealed.slice(0, -4), HMAC_OF_1)).toThrow(SecretDecryptionError);
    expect(() => box.open(`${sealed.slice(0, sealed.lastIndexOf(':') + 1)}AAAA`, HMAC_OF_1)).toThrow(
      SecretDecryptionError,
    );
  });

  it('binds the value to its tenant and its kind (associated data)', () => {
    const sealed = box.seal(SECRET, HMAC_OF_1);
    expect(() => box.open(sealed, { tenantId: 2, kind: 'hmac_secret' })).toThrow(SecretDecryptionError);
    expect(() => box.open(sealed, { tenantId: 1, kind: 'stripe_webhook_secret' })).toThrow(SecretDecryptionError);
    // The message names the row, never the value.
    try {
      box.open(sealed, { tenantId: 2, kind: 'hmac_secret' });
    } catch (err) {
      expect((err as Error).message).toContain('hmac_secret of tenant 2');
      expect((err as Error).message).not.toContain(sealed);
    }
  });

  it('fails with the wrong key, even under the right key id', () => {
    const sealed = box.seal(SECRET, HMAC_OF_1);
    const onlyB = new SecretBox({ current: KEY_B });
    expect(() => onlyB.open(sealed, HMAC_OF_1)).toThrow(UnknownEncryptionKeyError);
    const relabelled = sealed.replace(encryptionKeyId(KEY_A), encryptionKeyId(KEY_B));
    expect(() => onlyB.open(relabelled, HMAC_OF_1)).toThrow(SecretDecryptionError);
  });

  it('picks the key by id: old keys open, the current one seals', () => {
    const underA = box.seal(SECRET, HMAC_OF_1);
    const rotated = new SecretBox({ current: KEY_B, previous: [KEY_A] });
    expect(rotated.currentKeyId).toBe(encryptionKeyId(KEY_B));
    expect(rotated.knows(encryptionKeyId(KEY_A))).toBe(true);
    expect(rotated.open(underA, HMAC_OF_1)).toBe(SECRET);
    const underB = rotated.seal(SECRET, HMAC_OF_1);
    expect(sealedKeyId(underB, HMAC_OF_1)).toBe(encryptionKeyId(KEY_B));
    expect(rotated.open(underB, HMAC_OF_1)).toBe(SECRET);
    expect(() => box.open(underB, HMAC_OF_1)).toThrow(new UnknownEncryptionKeyError([encryptionKeyId(KEY_B)]).message);
  });

  it('reads clear (legacy) values as they are; writes clear without a key', () => {
    expect(box.open(SECRET, HMAC_OF_1)).toBe(SECRET);
    expect(box.open('whsec_legacy0123456789', { tenantId: 1, kind: 'stripe_webhook_secret' })).toBe(
      'whsec_legacy0123456789',
    );
    const clear = SecretBox.clear();
    expect(clear.encrypts).toBe(false);
    expect(clear.seal(SECRET, HMAC_OF_1)).toBe(SECRET);
    expect(sealedKeyId(SECRET, HMAC_OF_1)).toBeNull();
    expect(() => clear.open(box.seal(SECRET, HMAC_OF_1), HMAC_OF_1)).toThrow(UnknownEncryptionKeyError);
  });

  it('refuses an enc: value of an unknown version or shape', () => {
    for (const stored of [
      'enc:v2:abcdef01:AAAA',
      'enc:v1:ABCDEF01:AAAA',
      'enc:v1:abc:AAAA',
      'enc:',
      'enc:v1:abcdef01:AA AA',
    ]) {
      expect(() => box.open(stored, HMAC_OF_1), stored).toThrow(SecretDecryptionError);
    }
  });

  it('names a key by a short digest that does not hold the key', () => {
    const id = encryptionKeyId(KEY_A);
    expect(id).toMatch(/^[0-9a-f]{8}$/);
    expect(encryptionKeyId(createSecretKey(Buffer.from(RAW_A)))).toBe(id);
    expect(encryptionKeyId(KEY_B)).not.toBe(id);
    expect(RAW_A.toString('hex')).not.toContain(id);
  });
});

describe('encryption keys from the environment', () => {
  const hex = RAW_A.toString('hex');

  it('accepts 32 bytes as hex, base64 or base64url, all naming the same key', () => {
    const spellings = [
      hex,
      hex.toUpperCase(),
      RAW_A.toString('base64'),
      RAW_A.toString('base64').replace(/=$/, ''),
      RAW_A.toString('base64url'),
      ` ${hex}\n`,
    ];
    const ids = spellings.map((text) => {
      const key = parseEncryptionKey(text);
      expect(key, text).not.toBeNull();
      return key === null ? '' : encryptionKeyId(key);
    });
    expect(new Set(ids)).toEqual(new Set([encryptionKeyId(KEY_A)]));
  });

  it('refuses anything else', () => {
    const b64 = RAW_A.toString('base64');
    for (const bad of [
      '',
      'secret',
      hex.slice(2),
      `${hex}00`,
      randomBytes(16).toString('hex'),
      randomBytes(31).toString('base64'),
      randomBytes(33).toString('base64'),
      `${b64.slice(0, 10)}!${b64.slice(11)}`,
      // Both alphabets in one text: neither base64 nor base64url.
      `${'A'.repeat(10)}-${'A'.repeat(31)}+`,
    ]) {
      expect(parseEncryptionKey(bad), JSON.stringify(bad)).toBeNull();
    }
    // A non-canonical spelling (unused low bits set) would name the same bytes twice.
    const canonical = RAW_A.toString('base64url');
    const last = canonical[42] ?? 'A';
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const sibling = alphabet[(alphabet.indexOf(last) & ~0b11) | 0b01] ?? 'B';
    expect(parseEncryptionKey(`${canonical.slice(0, 42)}${sibling}`)).toBeNull();
  });

  it('loadConfig: keys parsed, a bad one is a config problem that never echoes the value', () => {
    const config = loadConfig({
      DUNWALL_ENCRYPTION_KEY: hex,
      DUNWALL_ENCRYPTION_KEYS_OLD: ` ${RAW_B.toString('base64')} ,, `,
    });
    expect(config.encryptionKey && encryptionKeyId(config.encryptionKey)).toBe(encryptionKeyId(KEY_A));
    expect(config.encryptionKeysOld.map(encryptionKeyId)).toEqual([encryptionKeyId(KEY_B)]);
    expect(loadConfig({})).toMatchObject({ encryptionKey: null, encryptionKeysOld: [] });
    // A key object never serialises its bytes.
    expect(JSON.stringify(config)).not.toContain(hex);

    const badKey = `${hex.slice(0, 60)}zzzz`;
    const badOld = 'hunter2-not-a-key';
    let problems: string[] = [];
    try {
      loadConfig({
        DUNWALL_ENCRYPTION_KEY: badKey,
        DUNWALL_ENCRYPTION_KEYS_OLD: `${RAW_B.toString('hex')},${badOld}`,
        PORT: 'x',
      });
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      problems = (err as ConfigError).problems;
      expect((err as Error).message).not.toContain(badKey);
      expect((err as Error).message).not.toContain(badOld);
      expect((err as Error).message).not.toContain(RAW_B.toString('hex'));
    }
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^PORT /),
        expect.stringMatching(/^DUNWALL_ENCRYPTION_KEY must be 32 bytes, as 64 hex characters or in base64/),
        expect.stringMatching(/^DUNWALL_ENCRYPTION_KEYS_OLD: key 2 of 2 must be 32 bytes/),
      ]),
    );
    expect(() => loadConfig({ DUNWALL_ENCRYPTION_KEYS_OLD: hex })).toThrow(
      'DUNWALL_ENCRYPTION_KEYS_OLD needs DUNWALL_ENCRYPTION_KEY',
    );
  });
});
