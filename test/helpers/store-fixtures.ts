import { sha256 } from '../../src/domain/keys.js';
import { vi } from 'vitest';
import type { Maintenance, NewTenant, RetainedTable } from '../../src/store/store.js';

/** A tenant as the store takes it: the starter tier, no options, a key and secret derived from the slug. */
export function newTenant(slug: string, extra: Partial<NewTenant> = {}): NewTenant {
  return {
    slug,
    tier: 'starter',
    cardUpdateUrl: null,
    hmacRequired: false,
    allowedOrigins: null,
    publishableKeyHash: sha256(`pk_${slug}_key_0000000000000000000`).toString('hex'),
    hmacSecret: `secret-${slug}`,
    ...extra,
  };
}

/**
 * Runs retention on `table` until `gone()` holds, and returns how many rows it deleted.
 * Retention keeps what a transaction still open may not see yet (on a shared server, any
 * other test's), so one round does not always prune the newest rows.
 */
export async function pruneUntil(
  store: Pick<Maintenance, 'pruneOld'>,
  table: RetainedTable,
  gone: () => Promise<boolean>,
): Promise<number> {
  let pruned = 0;
  await vi.waitFor(
    async () => {
      pruned += await store.pruneOld(table, new Date(Date.now() + 86_400_000), 10_000);
      if (!(await gone())) throw new Error(`${table}: not pruned yet`);
    },
    { timeout: 10_000, interval: 50 },
  );
  return pruned;
}
