import type { SubscriberStatus, TenantAuth } from '../domain/types.js';

/**
 * What the lookup reads: the store, or a cache in front of it. Defined beside the cache
 * that serves it, so that no lower layer imports a route for a type.
 */
export interface LookupSource {
  getTenantAuth(slug: string): Promise<TenantAuth | null>;
  getSubscriberStatus(tenantId: number, customerId: string): Promise<SubscriberStatus | null>;
}
