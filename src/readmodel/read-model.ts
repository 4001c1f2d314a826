import { answerBody, lookupBody } from '../domain/lookup.js';
import type { SubscriberStatus, TenantAuth } from '../domain/types.js';
import { outsideRequestBounds, positionCovers } from '../store/index.js';
import type {
  CardNoticeExtra,
  ChangeLog,
  ChangePosition,
  LookupChanges,
  SubscriberExtra,
  UnreadableTenant,
} from '../store/index.js';
import { SubscriberExtras } from './subscriber-extras.js';
import { CardNotices } from './card-notices.js';
import type { ExtraView } from './subscriber-extras.js';
import { fingerprint, NOTICED_ACTIVE, statusOfState, SubscriberIndex } from './subscriber-index.js';

/**
 * How long after the database was last read the copy may still answer once the database is
 * found unreachable. Long enough to ride out a restart or a failover; short enough that, in a
 * longer outage, a `lockout` remembered from before it stops gating a customer who may have
 * paid since: past it the lookup answers 503 and the snippet fails open.
 */
export const DEFAULT_STALE_IF_ERROR_MS = 300_000;
/** A catch-up at least this often even when no notification came: the net under NOTIFY. */
export const DEFAULT_POLL_INTERVAL_MS = 5_000;
/** While the database or the listener is away, catch-ups are tried this often. */
export const DOWN_POLL_INTERVAL_MS = 1_000;
/**
 * Change log rows are kept this long: a process that lost its listener or was paused for
 * less resumes from where it stopped; one away for longer reloads.
 */
export const CHANGE_LOG_RETENTION_MS = 15 * 60_000;
export const PRUNE_INTERVAL_MS = 60_000;
/**
 * A write's answer waits at most this long for this process's copy, and every sibling
 * worker's, to show it; past it the answer leaves anyway (fail open) and is counted.
 */
export const WRITE_WAIT_MS = 1_000;

/**
 * The other worker processes of this instance (`serve --workers N`), each with its own
 * copy. `catchUp` asks every one of them to read the change log up to at least `position`
 * (null: whatever has committed by now) and says whether all did within `timeoutMs`.
 */
export interface Siblings {
  catchUp(position: ChangePosition | null, timeoutMs: number): Promise<boolean>;
}

/**
 * Tenants whose subscribers or settings a catch-up found changed (ids); null: the copy was
 * loaded whole, so any tenant may have changed.
 */
export type ChangedTenants = ReadonlySet<number> | null;

export interface ReadModelLog {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

export interface ReadModelOptions {
  staleIfErrorMs?: number;
  pollIntervalMs?: number;
  /** Where snapshot loads read (a replica, DATABASE_READ_URL); default the store. */
  loadFrom?: ChangeLog;
  /** The other workers of this instance, which a write waits for too; absent: none. */
  siblings?: Siblings;
  /** How long a write's answer waits for the copies to show it (default WRITE_WAIT_MS). */
  writeWaitMs?: number;
  now?: () => number;
  log?: ReadModelLog;
}

/**
 * One complete copy: every tenant by slug, every known subscriber's status. A tenant whose
 * row could not be read is kept by slug apart, so that its lookups say so (a 503 they fail
 * open on) rather than that it does not exist.
 */
class Copy {
  readonly tenants = new Map<string, TenantAuth>();
  readonly unreadable = new Map<string, UnreadableTenant>();
  readonly slugs = new Map<number, string>();
  readonly index: SubscriberIndex;
  readonly extras = new SubscriberExtras();
  /** The card-expiring notices that hold: the index's state marks their customers. */
  readonly notices = new CardNotices();
  /** Every tenant by the digests of its secret keys (as latin1 strings): a tenant API call names no slug. */
  readonly byKeyDigest = new Map<string, TenantAuth>();
  /** Each tenant's other space (its twin) by the twin's id. */
  readonly twins = new Map<number, TenantAuth>();
  /** One subscriber's fingerprint, read by the index and then the extras: a lookup hashes its id once. */
  private readonly fp = new Uint32Array(4);

  constructor(subscribers: number, tenants: readonly TenantAuth[], unreadable: readonly UnreadableTenant[]) {
    this.index = new SubscriberIndex(subscribers);
    for (const tenant of tenants) this.putTenant(tenant.id, tenant);
    for (const bad of unreadable) this.putTenant(bad.id, null, bad);
  }

  /**
   * The tenant of an id as it is now (null: gone, or `unreadable`). Changes of one catch-up
   * come in no particular order, so a slug is taken from whoever held it, and released only
   * by its holder: a slug deleted and created again, or moved between tenants, ends on its
   * owner.
   */
  putTenant(id: number, tenant: TenantAuth | null, unreadable: UnreadableTenant | null = null): void {
    const slug = this.slugs.get(id);
    if (slug !== undefined) {
      const before = this.tenants.get(slug);
      if (before?.id === id) {
        this.forgetKeys(before);
        this.tenants.delete(slug);
      }
      if (this.unreadable.get(slug)?.id === id) this.unreadable.delete(slug);
      this.slugs.delete(id);
    }
    const entry = tenant ?? unreadable;
    if (entry === null) return;
    const holder = this.tenants.get(entry.slug) ?? this.unreadable.get(entry.slug);
    if (holder !== undefined && holder.id !== id) {
      if ('secretKeys' in holder) this.forgetKeys(holder);
      this.slugs.delete(holder.id);
      this.tenants.delete(entry.slug);
      this.unreadable.delete(entry.slug);
    }
    if (tenant !== null) {
      this.tenants.set(tenant.slug, tenant);
      // Each key finds the space it addresses (the tenant's own, or its twin: the other mode's).
      for (const key of tenant.secretKeys) this.byKeyDigest.set(key.digest.toString('latin1'), tenant);
      const twin = tenant.twin;
      if (twin !== null) {
        this.twins.set(twin.id, twin);
        for (const key of twin.secretKeys) this.byKeyDigest.set(key.digest.toString('latin1'), twin);
      }
    } else if (unreadable !== null) this.unreadable.set(unreadable.slug, unreadable);
    this.slugs.set(id, entry.slug);
  }

  private forgetKeys(tenant: TenantAuth): void {
    if (tenant.twin !== null && this.twins.get(tenant.twin.id) === tenant.twin) this.twins.delete(tenant.twin.id);
    for (const space of tenant.twin === null ? [tenant] : [tenant, tenant.twin]) {
      for (const key of space.secretKeys) {
        const digest = key.digest.toString('latin1');
        if (this.byKeyDigest.get(digest) === space) this.byKeyDigest.delete(digest);
      }
    }
  }

  putSubscriber(
    tenantId: number,
    customerId: string,
    status: SubscriberStatus | null,
    extra: SubscriberExtra | null,
    notice: CardNoticeExtra | null = null,
  ): void {
    this.notices.set(tenantId, customerId, notice);
    if (notice !== null) this.index.setWithNotice(tenantId, customerId, status, true);
    else if (status === null) this.index.delete(tenantId, customerId);
    else this.index.set(tenantId, customerId, status);
    this.extras.set(tenantId, customerId, status === null || status === 'active' ? null : extra);
  }

  /** A notice of a snapshot load, after every subscriber: the index's state says it is there. */
  loadNotice(tenantId: number, customerId: string, notice: CardNoticeExtra): void {
    this.notices.set(tenantId, customerId, notice);
    this.index.setWithNotice(tenantId, customerId, this.index.get(tenantId, customerId), true);
  }

  /** `ReadModel.answer`, on this copy. */
  answer(tenant: TenantAuth, customerId: string, signed: boolean, nowMs: number): Buffer {
    const fp = this.fp;
    if (!fingerprint(tenant.id, customerId, fp)) return lookupBody(tenant, null);
    const state = this.index.stateOf(fp);
    // A customer with a notice (docs/notices.md): its notice's bytes, for a signed lookup of
    // a tenant that enables it while the notice holds; else as without one.
    if (state >= NOTICED_ACTIVE) return this.noticed(tenant, customerId, state === NOTICED_ACTIVE, signed, nowMs);
    const status = statusOfState(state);
    // Unknown and active: their prebuilt bytes, without a look at the extras.
    if (status === null || status === 'active') return lookupBody(tenant, status);
    // Without an extra: the tenant's prebuilt bytes, its enforcement applied.
    return this.extras.answer(fp, tenant, status, signed, nowMs) ?? answerBody(tenant, status, null, false, nowMs);
  }

  private noticed(tenant: TenantAuth, customerId: string, known: boolean, signed: boolean, nowMs: number): Buffer {
    const body = signed && tenant.cardExpiringNotice === true ? this.notices.answer(tenant, customerId, nowMs) : null;
    return body ?? lookupBody(tenant, known ? 'active' : null);
  }

  apply(changes: LookupChanges): void {
    for (const t of changes.tenants) this.putTenant(t.id, t.tenant, t.unreadable ?? null);
    for (const s of changes.subscribers)
      this.putSubscriber(s.tenantId, s.customerId, s.status, s.extra, s.notice ?? null);
  }
}

export interface ReadModelStats {
  tenants: number;
  /** Tenants left out because their row or a secret of it cannot be read (their lookups answer 503). */
  unreadableTenants: readonly UnreadableTenant[];
  subscribers: number;
  /** Subscribers whose answer carries a scheduled lockout or a pay link. */
  withExtras: number;
  /** Bytes of the subscriber index's arrays. */
  indexBytes: number;
  /** Writes whose answer waited for the copies to show them, and those answered at the bound instead. */
  writeWaits: { total: number; timedOut: number };
  /** The last full load: how long it took, and why it ran. */
  lastLoad: { seconds: number; reason: 'start' | 'gap' } | null;
  loads: number;
  catchUps: { ok: number; failed: number };
  changesApplied: number;
  /** Milliseconds since the database was last read successfully. */
  sinceSyncMs: number;
  listening: boolean;
}

/**
 * Everything the lookup reads, held in this process: every tenant (prepared: key digests,
 * HMAC keys, bodies) and the status of every known subscriber. No lookup waits on the
 * database.
 *
 * Kept true like an informer: a snapshot load, then the changes since that snapshot, read
 * from the store's change log whenever a notification says something committed, after each
 * of this instance's own writes, and every few seconds regardless. The log is read by
 * snapshot, not by sequence, so a writer that commits after a later one is never skipped
 * (migration 006). A lost listener resumes from the last position; when the log was pruned
 * past it, a full reload builds a new copy while the old one answers, then takes its place.
 *
 * Catch-ups run one at a time, in order: each applies what a later snapshot says, so the
 * copy only ever moves forward. While the database cannot be read the copy answers for
 * `staleIfErrorMs` after the last good read, then `serving` says no and lookups fail open.
 */
export class ReadModel {
  private copy: Copy | null = null;
  private position: ChangePosition | null = null;
  private syncedAtMs = 0;
  private down = false;
  private listening = false;
  private running: Promise<boolean> | null = null;
  private next: Promise<boolean> | null = null;
  private lastError: unknown = null;
  /** The unreadable tenants last logged, by id. */
  private reported = new Map<number, UnreadableTenant>();
  private readonly changeListeners = new Set<(tenants: ChangedTenants) => void>();
  /** Commits this process has made (that the copy must show), and how many of them the copy shows. */
  private commits = 0;
  private appliedCommits = 0;
  private pollTimer: NodeJS.Timeout | undefined;
  private pruneTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly cleanups: (() => Promise<void> | void)[] = [];
  private readonly staleIfErrorMs: number;
  private readonly pollIntervalMs: number;
  private readonly now: () => number;
  private readonly writeWaitMs: number;
  private readonly stats = {
    loads: 0,
    lastLoad: null as ReadModelStats['lastLoad'],
    ok: 0,
    failed: 0,
    changesApplied: 0,
    writeWaits: 0,
    writeWaitsTimedOut: 0,
  };

  private constructor(
    private readonly store: ChangeLog,
    private readonly options: ReadModelOptions,
  ) {
    this.staleIfErrorMs = options.staleIfErrorMs ?? DEFAULT_STALE_IF_ERROR_MS;
    this.pollIntervalMs = options.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
    this.now = options.now ?? Date.now;
    this.writeWaitMs = options.writeWaitMs ?? WRITE_WAIT_MS;
  }

  /**
   * Listens, loads, and keeps the copy true until `close`. Resolves once the copy is loaded
   * (ready means loaded); rejects when the first load fails.
   */
  static async open(store: ChangeLog, options: ReadModelOptions = {}): Promise<ReadModel> {
    const model = new ReadModel(store, options);
    try {
      await model.start();
    } catch (err) {
      await model.close();
      throw err;
    }
    return model;
  }

  private async start(): Promise<void> {
    // Listening first: a change committed during the load is in the log after the load's
    // snapshot, and its notification wakes a catch-up that reads it.
    const unlisten = await this.store.listenForChanges({
      onNotify: () => void this.catchUp(),
      onReady: () => {
        this.listening = true;
        void this.catchUp();
      },
      onLost: () => {
        this.listening = false;
        // Changes may be missed until it is back: read the log now, then every second.
        void this.catchUp();
        this.schedulePoll();
      },
    });
    this.cleanups.push(unlisten);
    this.cleanups.push(
      this.store.onCommit(() => {
        this.commits += 1;
        void this.catchUp();
      }),
    );
    await this.catchUp();
    if (this.copy === null) throw this.lastError ?? new Error('the read model did not load');
    // Ready means caught up with the primary too: a load from a replica may lag it.
    await this.catchUp();
    this.schedulePoll();
    this.pruneTimer = setInterval(() => void this.prune(), PRUNE_INTERVAL_MS);
    this.pruneTimer.unref();
  }

  /** True once loaded, while the database answers, and for `staleIfErrorMs` after it last did. */
  serving(nowMs: number): boolean {
    return this.copy !== null && (!this.down || nowMs - this.syncedAtMs <= this.staleIfErrorMs);
  }

  /**
   * How far behind the store's change log this copy may be at `nowMs`: the milliseconds since
   * the last catch-up (or load) that read the log successfully began. Every change committed
   * before `nowMs - lagMs` shows in the copy; one committed since may not yet. It is a bound,
   * not a measure of what is missing: an idle process reads the log at least every poll
   * interval, so it shows up to that much with nothing left to read. Null before the first load.
   */
  lagMs(nowMs: number): number | null {
    return this.copy === null ? null : Math.max(0, Math.round(nowMs - this.syncedAtMs));
  }

  /** The tenant of a slug; null: no such tenant, or one that cannot be read (see `unreadable`). Ask `serving` first. */
  tenant(slug: string): TenantAuth | null {
    return this.copy?.tenants.get(slug) ?? null;
  }

  /** The space of an id (a console session names its tenant's space by id); null: none, or unreadable. */
  tenantById(id: number): TenantAuth | null {
    const slug = this.copy?.slugs.get(id);
    const tenant = slug === undefined ? undefined : this.copy?.tenants.get(slug);
    // A twin's id: that space of its tenant (the other mode's).
    return tenant?.id === id ? tenant : (this.copy?.twins.get(id) ?? null);
  }

  /**
   * The tenant holding a secret key of this digest (SHA-256 of the key); null: none. The
   * caller still checks the key against the tenant's own list, in constant time, with its
   * expiry (`checkSecretKey`): this map only finds the tenant.
   */
  tenantBySecretKey(digest: Buffer): TenantAuth | null {
    return this.copy?.byKeyDigest.get(digest.toString('latin1')) ?? null;
  }

  /**
   * The tenant of a slug that exists but whose row or secrets cannot be read; null: none.
   * Its lookups fail open (503) until the row is fixed or deleted, which the change stream
   * brings like any other change.
   */
  unreadable(slug: string): UnreadableTenant | null {
    return this.copy?.unreadable.get(slug) ?? null;
  }

  /** A subscriber's status as last written; null: unknown. */
  status(tenantId: number, customerId: string): SubscriberStatus | null {
    return this.copy?.index.get(tenantId, customerId) ?? null;
  }

  /**
   * The lookup's 200 body for a customer of `tenant` (which the caller took from this model)
   * at `nowMs`: its status as answered (docs/reference.md, "Statuses and their derivation"
   * and "The dunning policy"), `lockout_at` while a lockout is scheduled, `pay_url` when
   * `signed`. The same bytes as `answerBody` with the subscriber's status and extra, built
   * when the subscriber, its tenant or the side of its scheduled lockout changes, never per
   * lookup.
   */
  answer(tenant: TenantAuth, customerId: string, signed: boolean, nowMs: number): Buffer {
    return this.copy === null ? lookupBody(tenant, null) : this.copy.answer(tenant, customerId, signed, nowMs);
  }

  /** What a non-active subscriber's answer carries (its scheduled lockout, its pay link); null: nothing. */
  extra(tenantId: number, customerId: string): Readonly<ExtraView> | null {
    return this.copy?.extras.get(tenantId, customerId) ?? null;
  }

  /** Where a request stands among this process's commits: what `writesApplied` is given once it has answered. */
  writeMark(): number {
    return this.commits;
  }

  /**
   * Resolves once the writes this process committed since `mark` show in its copy and in
   * every sibling worker's, so that the writer's next lookup reads them whichever worker
   * answers it; or after `writeWaitMs`, counted. Null when nothing was committed since.
   */
  writesApplied(mark: number): Promise<void> | null {
    if (this.commits === mark) return null;
    return this.awaitWrites(this.commits);
  }

  /** `writesApplied` for every write so far (tests, and callers without a mark). */
  ownWritesApplied(): Promise<void> | null {
    return this.writesApplied(this.appliedCommits);
  }

  private async awaitWrites(target: number): Promise<void> {
    this.stats.writeWaits += 1;
    const started = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), this.writeWaitMs);
    });
    try {
      // Any catch-up that starts after a commit reads it: the one the commit set off, or this one.
      const own =
        this.appliedCommits >= target ||
        (await Promise.race([this.catchUp().then(() => this.appliedCommits >= target), bound]));
      let all = own;
      if (this.options.siblings) {
        // Caught up, this copy's position is past the commit: each sibling reads up to it (or,
        // if this copy could not read, reads whatever has committed by now).
        const left = Math.max(1, this.writeWaitMs - (performance.now() - started));
        const position = own ? this.position : null;
        all = (await Promise.race([this.options.siblings.catchUp(position, left).catch(() => false), bound])) && own;
      }
      if (!all) this.stats.writeWaitsTimedOut += 1;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * A sibling worker committed up to `target` (null: something, before this call): resolves
   * true once this copy has read at least as far, false when the read failed.
   */
  async catchUpTo(target: ChangePosition | null): Promise<boolean> {
    if (target !== null && this.position !== null && positionCovers(this.position, target)) return true;
    return this.catchUp();
  }

  /**
   * Calls `listener` after each catch-up that applied changes, with the tenants they were
   * of (null after a reload: any may have changed), once the copy shows them: what waits
   * for a tenant's next change (the status feed's long polls) listens here rather than
   * polling the database. Returns the function that stops it.
   */
  onChanged(listener: (tenants: ChangedTenants) => void): () => void {
    this.changeListeners.add(listener);
    return () => {
      this.changeListeners.delete(listener);
    };
  }

  private emitChanged(tenants: ChangedTenants): void {
    for (const listener of this.changeListeners) {
      try {
        listener(tenants);
      } catch (err) {
        // A listener's failure is its own: the copy and the other listeners go on.
        this.options.log?.warn({ err: { message: (err as Error).message } }, 'a read model change listener failed');
      }
    }
  }

  /**
   * Reads what changed since the copy's position, one catch-up at a time. Resolves when a
   * catch-up that started after this call has ended, true when it read the log: a caller
   * that committed before calling then sees its change applied.
   */
  catchUp(): Promise<boolean> {
    if (this.stopped) return Promise.resolve(false);
    if (this.running === null) {
      // Whoever asks (a request that committed, a notification PGlite delivers as a request's
      // query completes), the catch-up is the process's: never bounded by a request's deadline.
      this.running = outsideRequestBounds(() => this.runOnce()).finally(() => {
        this.running = null;
      });
      return this.running;
    }
    // The one running may have read before the caller's commit: one more after it, shared
    // by every caller that arrives meanwhile.
    this.next ??= this.running.then(() => {
      this.next = null;
      return this.catchUp();
    });
    return this.next;
  }

  private async runOnce(): Promise<boolean> {
    const startedAt = this.now();
    // Every commit this process made before now is in what this catch-up reads.
    const commits = this.commits;
    try {
      if (this.position === null) {
        await this.load('start');
      } else {
        const changes = await this.store.lookupChangesSince(this.position);
        if (changes.gap) {
          this.options.log?.warn({}, 'the change log was pruned past this process: reloading the read model');
          await this.load('gap');
          this.emitChanged(null);
        } else {
          this.copy?.apply(changes);
          this.position = changes.position;
          this.stats.changesApplied += changes.tenants.length + changes.subscribers.length;
          if (changes.tenants.length + changes.subscribers.length > 0) {
            const tenants = new Set<number>();
            for (const t of changes.tenants) tenants.add(t.id);
            for (const sub of changes.subscribers) tenants.add(sub.tenantId);
            this.emitChanged(tenants);
          }
        }
      }
      this.reportUnreadable();
      if (this.down) this.options.log?.info({}, 'read model in sync with the database again');
      this.syncedAtMs = startedAt;
      this.down = false;
      this.lastError = null;
      this.stats.ok += 1;
      if (commits > this.appliedCommits) this.appliedCommits = commits;
      return true;
    } catch (err) {
      if (!this.down)
        this.options.log?.warn(
          { err: { message: (err as Error).message } },
          'read model cannot read the database: answering from memory',
        );
      this.down = true;
      this.lastError = err;
      this.stats.failed += 1;
      return false;
    }
  }

  /**
   * A full load into a new copy; the old one answers until it is done. The first load reads
   * the replica when there is one (the primary if the replica fails); a reload after a gap
   * reads the primary: a replica far enough behind to be past the log's horizon would load
   * a copy older than the one it replaces, again and again.
   */
  private async load(reason: 'start' | 'gap'): Promise<void> {
    const replica = reason === 'start' ? this.options.loadFrom : undefined;
    if (replica !== undefined) {
      try {
        await this.loadFrom(replica, reason);
        return;
      } catch (err) {
        this.options.log?.warn(
          { err: { message: (err as Error).message } },
          'the read model could not load from the replica: loading from the primary',
        );
      }
    }
    await this.loadFrom(this.store, reason);
  }

  private async loadFrom(source: ChangeLog, reason: 'start' | 'gap'): Promise<void> {
    const started = performance.now();
    let copy: Copy | null = null;
    const position = await source.loadLookupState({
      begin: (subscribers, tenants, unreadable) => {
        copy = new Copy(subscribers, tenants, unreadable);
      },
      subscriber: (tenantId, bytes, start, end, status, extra) => {
        copy?.index.setBytes(tenantId, bytes, start, end, status);
        if (extra !== null) copy?.extras.setBytes(tenantId, bytes, start, end, extra);
      },
      notice: (tenantId, customerId, notice) => copy?.loadNotice(tenantId, customerId, notice),
    });
    if (copy === null) throw new Error('the snapshot load returned nothing');
    this.copy = copy;
    this.position = position;
    const seconds = (performance.now() - started) / 1000;
    this.stats.loads += 1;
    this.stats.lastLoad = { seconds, reason };
    const loaded: Copy = copy;
    this.options.log?.info(
      {
        reason,
        seconds: Number(seconds.toFixed(3)),
        tenants: loaded.tenants.size,
        unreadableTenants: loaded.unreadable.size,
        subscribers: loaded.index.size,
      },
      'read model loaded',
    );
  }

  /**
   * Names each tenant that became unreadable, and each that is readable again, once per
   * change of that set: not at every catch-up, which would log the same line every few
   * seconds for as long as the row stays broken. The reason names the row and the kind of
   * secret, never its value.
   */
  private reportUnreadable(): void {
    const now = new Map<number, UnreadableTenant>();
    for (const bad of this.copy?.unreadable.values() ?? []) now.set(bad.id, bad);
    if (now.size === 0 && this.reported.size === 0) return;
    for (const [id, bad] of now) {
      if (this.reported.get(id)?.reason === bad.reason && this.reported.get(id)?.slug === bad.slug) continue;
      this.options.log?.warn(
        { tenant: bad.slug, tenantId: bad.id, reason: bad.reason },
        "a tenant's row cannot be read: its lookups answer 503 (fail open) until it is fixed; every other tenant is unaffected",
      );
    }
    for (const [id, was] of this.reported) {
      if (!now.has(id))
        this.options.log?.info(
          { tenant: was.slug, tenantId: id },
          'a tenant that could not be read is readable again, or gone',
        );
    }
    this.reported = now;
  }

  /** (Re)arms the poll: at once on a change of pace, as when the listener is lost. */
  private schedulePoll(): void {
    clearTimeout(this.pollTimer);
    if (this.stopped || this.copy === null) return;
    const interval =
      this.down || !this.listening ? Math.min(DOWN_POLL_INTERVAL_MS, this.pollIntervalMs) : this.pollIntervalMs;
    this.pollTimer = setTimeout(() => {
      void this.catchUp().finally(() => this.schedulePoll());
    }, interval);
    this.pollTimer.unref();
  }

  private async prune(): Promise<void> {
    try {
      await this.store.pruneLookupChanges(CHANGE_LOG_RETENTION_MS);
    } catch {
      // Pruning is housekeeping: the next round tries again.
    }
  }

  snapshotStats(): ReadModelStats {
    return {
      tenants: this.copy?.tenants.size ?? 0,
      unreadableTenants: [...(this.copy?.unreadable.values() ?? [])],
      subscribers: this.copy?.index.size ?? 0,
      withExtras: this.copy?.extras.size ?? 0,
      indexBytes: this.copy?.index.byteLength ?? 0,
      writeWaits: { total: this.stats.writeWaits, timedOut: this.stats.writeWaitsTimedOut },
      lastLoad: this.stats.lastLoad,
      loads: this.stats.loads,
      catchUps: { ok: this.stats.ok, failed: this.stats.failed },
      changesApplied: this.stats.changesApplied,
      sinceSyncMs: this.now() - this.syncedAtMs,
      listening: this.listening,
    };
  }

  /** Stops listening and polling; the copy keeps answering what it holds. */
  async close(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.pollTimer);
    clearInterval(this.pruneTimer);
    for (const cleanup of this.cleanups.splice(0)) await cleanup();
    await this.running?.catch(() => {});
  }
}
