import type { SubscriberStatus, TenantAuth } from '../domain/types.js';
import type { LookupSource } from './lookup-source.js';
import { isStoreUnavailable, StoreUnavailableError } from '../store/errors.js';
import type { Store } from '../store/store.js';
import type { Invalidation } from './invalidation.js';
import { Lru } from './lru.js';

export const DEFAULT_CACHE_ENTRIES = 100_000;
export const DEFAULT_CACHE_TTL_MS = 60_000;
/**
 * How old a value read from the store may be and still answer a lookup while the store is
 * unreachable. Long enough to ride out a restart or a failover; short enough that, in a
 * longer outage, a `lockout` remembered from before it stops gating a customer who may
 * have paid since: past it the lookup answers 503 and the snippet fails open.
 */
export const DEFAULT_STALE_IF_ERROR_MS = 300_000;
/**
 * After a read finds the store unreachable, reads do not try it again for this long, and
 * then one at a time: when packets are dropped each try waits out the connect timeout,
 * and lookups must not pile up behind it.
 */
export const STORE_RETRY_INTERVAL_MS = 1_000;
/** Recently invalidated subscriber keys remembered for racing reads. */
const MAX_TRACKED_CHANGES = 10_000;

export interface CacheEvents {
  hit(kind: 'tenant' | 'subscriber'): void;
  miss(kind: 'tenant' | 'subscriber'): void;
  /** Answered with the last known value because the store was unreachable. */
  stale(kind: 'tenant' | 'subscriber'): void;
  invalidated(kind: Invalidation['kind'] | 'flush'): void;
}

/** How long after an invalidation a key is read from the primary rather than a replica. */
export const REPLICA_LAG_WINDOW_MS = 2_000;

export interface LookupCacheOptions {
  /**
   * The primary, when `source` is a read replica: a key changed moments ago is read here
   * for a while, since the replica may not have the change yet.
   */
  primary?: LookupSource;
  /** Entries per map (tenants, subscribers). 0: no cache. */
  maxEntries?: number;
  ttlMs?: number;
  /** How old a last known value may be to answer while the store is unreachable; 0: never. */
  staleIfErrorMs?: number;
  now?: () => number;
  events?: CacheEvents;
}

const NO_EVENTS: CacheEvents = { hit() {}, miss() {}, stale() {}, invalidated() {} };

/**
 * The lookup's reads, cached in this process: tenants by slug and subscriber statuses,
 * unknown answers included (most lookups are for customers with no record). It serves
 * from memory only while invalidations flow (`setLive(true)`); while they may be missed
 * it reads through, so that it never answers from a stale entry while the store can answer.
 *
 * A read racing an invalidation must not put the old value back: every invalidation bumps
 * `generation` and notes it against what it touched, and a read stores its result only if
 * nothing it depends on was invalidated while it ran. Subscribers are tracked key by key,
 * so that a stream of webhooks for others does not keep a customer out of the cache;
 * tenants (rarely written) as one.
 *
 * When the store is unreachable, a read answers with the last value read for its key, if
 * that was read at most `staleIfErrorMs` ago (stale-if-error); else the failure goes on
 * to the caller (a 503). Values are kept for this while invalidations are not flowing,
 * though never served as hits then, and forgotten when they flow again.
 */
export class LookupCache implements LookupSource {
  private readonly tenants: Lru<string, TenantAuth | null>;
  private readonly subscribers: Lru<string, SubscriberStatus | null>;
  private readonly slugById = new Map<number, string>();
  private readonly ttlMs: number;
  private readonly now: () => number;
  private readonly events: CacheEvents;
  private generation = 0;
  /** The generation at which each recently invalidated subscriber key last changed. */
  private readonly subscriberChanges = new Map<string, number>();
  /** Reads that started before this generation may not fill (a flush, or a pruned map). */
  private subscriberFloor = 0;
  private tenantsChangedAt = 0;
  private live = false;
  private readonly primary: LookupSource | undefined;
  private readonly recentlyChanged = new Map<string, number>();
  private allChangedUntilMs = 0;
  private readonly staleIfErrorMs: number;
  /** The store was found unreachable, and no read has reached it since. */
  private storeDown = false;
  /** While the store is down, no read tries it before this time, and then one at a time. */
  private retryAtMs = 0;
  private probing = false;

  constructor(
    private readonly source: LookupSource,
    options: LookupCacheOptions = {},
  ) {
    const maxEntries = options.maxEntries ?? DEFAULT_CACHE_ENTRIES;
    this.tenants = new Lru(maxEntries);
    this.subscribers = new Lru(maxEntries);
    this.ttlMs = options.ttlMs ?? DEFAULT_CACHE_TTL_MS;
    this.staleIfErrorMs = options.staleIfErrorMs ?? DEFAULT_STALE_IF_ERROR_MS;
    this.now = options.now ?? Date.now;
    this.events = options.events ?? NO_EVENTS;
    this.primary = options.primary;
  }

  /** The replica, unless this key (or everything) changed within the lag window. */
  private sourceFor(key: string, nowMs: number): LookupSource {
    if (this.primary === undefined) return this.source;
    if (this.allChangedUntilMs > nowMs) return this.primary;
    const until = this.recentlyChanged.get(key);
    if (until === undefined) return this.source;
    if (until > nowMs) return this.primary;
    this.recentlyChanged.delete(key);
    return this.source;
  }

  private changed(key: string | null): void {
    if (this.primary === undefined) return;
    const until = this.now() + REPLICA_LAG_WINDOW_MS;
    // Bounded like the generations: past the bound, everything reads from the primary for
    // the window rather than remembering each key (a key is only forgotten once read again).
    if (key === null || this.recentlyChanged.size >= MAX_TRACKED_CHANGES) {
      this.recentlyChanged.clear();
      this.allChangedUntilMs = until;
    } else {
      this.recentlyChanged.set(key, until);
    }
  }

  async getTenantAuth(slug: string): Promise<TenantAuth | null> {
    const nowMs = this.now();
    if (this.live) {
      const hit = this.tenants.get(slug, nowMs);
      if (hit !== undefined) {
        this.events.hit('tenant');
        return hit;
      }
    }
    this.events.miss('tenant');
    const generation = this.generation;
    const source = this.sourceFor(`t:${slug}`, nowMs);
    let tenant: TenantAuth | null;
    try {
      tenant = await this.fromStore(() => source.getTenantAuth(slug), nowMs);
    } catch (err) {
      return this.lastKnown(this.tenants, slug, err, 'tenant');
    }
    // Filled while not live too: never a hit then, but the last known value if the store fails.
    if (generation >= this.tenantsChangedAt) {
      this.tenants.set(slug, tenant, nowMs + this.ttlMs);
      if (tenant) this.slugById.set(tenant.id, slug);
    }
    return tenant;
  }

  async getSubscriberStatus(tenantId: number, customerId: string): Promise<SubscriberStatus | null> {
    const key = `${tenantId}:${customerId}`;
    const nowMs = this.now();
    if (this.live) {
      const hit = this.subscribers.get(key, nowMs);
      if (hit !== undefined) {
        this.events.hit('subscriber');
        return hit;
      }
    }
    this.events.miss('subscriber');
    const generation = this.generation;
    const source = this.sourceFor(key, nowMs);
    let status: SubscriberStatus | null;
    try {
      status = await this.fromStore(() => source.getSubscriberStatus(tenantId, customerId), nowMs);
    } catch (err) {
      return this.lastKnown(this.subscribers, key, err, 'subscriber');
    }
    if (generation >= this.subscriberFloor && (this.subscriberChanges.get(key) ?? 0) <= generation) {
      this.subscribers.set(key, status, nowMs + this.ttlMs);
    }
    return status;
  }

  /**
   * Reads from the store unless it was found unreachable moments ago: then the read fails
   * at once, and after `STORE_RETRY_INTERVAL_MS` one read at a time tries the store again.
   */
  private async fromStore<T>(read: () => Promise<T>, nowMs: number): Promise<T> {
    const probe = this.storeDown;
    if (probe) {
      if (this.probing || nowMs < this.retryAtMs) throw new StoreUnavailableError();
      this.probing = true;
    }
    try {
      const value = await read();
      this.storeDown = false;
      return value;
    } catch (err) {
      // Any other failure is an answer from the store: it is reachable.
      this.storeDown = isStoreUnavailable(err);
      if (this.storeDown) this.retryAtMs = this.now() + STORE_RETRY_INTERVAL_MS;
      throw err;
    } finally {
      if (probe) this.probing = false;
    }
  }

  /**
   * The last value read for `key`, when the store is unreachable and that read is recent
   * enough; otherwise the failure itself. Entries are stored with the time of their read
   * plus the TTL, so the read's time is recovered from the expiry.
   */
  private lastKnown<V>(map: Lru<string, V>, key: string, err: unknown, kind: 'tenant' | 'subscriber'): V {
    if (!isStoreUnavailable(err) || this.staleIfErrorMs === 0) throw err;
    const entry = map.peek(key);
    if (entry === undefined || this.now() - (entry.expiresAtMs - this.ttlMs) > this.staleIfErrorMs) throw err;
    this.events.stale(kind);
    return entry.value;
  }

  invalidate(invalidation: Invalidation): void {
    this.generation += 1;
    this.events.invalidated(invalidation.kind);
    if (invalidation.kind === 'subscriber') {
      const key = `${invalidation.tenantId}:${invalidation.customerId}`;
      this.subscribers.delete(key);
      this.changed(key);
      if (this.subscriberChanges.size >= MAX_TRACKED_CHANGES) {
        // Bounded: forget the per-key marks and refuse every fill in flight instead.
        this.subscriberChanges.clear();
        this.subscriberFloor = this.generation;
      } else {
        this.subscriberChanges.set(key, this.generation);
      }
      return;
    }
    this.tenantsChangedAt = this.generation;
    if (invalidation.kind === 'tenant') {
      for (const slug of [invalidation.slug, this.slugById.get(invalidation.tenantId)]) {
        if (slug === null || slug === undefined) continue;
        this.tenants.delete(slug);
        this.changed(`t:${slug}`);
      }
    } else {
      this.tenants.clear();
      this.changed(null);
    }
  }

  /** Forgets everything: after a lost listener, notifications may have been missed. */
  flush(): void {
    this.generation += 1;
    this.subscriberFloor = this.generation;
    this.tenantsChangedAt = this.generation;
    this.subscriberChanges.clear();
    this.changed(null);
    this.events.invalidated('flush');
    this.tenants.clear();
    this.subscribers.clear();
  }

  /**
   * Serve from memory only while invalidations are known to flow. Going live forgets
   * everything (notifications may have been missed until now); going down keeps the
   * values, never to serve them as hits, only to answer with if the store fails too.
   */
  setLive(live: boolean): void {
    if (live) this.flush();
    this.live = live;
  }

  /** True while served from memory, i.e. while invalidations are known to flow. */
  get isLive(): boolean {
    return this.live;
  }

  get size(): { tenants: number; subscribers: number } {
    return { tenants: this.tenants.size, subscribers: this.subscribers.size };
  }
}

/**
 * Keeps `cache` true: this instance's own writes at once, every instance's through the
 * store's notifications. Returns the function that stops listening.
 */
export async function keepTrue(cache: LookupCache, store: Store): Promise<() => Promise<void>> {
  const unsubscribe = store.onInvalidate((invalidation) => cache.invalidate(invalidation));
  const unlisten = await store.listenForInvalidations({
    onInvalidate: (invalidation) => cache.invalidate(invalidation),
    onReady: () => cache.setLive(true),
    onLost: () => cache.setLive(false),
  });
  return async () => {
    unsubscribe();
    cache.setLive(false);
    await unlisten();
  };
}
