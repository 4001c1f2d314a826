/**
 * When each secret key was last used, kept in memory and written in batches
 * (`SecretKeyStore.touchSecretKeys`): `last_used_at` is coarse by design, so that a request
 * never writes. Each process records its own uses; the store keeps the latest.
 */
export const KEY_USAGE_FLUSH_INTERVAL_MS = 60_000;

export class KeyUsage {
  private pending = new Map<string, number>();

  /** A request used the key at `nowMs`. */
  used(keyId: string, nowMs: number): void {
    const seen = this.pending.get(keyId);
    if (seen === undefined || seen < nowMs) this.pending.set(keyId, nowMs);
  }

  /** Hands the uses since the last flush to `write`; kept for the next flush when it fails. */
  async flush(write: (uses: ReadonlyMap<string, Date>) => Promise<void>): Promise<void> {
    if (this.pending.size === 0) return;
    const taken = this.pending;
    this.pending = new Map();
    try {
      await write(new Map([...taken].map(([id, ms]) => [id, new Date(ms)])));
    } catch (err) {
      for (const [id, ms] of taken) this.used(id, ms);
      throw err;
    }
  }
}
