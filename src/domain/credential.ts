/** A key, hash or secret with its expiry: what verifies during a rotation's overlap. */
export interface Credential<T> {
  value: T;
  /** Epoch milliseconds after which the credential no longer verifies; null: no expiry. */
  expiresAtMs: number | null;
}

export function isCurrent(credential: Credential<unknown>, nowMs: number): boolean {
  return credential.expiresAtMs === null || credential.expiresAtMs > nowMs;
}
