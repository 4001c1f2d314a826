import { sha256 } from '../../src/domain/keys.js';
import { vi } from 'vitest';
import type { TenantAuth } from '../../src/domain/types.js';
import type { ChangeLog, Maintenance, NewTenant, RetainedTable, SubscriberStore } from '../../src/store/index.js';

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

/**
 * The tenant as the lookup reads it, through the change log's snapshot; null: no such tenant.
 * A tenant the snapshot leaves out as unreadable throws, with the reason the store gives.
 */
export async function tenantAuth(
  changes: Pick<ChangeLog, 'loadLookupState'>,
  slug: string,
): Promise<TenantAuth | null> {
  let found: TenantAuth | null = null;
  let unreadable: string | null = null;
  await changes.loadLookupState({
    begin(_subscribers, tenants, left) {
      found = tenants.find((t) => t.slug === slug) ?? null;
      unreadable = left.find((t) => t.slug === slug)?.reason ?? null;
    },
    subscriber() {},
  });
  if (unreadable !== null) throw new Error(unreadable);
  return found;
}

/** The subscriber's answered status; null: no record. */
export async function subscriberStatus(
  subscribers: Pick<SubscriberStore, 'getSubscriber'>,
  tenantId: number,
  customerId: string,
): Promise<string | null> {
  return (await subscribers.getSubscriber(tenantId, customerId))?.status ?? null;
}
