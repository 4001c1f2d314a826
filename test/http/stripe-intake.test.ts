import { describe, expect, it } from 'vitest';
import type { StripeIntakeCount } from '../../src/domain/stripe/intake.js';
import { StripeIntake } from '../../src/http/stripe-intake.js';

/**
 * The in-memory Stripe intake counters: any number of deliveries of one (tenant, day, kind)
 * are one row at the next flush, a failed flush keeps its counts for the next one, and the
 * map holds at most its cap of keys whatever reaches it.
 */
const T = Date.parse('2026-01-01T23:59:59.000Z');

function recorder() {
  const writes: StripeIntakeCount[][] = [];
  return { writes, write: async (counts: readonly StripeIntakeCount[]) => void writes.push([...counts]) };
}

describe('StripeIntake', () => {
  it('turns N deliveries of one tenant, day and kind into one row, with the last time', async () => {
    const intake = new StripeIntake();
    for (let i = 0; i < 1_000; i += 1) intake.count(7, 'refused_signature', T - 1_000 + i);
    // Out of order: the last time stays the latest.
    intake.count(7, 'refused_signature', T - 5_000);
    const { writes, write } = recorder();
    await intake.flush(write);
    expect(writes).toEqual([
      [{ tenantId: 7, day: '2026-01-01', kind: 'refused_signature', count: 1_001, lastAt: new Date(T - 1) }],
    ]);
    // Nothing since: no write at all.
    await intake.flush(write);
    expect(writes).toHaveLength(1);
  });

  it('keeps tenants, UTC days and kinds apart, and counts a replay by its events', async () => {
    const intake = new StripeIntake();
    intake.count(1, 'received', T);
    intake.count(1, 'received', T + 1_000); // 2026-01-02, UTC
    intake.count(2, 'received', T);
    intake.count(1, 'refused_livemode', T);
    intake.count(1, 'replayed', T, 250);
    intake.count(1, 'replayed', T, 0);
    const { writes, write } = recorder();
    await intake.flush(write);
    expect((writes[0] ?? []).map((c) => `${c.tenantId} ${c.day} ${c.kind} ${c.count}`).sort()).toEqual([
      '1 2026-01-01 received 1',
      '1 2026-01-01 refused_livemode 1',
      '1 2026-01-01 replayed 250',
      '1 2026-01-02 received 1',
      '2 2026-01-01 received 1',
    ]);
  });

  it('keeps the counts of a failed flush for the next one, added to what came meanwhile', async () => {
    const intake = new StripeIntake();
    intake.count(1, 'received', T);
    intake.count(1, 'received', T);
    await expect(
      intake.flush(async () => {
        // A delivery counted while the write is under way goes to the next flush too.
        intake.count(1, 'received', T + 500);
        throw new Error('store down');
      }),
    ).rejects.toThrow('store down');
    const { writes, write } = recorder();
    await intake.flush(write);
    expect(writes).toEqual([
      [{ tenantId: 1, day: '2026-01-01', kind: 'received', count: 3, lastAt: new Date(T + 500) }],
    ]);
  });

  it('holds at most its cap of keys: a new key past it is dropped and counted, a known key still counts', async () => {
    const intake = new StripeIntake(3);
    for (let tenant = 1; tenant <= 1_000; tenant += 1) intake.count(tenant, 'refused_signature', T);
    expect(intake.size).toBe(3);
    expect(intake.dropped).toBe(997);
    intake.count(2, 'refused_signature', T, 5);
    const { writes, write } = recorder();
    await intake.flush(write);
    expect((writes[0] ?? []).map((c) => [c.tenantId, c.count])).toEqual([
      [1, 1],
      [2, 6],
      [3, 1],
    ]);
    // Flushed: room again.
    intake.count(999, 'received', T);
    expect(intake.size).toBe(1);
  });
});
