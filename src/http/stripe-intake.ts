import { utcDay } from '../domain/stripe/intake.js';
import type { StripeIntakeCount, StripeIntakeKind } from '../domain/stripe/intake.js';
import type { Metrics } from '../metrics/index.js';

/**
 * The Stripe intake counters of this process (migration 016), kept in memory and added to
 * the store in one statement per flush (`StripeIntakeStore.addStripeIntake`): a delivery,
 * refused or not, costs a map update, never a write. Only tenants that exist are counted
 * (the routes count after the tenant is found), so that a flood of made-up slugs adds
 * nothing; and the map holds at most `maxKeys` (tenant, day, kind) between two flushes,
 * whatever reaches it: past that, new keys are dropped and counted in `dropped`.
 */
export const STRIPE_INTAKE_FLUSH_INTERVAL_MS = 10_000;
/** About four kinds for each of 5,000 tenants active within one flush interval. */
export const MAX_PENDING_INTAKE_KEYS = 20_000;

interface Pending {
  tenantId: number;
  day: string;
  kind: StripeIntakeKind;
  count: number;
  lastAtMs: number;
}

export class StripeIntake {
  private pending = new Map<string, Pending>();
  /** Counts not kept because the map was full when their key was new. */
  dropped = 0;

  constructor(private readonly maxKeys = MAX_PENDING_INTAKE_KEYS) {}

  /** `n` of `kind` for the tenant at `nowMs`, on its UTC day. */
  count(tenantId: number, kind: StripeIntakeKind, nowMs: number, n = 1): void {
    if (n <= 0) return;
    this.add(tenantId, utcDay(nowMs), kind, n, nowMs);
  }

  /** Keys waiting for the next flush. */
  get size(): number {
    return this.pending.size;
  }

  private add(tenantId: number, day: string, kind: StripeIntakeKind, n: number, atMs: number): void {
    const key = `${tenantId}|${day}|${kind}`;
    const entry = this.pending.get(key);
    if (entry !== undefined) {
      entry.count += n;
      if (atMs > entry.lastAtMs) entry.lastAtMs = atMs;
      return;
    }
    if (this.pending.size >= this.maxKeys) {
      this.dropped += n;
      return;
    }
    this.pending.set(key, { tenantId, day, kind, count: n, lastAtMs: atMs });
  }

  /**
   * Hands the counts since the last flush to `write`, one row per (tenant, day, kind); when
   * it fails they are counted again for the next flush (as far as the map has room).
   */
  async flush(write: (counts: readonly StripeIntakeCount[]) => Promise<void>): Promise<void> {
    if (this.pending.size === 0) return;
    const taken = this.pending;
    this.pending = new Map();
    try {
      await write(
        [...taken.values()].map((p) => ({
          tenantId: p.tenantId,
          day: p.day,
          kind: p.kind,
          count: p.count,
          lastAt: new Date(p.lastAtMs),
        })),
      );
    } catch (err) {
      for (const p of taken.values()) this.add(p.tenantId, p.day, p.kind, p.count, p.lastAtMs);
      throw err;
    }
  }
}

/** The Stripe intake counts this process could not keep, read at each scrape. */
export function observeStripeIntake(metrics: Metrics, intake: Pick<StripeIntake, 'dropped'>): void {
  metrics.observeCounter(
    'dunwall_stripe_intake_dropped_total',
    'Stripe intake counts this process dropped: its in-memory map was full between two flushes',
    () => intake.dropped,
  );
}
