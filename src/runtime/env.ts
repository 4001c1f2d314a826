/**
 * Readers of one environment variable each: a problem is added to `problems` (never the
 * value of a secret or a URL), and the fallback returned, so that every problem is reported.
 */
import type { KeyObject } from 'node:crypto';
import { ENCRYPTION_KEY_BYTES, parseEncryptionKey } from '../secrets/cipher.js';

export type Env = Record<string, string | undefined>;

export function integer(
  env: Env,
  name: string,
  fallback: number,
  min: number,
  max: number,
  problems: string[],
): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || !Number.isSafeInteger(value) || value < min || value > max) {
    problems.push(`${name} must be an integer from ${min} to ${max} (got ${JSON.stringify(raw)})`);
    return fallback;
  }
  return value;
}

const ENCRYPTION_KEY_FORMAT = `${ENCRYPTION_KEY_BYTES} bytes, as 64 hex characters or in base64 / base64url (generate one with: openssl rand -hex 32)`;

/** Never echoed in a problem: a key in a log line is a key given away. */
export function encryptionKeys(
  env: Env,
  problems: string[],
): { encryptionKey: KeyObject | null; encryptionKeysOld: KeyObject[] } {
  const raw = env.DUNWALL_ENCRYPTION_KEY?.trim() || null;
  const encryptionKey = raw === null ? null : parseEncryptionKey(raw);
  if (raw !== null && encryptionKey === null) problems.push(`DUNWALL_ENCRYPTION_KEY must be ${ENCRYPTION_KEY_FORMAT}`);
  const oldTexts = (env.DUNWALL_ENCRYPTION_KEYS_OLD ?? '')
    .split(',')
    .map((text) => text.trim())
    .filter((text) => text !== '');
  const encryptionKeysOld: KeyObject[] = [];
  oldTexts.forEach((text, i) => {
    const key = parseEncryptionKey(text);
    if (key === null)
      problems.push(`DUNWALL_ENCRYPTION_KEYS_OLD: key ${i + 1} of ${oldTexts.length} must be ${ENCRYPTION_KEY_FORMAT}`);
    else encryptionKeysOld.push(key);
  });
  // Old keys alone would leave new secrets in clear beside sealed ones: a half-done setup.
  if (oldTexts.length > 0 && raw === null)
    problems.push('DUNWALL_ENCRYPTION_KEYS_OLD needs DUNWALL_ENCRYPTION_KEY (the key new secrets are encrypted under)');
  return { encryptionKey, encryptionKeysOld };
}

/** A URL with one of `schemes` (e.g. `postgres`), or null when unset. */
export function url(env: Env, name: string, schemes: readonly string[], problems: string[]): string | null {
  const value = env[name]?.trim() || null;
  if (value === null) return null;
  let ok: boolean;
  try {
    ok = schemes.includes(new URL(value).protocol.slice(0, -1));
  } catch {
    ok = false;
  }
  // Never echo the URL: it may hold a password.
  if (!ok) problems.push(`${name} must be a ${schemes.map((s) => `${s}://`).join(' or ')} URL`);
  return value;
}

export const POSTGRES_SCHEMES = ['postgres', 'postgresql'];

export function boolean(env: Env, name: string, fallback: boolean, problems: string[]): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (['1', 'true'].includes(raw)) return true;
  if (['0', 'false'].includes(raw)) return false;
  problems.push(`${name} must be true or false (got ${JSON.stringify(env[name])})`);
  return fallback;
}
