import { PassThrough } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import {
  decodeFeedCursor,
  decodeListCursor,
  encodeFeedCursor,
  encodeListCursor,
  MAX_CURSOR_LENGTH,
} from '../../domain/feed-cursor.js';
import type { FeedCursor, ListCursor } from '../../domain/feed-cursor.js';
import { formatLockoutAt } from '../../domain/policy.js';
import type { ChangedTenants, ReadModel } from '../../readmodel/index.js';
import type { StatusChange, StatusChanges, StatusEntry, StatusFeed } from '../../store/index.js';
import type { App } from '../app-instance.js';
import type { Credential, ResolvedTenant } from '../principal.js';
import { AppError } from '../problems.js';
import { Entitlements, ProblemRef, Status } from '../schemas.js';

/**
 * The tenant's status feed (docs/reference.md#the-status-feed, docs/feed.md): `GET /statuses` lists the
 * subscribers answered other than `active` with the position the feed goes on from, and
 * `GET /status-changes` follows it, at once, as a long poll, or as Server-Sent Events.
 *
 * Registered behind the hook that resolves the tenant (`req.tenant`) and checks that the
 * caller holds `status:read`; the tenant is always the request's, never a cursor's.
 *
 * A wait does not poll the database in a loop: it sleeps until this process's read model
 * applies a change of its tenant (committed on any instance: the change log's NOTIFY wakes
 * every read model), and reads the feed then; a slow safety poll covers a lost wake-up.
 */

export const DEFAULT_FEED_PAGE = 100;
export const MAX_FEED_PAGE = 1000;
export const MAX_WAIT_S = 30;

export interface StatusFeedLimits {
  /** Server-Sent Events streams open at once per tenant, in this process. */
  maxStreamsPerTenant: number;
  /** Long polls waiting at once per tenant, in this process. */
  maxWaitsPerTenant: number;
  /** A comment on every quiet stream this often, so that proxies and idle timeouts keep it. */
  heartbeatMs: number;
  /** A wait reads the feed at least this often, woken or not: the net under the wake-ups. */
  safetyPollMs: number;
  /**
   * A stream whose client reads slower than its changes come is closed once more than this
   * many bytes wait in the process to be sent to it (it resumes from its last id).
   */
  maxBufferedBytes: number;
  /** A console session's stream or long poll asks the store this often whether it was signed out. */
  sessionRecheckMs: number;
}

export const DEFAULT_STATUS_FEED_LIMITS: Readonly<StatusFeedLimits> = Object.freeze({
  maxStreamsPerTenant: 20,
  maxWaitsPerTenant: 100,
  heartbeatMs: 15_000,
  safetyPollMs: 5_000,
  maxBufferedBytes: 256 * 1024,
  sessionRecheckMs: 500,
});

/** An expiry further away than this is looked at again then (timers hold at most about 24 days). */
const LONGEST_EXPIRY_TIMER_MS = 3_600_000;

/** The Retry-After of a 429 `too_many_streams`. */
const TOO_MANY_RETRY_AFTER_S = 5;

/** Time as the waits see it: tests pass a fake one, nothing sleeps. */
export interface FeedTimers {
  /** Monotonic milliseconds. */
  now(): number;
  /** Calls `fn` once after `ms`, unless the returned function is called first; never keeps the process alive. */
  after(ms: number, fn: () => void): () => void;
}

export const REAL_FEED_TIMERS: FeedTimers = {
  now: () => performance.now(),
  after(ms, fn) {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
};

export interface StatusFeedOptions {
  /** The feed's reads: the store. */
  feed: StatusFeed;
  /** This process's read model: the tenant's entitlements, and the wake-ups when a tenant's subscribers change. */
  model: Pick<ReadModel, 'tenant' | 'tenantById' | 'onChanged'>;
  limits?: Partial<StatusFeedLimits>;
  timers?: FeedTimers;
  /** The wall clock the credentials' expiries are read on (milliseconds since the epoch); default Date.now. */
  now?: () => number;

  /**
   * The routes' OpenAPI security requirement; default `[{ secretKey: ['status:read'] }]`, which
   * needs a `secretKey` security scheme in the document.
   */
  security?: Record<string, string[]>[];
}

// --- schemas -------------------------------------------------------------------------------

const LIMIT_PATTERN = '^[1-9][0-9]{0,3}$';
const CursorText = (description: string) =>
  Type.String({ description: `${description} (opaque, at most ${MAX_CURSOR_LENGTH} characters)` });
const LockoutAt = Type.Optional(
  Type.String({
    format: 'date-time',
    description: 'While warning: when the scheduled lockout falls (RFC 3339, UTC, seconds)',
  }),
);
const PayUrl = Type.Optional(
  Type.String({ description: "While warning or lockout: Stripe's hosted page of the invoice to pay, when known" }),
);

const StatusesQuery = Type.Object(
  {
    cursor: Type.Optional(CursorText('next of the previous page')),
    limit: Type.Optional(
      Type.String({
        pattern: LIMIT_PATTERN,
        description: `Subscribers per page, 1 to ${MAX_FEED_PAGE} (default ${DEFAULT_FEED_PAGE})`,
      }),
    ),
  },
  { additionalProperties: false },
);

const StatusesPage = Type.Object({
  data: Type.Array(
    Type.Object({ processor_customer_id: Type.String(), status: Status, lockout_at: LockoutAt, pay_url: PayUrl }),
  ),
  entitlements: Entitlements,
  next: Type.Union([Type.String(), Type.Null()], {
    description: 'Pass as cursor for the next page; null: this was the last',
  }),
  feed_cursor: Type.String({
    description: 'Where the feed continues once the whole list is read: pass as after to /status-changes',
  }),
});

const StatusChangesQuery = Type.Object(
  {
    after: CursorText('feed_cursor of the list, next of the previous page, or the cursor of the last change applied'),
    wait: Type.Optional(
      Type.String({
        pattern: '^(?:[0-9]|[12][0-9]|30)$',
        description: `Seconds to wait when nothing is new, 0 to ${MAX_WAIT_S} (default 0: answer at once)`,
      }),
    ),
    limit: Type.Optional(
      Type.String({
        pattern: LIMIT_PATTERN,
        description: `Changes per page, 1 to ${MAX_FEED_PAGE} (default ${DEFAULT_FEED_PAGE})`,
      }),
    ),
  },
  { additionalProperties: false },
);

const StatusChangesHeaders = Type.Object({
  accept: Type.Optional(
    Type.String({ description: 'text/event-stream: the changes as Server-Sent Events until the client leaves' }),
  ),
  'last-event-id': Type.Optional(
    Type.String({ description: 'A stream resumed by the browser: the id of the last event it got, taken over after' }),
  ),
});

const StatusChangesPage = Type.Object(
  {
    data: Type.Array(
      Type.Object({
        cursor: Type.String({ description: 'Resumes right after this change' }),
        processor_customer_id: Type.String(),
        status: Status,
        lockout_at: LockoutAt,
        pay_url: PayUrl,
        occurred_at: Type.String({ format: 'date-time' }),
      }),
    ),
    next: Type.String({ description: 'Pass as after for what comes next' }),
  },
  { description: 'A page of changes, in the order they are to be applied' },
);

// --- presenters ----------------------------------------------------------------------------

function presentEntry(e: StatusEntry) {
  return {
    processor_customer_id: e.customerId,
    status: e.status,
    ...(e.lockoutAtS === null ? {} : { lockout_at: formatLockoutAt(e.lockoutAtS * 1000) }),
    ...(e.payUrl === null ? {} : { pay_url: e.payUrl }),
  };
}

/** A change, its keys in the contract's order. */
function presentChange(c: StatusChange) {
  return {
    cursor: encodeFeedCursor(c.cursor),
    ...presentEntry(c),
    occurred_at: c.occurredAt.toISOString(),
  };
}

// --- waits ---------------------------------------------------------------------------------

type Woken = 'changed' | 'poll' | 'closed';

/** One request waiting on its tenant's next change: woken by the read model, a poll timer, or its end. */
class Wait {
  private woken = false;
  private closed = false;
  private settle: ((why: Woken) => void) | null = null;
  private readonly ends: (() => void)[] = [];
  private revokedFlag = false;

  constructor(
    private readonly timers: FeedTimers,
    private readonly onClose: () => void,
    /** What let the request in; null: the operator's, which nothing revokes. */
    readonly credential: Credential | null,
  ) {}

  /** `fn` runs once when the wait closes (at once if it has). */
  onEnd(fn: () => void): void {
    if (this.closed) fn();
    else this.ends.push(fn);
  }

  /** A change of the tenant was applied: the current or the next `next` resolves at once. */
  wake(): void {
    if (this.settle !== null) this.settle('changed');
    else this.woken = true;
  }

  /** Resolves on a wake (also one that came since the last call), after `ms` ('poll'), or once closed. */
  next(ms: number): Promise<Woken> {
    if (this.closed) return Promise.resolve('closed');
    if (this.woken) {
      this.woken = false;
      return Promise.resolve('changed');
    }
    return new Promise((resolve) => {
      const cancel = this.timers.after(ms, () => this.settle?.('poll'));
      this.settle = (why) => {
        cancel();
        this.settle = null;
        resolve(why);
      };
    });
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Closed because its credential was revoked, expired or signed out. */
  get revoked(): boolean {
    return this.revokedFlag;
  }

  /** The request ended, its client left, or the app closes: idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.settle?.('closed');
    this.onClose();
    for (const fn of this.ends.splice(0)) fn();
  }

  /** Its credential ended: it closes, and its request is answered as one with that credential would be. */
  revoke(): void {
    if (this.closed) return;
    this.revokedFlag = true;
    this.close();
  }
}

/**
 * The open waits of this process by tenant, each kind counted against its bound. Listens to
 * the read model from the first wait on: building the app (and its OpenAPI document) reads
 * nothing.
 */
class Waits {
  private readonly open = new Map<number, Set<Wait>>();
  private readonly counts = { stream: new Map<number, number>(), poll: new Map<number, number>() };
  private unlisten: (() => void) | null = null;
  private closing = false;

  /** The expiry timer of each open wait with a credential: set again whenever its end is looked up. */
  private readonly expiries = new Map<Wait, (cancel: () => void) => void>();

  constructor(
    private readonly model: StatusFeedOptions['model'],
    private readonly timers: FeedTimers,
    private readonly limits: StatusFeedLimits,
    private readonly now: () => number,
  ) {}

  /**
   * A wait for the tenant's changes, held for as long as `credential` holds: revoked when the
   * read model shows it ended (every catch-up that changed the tenant asks again), at its
   * expiry (a timer), or, for a console session, once the store no longer has it (asked every
   * `sessionRecheckMs`). too_many_streams past the kind's bound.
   */
  take(tenantId: number, kind: 'stream' | 'poll', credential: Credential | null): Wait {
    const counts = this.counts[kind];
    const held = counts.get(tenantId) ?? 0;
    const bound = kind === 'stream' ? this.limits.maxStreamsPerTenant : this.limits.maxWaitsPerTenant;
    if (held >= bound)
      throw new AppError('too_many_streams', undefined, { 'retry-after': String(TOO_MANY_RETRY_AFTER_S) });
    this.unlisten ??= this.model.onChanged((tenants) => this.wake(tenants));
    let set = this.open.get(tenantId);
    if (set === undefined) {
      set = new Set();
      this.open.set(tenantId, set);
    }
    let stopExpiry = () => {};
    let stopRecheck = () => {};
    const wait: Wait = new Wait(
      this.timers,
      () => {
        stopExpiry();
        stopRecheck();
        this.expiries.delete(wait);
        set.delete(wait);
        if (set.size === 0 && this.open.get(tenantId) === set) this.open.delete(tenantId);
        const left = (counts.get(tenantId) ?? 1) - 1;
        if (left > 0) counts.set(tenantId, left);
        else counts.delete(tenantId);
      },
      credential,
    );
    set.add(wait);
    counts.set(tenantId, held + 1);
    if (this.closing) {
      wait.close();
      return wait;
    }
    if (credential === null) return wait;
    this.expiries.set(wait, (cancel) => {
      stopExpiry();
      stopExpiry = cancel;
    });
    this.checkCredential(wait);
    const stillSignedIn = credential.stillSignedIn;
    if (stillSignedIn !== undefined) {
      const recheck = () => {
        stopRecheck = this.timers.after(this.limits.sessionRecheckMs, () => {
          // A store that cannot answer keeps the session (it fails open); the read model still ends its key.
          void stillSignedIn()
            .catch(() => true)
            .then((yes) => {
              if (!yes) wait.revoke();
              else if (!wait.isClosed) recheck();
            });
        });
      };
      if (!wait.isClosed) recheck();
    }
    return wait;
  }

  /** Revokes a wait whose credential has ended; else sets its timer to the credential's end. */
  private checkCredential(wait: Wait): void {
    const credential = wait.credential;
    const setTimer = this.expiries.get(wait);
    if (credential === null || wait.isClosed || setTimer === undefined) return;
    const nowMs = this.now();
    const ends = credential.endsAt(nowMs);
    if (ends === 'ended' || (ends !== null && ends <= nowMs)) {
      wait.revoke();
      return;
    }
    setTimer(
      ends === null
        ? () => {}
        : this.timers.after(Math.min(ends - nowMs, LONGEST_EXPIRY_TIMER_MS), () => this.checkCredential(wait)),
    );
  }

  private wake(tenants: ChangedTenants): void {
    const sets =
      tenants === null ? [...this.open.values()] : [...tenants].map((id) => this.open.get(id) ?? new Set<Wait>());
    for (const set of sets)
      for (const wait of [...set]) {
        // A key revoked or rotated, a session's key gone, a tenant deleted: each change of the tenant asks again.
        this.checkCredential(wait);
        wait.wake();
      }
  }

  /** The app closes: every long poll answers what it has, every stream ends. */
  closeAll(): void {
    this.closing = true;
    for (const set of [...this.open.values()]) for (const wait of [...set]) wait.close();
  }

  stop(): void {
    this.unlisten?.();
    this.unlisten = null;
  }
}

// --- requests ------------------------------------------------------------------------------

function tenantOf(req: FastifyRequest): ResolvedTenant {
  // The hook that resolves the tenant runs before these routes; without it they must not answer.
  if (req.tenant === null || req.tenant === undefined)
    throw new Error('the status feed routes need the tenant-resolving hook');
  return req.tenant;
}

function limitOf(raw: string | undefined): number {
  const limit = raw === undefined ? DEFAULT_FEED_PAGE : Number(raw);
  if (limit > MAX_FEED_PAGE) throw new AppError('invalid_request', `limit: must be at most ${MAX_FEED_PAGE}`);
  return limit;
}

function feedCursorOf(value: string, parameter: string): FeedCursor {
  const cursor = decodeFeedCursor(value);
  if (cursor === null)
    throw new AppError(
      'invalid_cursor',
      `${parameter}: is not a feed cursor this service handed out (a list's feed_cursor, a page's next or a change's cursor)`,
    );
  return cursor;
}

/** A wait whose credential ended is answered as a request with that credential now is. */
function refuseRevoked(wait: Wait | null): void {
  if (wait?.revoked === true) throw new AppError(wait.credential?.refusal ?? 'invalid_secret_key');
}

function wantsEventStream(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  return accept.split(',').some((range) => range.split(';')[0]?.trim().toLowerCase() === 'text/event-stream');
}

/** One Server-Sent Event: `id:` the change's cursor (what a browser sends back as Last-Event-ID). */
function eventOf(change: StatusChange): string {
  const body = presentChange(change);
  return `id: ${body.cursor}\nevent: status\ndata: ${JSON.stringify(body)}\n\n`;
}

export async function statusFeedRoutes(app: App, opts: StatusFeedOptions): Promise<void> {
  const { feed, model } = opts;
  const limits: StatusFeedLimits = { ...DEFAULT_STATUS_FEED_LIMITS, ...opts.limits };
  const timers = opts.timers ?? REAL_FEED_TIMERS;
  const waits = new Waits(model, timers, limits, opts.now ?? Date.now);
  app.addHook('preClose', (done) => {
    waits.closeAll();
    done();
  });
  app.addHook('onClose', (_instance, done) => {
    waits.stop();
    done();
  });

  const errors = { 400: ProblemRef, 401: ProblemRef, 403: ProblemRef, 429: ProblemRef, 503: ProblemRef };
  const common = { tags: ['tenant'], security: opts.security ?? [{ secretKey: [] }] };

  app.get(
    '/statuses',
    {
      config: { scope: 'status:read' },
      schema: {
        ...common,
        operationId: 'listStatuses',
        summary: "The tenant's subscribers answered other than active, and where their changes continue (status:read)",
        querystring: StatusesQuery,
        response: { 200: StatusesPage, ...errors },
      },
    },
    async (req, reply) => {
      const tenant = tenantOf(req);
      const limit = limitOf(req.query.limit);
      let cursor: ListCursor | null = null;
      if (req.query.cursor !== undefined) {
        cursor = decodeListCursor(req.query.cursor);
        if (cursor === null)
          throw new AppError(
            'invalid_cursor',
            'cursor: is not a list cursor this service handed out (the next of a /statuses page)',
          );
      }
      // The space of the request's mode (the tenant's own, or its twin).
      const auth = model.tenantById(tenant.id);
      // The read model follows the store within moments; a tenant it does not hold (yet) is asked again.
      if (auth === null || auth.id !== tenant.id) throw new AppError('store_unavailable');
      const page = await feed.listStatuses(tenant.id, cursor, limit);
      reply.header('cache-control', 'no-store');
      return {
        data: page.entries.map(presentEntry),
        entitlements: auth.entitlements,
        next: page.next === null ? null : encodeListCursor(page.next),
        feed_cursor: encodeFeedCursor(page.feedCursor),
      };
    },
  );

  /**
   * The changes after `cursor`; when there are none, waits (up to `waitMs`) for the tenant's
   * next change and reads again. Answers the last position read, so that an empty page moves
   * the reader on too.
   */
  async function follow(
    tenantId: number,
    cursor: FeedCursor,
    limit: number,
    waitMs: number,
    wait: Wait,
  ): Promise<StatusChanges> {
    const deadline = timers.now() + waitMs;
    let position = cursor;
    for (;;) {
      const result = await feed.statusChangesAfter(tenantId, position, limit);
      if (result.expired || result.changes.length > 0) return result;
      position = result.next;
      const left = deadline - timers.now();
      if (left <= 0 || (await wait.next(Math.min(left, limits.safetyPollMs))) === 'closed') return result;
    }
  }

  /**
   * Server-Sent Events until the client leaves (or the app closes): every change as it comes,
   * a comment every `heartbeatMs`, carrying the position read last as the stream's id when it
   * moved, so that a browser that reconnects after a quiet hour resumes from there.
   */
  function stream(
    req: FastifyRequest,
    reply: FastifyReply,
    tenantId: number,
    first: StatusChanges & { expired: false },
    limit: number,
    wait: Wait,
  ): FastifyReply {
    const out = new PassThrough();
    let lastId: string | null = null;
    let position = first.next;
    /** Every byte this stream holds in the process: its own buffers, the response's and the socket's. */
    const queued = () => out.writableLength + out.readableLength + reply.raw.writableLength;
    const write = (text: string) => {
      if (out.destroyed || out.writableEnded || reply.raw.destroyed) return;
      out.write(text);
      // A client that does not read: its connection goes (it resumes from its last id), not our memory.
      const held = queued();
      if (held > limits.maxBufferedBytes) {
        req.log.warn(
          { queued_bytes: held, bound_bytes: limits.maxBufferedBytes },
          'status feed stream: its client reads too slowly; the stream is closed',
        );
        wait.close();
        reply.raw.destroy();
      }
    };
    const send = (changes: readonly StatusChange[]) => {
      for (const change of changes) write(eventOf(change));
      const last = changes.at(-1);
      if (last !== undefined) lastId = encodeFeedCursor(last.cursor);
    };
    let stopHeartbeat = () => {};
    const heartbeat = () => {
      stopHeartbeat = timers.after(limits.heartbeatMs, () => {
        const id = encodeFeedCursor(position);
        write(id === lastId ? ': keep-alive\n\n' : `: keep-alive\nid: ${id}\n\n`);
        lastId = id;
        heartbeat();
      });
    };
    // Fastify destroys the body stream when the response fails.
    out.on('close', () => wait.close());
    // The credential ended (or the app closes): nothing more is sent. What is sent ends the
    // response; a client that had not read it all loses the connection instead.
    wait.onEnd(() => {
      stopHeartbeat();
      if (!wait.revoked || out.destroyed) return;
      if (queued() === 0 && !out.writableEnded) out.end();
      else reply.raw.destroy();
    });
    const run = async () => {
      send(first.changes);
      let full = first.changes.length === limit;
      while (!wait.isClosed) {
        if (!full && (await wait.next(limits.safetyPollMs)) === 'closed') break;
        const result = await feed.statusChangesAfter(tenantId, position, limit);
        // Pruned past a live stream (it cannot be, short of a retention of minutes): its client reconnects and lists again.
        if (result.expired) break;
        send(result.changes);
        position = result.next;
        full = result.changes.length === limit;
      }
    };
    heartbeat();
    run()
      .catch((err: unknown) =>
        req.log.warn(
          { err: { message: (err as Error).message } },
          'status feed stream: reading the feed failed; the stream ends and its client resumes',
        ),
      )
      .finally(() => {
        stopHeartbeat();
        wait.close();
        if (!out.destroyed && !out.writableEnded) out.end();
      });
    // The headers and a first comment at once: the client knows the stream is open.
    out.write(': stream open\n\n');
    return reply
      .header('content-type', 'text/event-stream; charset=utf-8')
      .header('cache-control', 'no-store')
      .header('x-accel-buffering', 'no')
      .send(out);
  }

  app.get(
    '/status-changes',
    {
      // A long poll or a stream reads many times over up to 30 s (or for as long as the
      // client stays): each read is bounded, not the request.
      config: { scope: 'status:read', storeBound: 'call' },
      schema: {
        ...common,
        operationId: 'listStatusChanges',
        summary:
          "The changes of subscribers' answers after a cursor: at once, as a long poll (wait), or as Server-Sent Events (status:read)",
        querystring: StatusChangesQuery,
        headers: StatusChangesHeaders,
        response: {
          200: {
            description:
              'The changes after the cursor, or with Accept: text/event-stream the same changes as Server-Sent Events',
            content: {
              'application/json': { schema: StatusChangesPage },
              'text/event-stream': {
                schema: Type.String({
                  description:
                    'One event a change (id: its cursor, event: status, data: the change as in the JSON page), a comment every 15 s carrying the id of the position read last, until the client leaves',
                }),
              },
            },
          },
          410: ProblemRef,
          ...errors,
        },
      },
    },
    async (req, reply) => {
      const tenant = tenantOf(req);
      const limit = limitOf(req.query.limit);
      const events = wantsEventStream(req.headers.accept);
      const lastEventId = req.headers['last-event-id'];
      // A browser's EventSource reconnects to the same URL with the id of the last event it got: that one is later.
      const cursor =
        events && typeof lastEventId === 'string' && lastEventId !== ''
          ? feedCursorOf(lastEventId, 'Last-Event-ID')
          : feedCursorOf(req.query.after, 'after');
      const waitMs = events ? 0 : Number(req.query.wait ?? '0') * 1000;
      const wait = events || waitMs > 0 ? waits.take(tenant.id, events ? 'stream' : 'poll', req.credential) : null;
      refuseRevoked(wait);
      if (wait !== null) {
        // The client left: its wait ends (a long poll's answer then goes nowhere).
        reply.raw.on('close', () => wait.close());
        if (req.raw.socket?.destroyed === true) wait.close();
      }
      try {
        const result =
          wait !== null && waitMs > 0
            ? await follow(tenant.id, cursor, limit, waitMs, wait)
            : await feed.statusChangesAfter(tenant.id, cursor, limit);
        // Revoked, expired or signed out while it waited: answered as the request would be now.
        refuseRevoked(wait);
        if (result.expired) throw new AppError('cursor_expired');
        if (events && wait !== null) return stream(req, reply, tenant.id, result, limit, wait);
        reply.header('cache-control', 'no-store');
        return { data: result.changes.map(presentChange), next: encodeFeedCursor(result.next) };
      } catch (err) {
        wait?.close();
        throw err;
      } finally {
        if (!events) wait?.close();
      }
    },
  );
}
