import { timingSafeEqual } from 'node:crypto';
import { isScope, SCOPES, sha256 } from './keys.js';
import type { Scope } from './keys.js';
import type { SecretKeyAuth } from './types.js';

/**
 * A tenant's secret keys (docs/reference.md#keys-and-scopes), checked as values: the key is hashed and
 * compared, digest to digest and in constant time, with every digest of the tenant, so that
 * neither which key nor how much of it matched can be timed. Nothing here is remembered per
 * presented key: a secret key is never held in memory as a map key.
 */
export type SecretKeyFailure = 'invalid_secret_key' | 'insufficient_scope';

export function findSecretKey(keys: readonly SecretKeyAuth[], digest: Buffer, nowMs: number): SecretKeyAuth | null {
  let match: SecretKeyAuth | null = null;
  for (const key of keys) {
    if (timingSafeEqual(digest, key.digest)) match = key;
  }
  if (match === null) return null;
  return match.expiresAtMs === null || match.expiresAtMs > nowMs ? match : null;
}

/** The key `token` names among `keys` at `nowMs`, holding `scope`; or why not. */
export function checkSecretKey(
  keys: readonly SecretKeyAuth[],
  token: string,
  scope: Scope,
  nowMs: number,
): { ok: true; key: SecretKeyAuth } | { ok: false; code: SecretKeyFailure } {
  const key = findSecretKey(keys, sha256(token), nowMs);
  if (key === null) return { ok: false, code: 'invalid_secret_key' };
  return key.scopes.has(scope) ? { ok: true, key } : { ok: false, code: 'insufficient_scope' };
}

/** Scopes as asked for: known, none twice, in the contract's order; or the first that is not one. */
export function parseScopes(values: readonly string[]): { ok: true; scopes: Scope[] } | { ok: false; bad: string } {
  for (const v of values) if (!isScope(v)) return { ok: false, bad: v };
  return { ok: true, scopes: SCOPES.filter((s) => values.includes(s)) };
}

/** The scopes of `wanted` that `held` lacks: a key never grants what its creator does not hold. */
export function scopesLacking(held: ReadonlySet<Scope> | 'all', wanted: readonly Scope[]): Scope[] {
  return held === 'all' ? [] : wanted.filter((s) => !held.has(s));
}
