import { createHmac } from 'node:crypto';
import { Copy, STARTING, bootstrapEntitlementsOf, bootstrapOf, changesPageOf, listPageOf } from './copy.js';
import type { Answer, Footprint } from './copy.js';
import type {
  BootstrapAnswer,
  DunwallCopy,
  DunwallOptions,
  Identity,
  PageBootstrap,
  ReadyFailure,
  StatusAnswer,
} from './types.js';

/**
 * `createDunwall`: the tenant's non-active subscribers held in this process's memory, kept
 * true by following Dunwall's status feed (docs/feed.md), as a Kubernetes informer does:
 * list (`GET /v1/statuses`, page by page), then follow (`GET /v1/status-changes`, a long poll
 * from the list's `feed_cursor`, each page's `next` after that), applying every change in the
 * order given.
 *
 * - A `410 cursor_expired` (the changes after the cursor are no longer kept) or a refused
 *   cursor: list again into a new copy, swapped in whole once read; the old one answers
 *   meanwhile.
 * - Any other failure (the network, a timeout, a 5xx, an answer that is not the contract's):
 *   retried after a capped exponential backoff with jitter, from the same cursor, so that no
 *   change is skipped and none applied twice. A refused key (401, 403) is retried slowly.
 *   Nothing is thrown into the application: failures go to `onError`.
 * - Staleness: every answer of the service (an empty long poll too) is a sign of life. Past
 *   `staleAfterMs` without one, the copy never gates: a lockout is answered `warning`, every
 *   answer says `source: 'stale'` (docs/reference.md#the-lookup: it fails open).
 */

const DEFAULT_STALE_AFTER_MS = 60_000;
const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;
const DEFAULT_READY_TIMEOUT_MS = 10_000;
/** The longest a server-rendered page waits for Dunwall's answer (pageBootstrap). */
const DEFAULT_PAGE_TIMEOUT_MS = 1_500;
/** setTimeout's largest delay. */
const MAX_TIMER_MS = 2_147_483_647;
const MAX_CUSTOMER_ID_LENGTH = 255;
/** The longest long poll the service holds (docs/feed.md). */
const MAX_WAIT_S = 30;
/** Subscribers or changes a page: the service's maximum, so that a list is as few requests as can be. */
const PAGE_LIMIT = 1000;
const BACKOFF = { minMs: 500, maxMs: 30_000 };
/** A refused key is a deploy's mistake, not a passing failure: asked again this often. */
const REFUSED_KEY_RETRY_MS = 60_000;
/** A long poll answered empty sooner than this (or half its wait) did not wait. */
const EARLY_EMPTY_MS = 1000;
/** The longest Retry-After honoured (a 429 or a 503 asks for seconds). */
const MAX_RETRY_AFTER_MS = 300_000;
/** One answer's bytes, at most (a full page of 1,000 subscribers at the longest fields the copy takes is under 4 MB). */
const DEFAULT_MAX_ANSWER_BYTES = 8 * 1024 * 1024;
/** Subscribers the copy holds, at most (about 35 MB at 345 bytes each, a pay link and a lockout each). */
const DEFAULT_MAX_SUBSCRIBERS = 100_000;
/**
 * The copy's bytes, at most, per subscriber of `maxSubscribers` (estimated as copy.ts's
 * `weightOf` does): about 1.3 times the estimate of a subscriber with a Stripe pay link and a
 * scheduled lockout (about 400), so that only ids and links far longer than Dunwall's reach it.
 */
const BYTES_PER_SUBSCRIBER = 512;
/** A refusal's problem document, or one customer's answer to ask(), is read up to this (each is under 3 KB). */
const MAX_SMALL_ANSWER_BYTES = 64 * 1024;

/** Knobs the tests turn; not part of the public options. */
export interface Internals {
  pageLimit?: number;
  backoff?: { minMs: number; maxMs: number };
  refusedKeyRetryMs?: number;
  fetch?: typeof fetch;
}

/** A failure of one request to Dunwall, as `onError` gets it. */
export class DunwallFeedError extends Error {
  constructor(
    message: string,
    /** The HTTP status, when Dunwall answered. */
    readonly status: number | null = null,
    /** The problem's `code`, when Dunwall gave one. */
    readonly code: string | null = null,
    /** Seconds the answer asked to wait (Retry-After). */
    readonly retryAfterS: number | null = null,
    /** True when no answer came at all: the network, a refused connection, a timeout. */
    readonly unreachable = false,
  ) {
    super(message);
    this.name = 'DunwallFeedError';
  }
}

/** Why `ready()` gave up: `reason`, and Dunwall's HTTP status and problem code when it answered. */
export class DunwallReadyError extends Error {
  constructor(
    message: string,
    readonly reason: ReadyFailure,
    readonly status: number | null = null,
    readonly code: string | null = null,
  ) {
    super(message);
    this.name = 'DunwallReadyError';
  }
}

const isRefusal = (err: Error | null): err is DunwallFeedError =>
  err instanceof DunwallFeedError && (err.status === 401 || err.status === 403);

/** `ready()`'s rejection for the copy's last error (none: the list is only slow). */
function readyFailure(last: Error | null, base: string, timeoutMs: number | null): DunwallReadyError {
  if (isRefusal(last)) {
    return new DunwallReadyError(
      `Dunwall at ${base} refused the secret key (${last.status}${last.code === null ? '' : ` ${last.code}`}): check the key and its status:read scope. Everyone is let through until it is fixed; the copy asks again every minute`,
      'refused_key',
      last.status,
      last.code,
    );
  }
  const after = timeoutMs === null ? '' : ` within ${timeoutMs} ms`;
  if (last instanceof DunwallFeedError && last.unreachable)
    return new DunwallReadyError(
      `Dunwall at ${base} could not be reached${after} (${last.message}); the copy keeps trying`,
      'unreachable',
    );
  if (last instanceof DunwallFeedError)
    return new DunwallReadyError(
      `Dunwall at ${base} did not give the first list${after} (${last.message}); the copy keeps trying`,
      'unavailable',
      last.status,
      last.code,
    );
  return new DunwallReadyError(
    `Dunwall at ${base}: the first list did not complete${after}; the copy keeps trying`,
    'timeout',
  );
}

function positive(value: number | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0)
    throw new TypeError(`createDunwall: ${name} must be a positive number of milliseconds`);
  return value;
}

function whole(value: number | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0)
    throw new TypeError(`createDunwall: ${name} must be a positive whole number`);
  return value;
}

function baseOf(raw: unknown): string {
  if (typeof raw !== 'string') throw new TypeError('createDunwall: baseUrl must be the URL of the Dunwall service');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new TypeError('createDunwall: baseUrl must be an absolute http(s) URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new TypeError('createDunwall: baseUrl must be an absolute http(s) URL');
  if (url.search !== '' || url.hash !== '') throw new TypeError('createDunwall: baseUrl takes no query or fragment');
  return url.href.replace(/\/+$/, '');
}

function secretOf(raw: unknown): string {
  // Never echoed: a message names the key's kind at most.
  if (typeof raw !== 'string' || !/^sk_[A-Za-z0-9_]+$/.test(raw)) {
    throw new TypeError(
      'createDunwall: secretKey must be a secret key of the tenant (sk_live_... or sk_test_...), with status:read; a publishable key does not reach the status feed',
    );
  }
  return raw;
}

/**
 * The body of `res` as text, read as a stream up to `maxBytes`; null past it (a declared
 * Content-Length too, before reading a byte), the stream cancelled. The caller's signal and
 * timer bound the time it takes.
 */
async function boundedText(res: Response, maxBytes: number): Promise<string | null> {
  const body = res.body;
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > maxBytes) {
    await body?.cancel().catch(() => undefined);
    return null;
  }
  if (body === null) return '';
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => undefined);
      return null;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, total).toString('utf8');
}

/** Sleeps `ms` unless woken; the timer never keeps the process alive. */
class Pause {
  private timer: ReturnType<typeof setTimeout> | null = null;
  private wake: (() => void) | null = null;

  wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
      this.timer = setTimeout(() => this.end(), ms);
      this.timer.unref();
    });
  }

  end(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }
}

/** A list being read: kept across a failure, so that paging resumes where it stopped. */
interface Listing {
  copy: Copy;
  feedCursor: string;
  next: string | null;
  /** Pages read so far. */
  pages: number;
}

class Follower {
  /** The copy `status()` answers from; null until the first list has completed. */
  copy: Copy | null = null;
  /** When the service last answered (the `now` clock). */
  lastHeardMs = 0;
  readonly staleAfterMs: number;
  readonly now: () => number;

  private readonly base: string;
  private readonly headers: Record<string, string>;
  private readonly hmacSecret: string | null;
  private readonly requestTimeoutMs: number;
  private readonly maxAnswerBytes: number;
  private readonly maxSubscribers: number;
  /** A list of more pages than this is given up: twice what `maxSubscribers` fills, and ten more. */
  private readonly maxListPages: number;
  private readonly waitS: number;
  private readonly onError: ((err: Error) => void) | null;
  private readonly pageLimit: number;
  private readonly backoff: { minMs: number; maxMs: number };
  private readonly refusedKeyRetryMs: number;
  private readonly fetch: typeof fetch;

  private cursor: string | null = null;
  private listing: Listing | null = null;
  private closed = false;
  /** The request in flight, which close() aborts. */
  private inflight: AbortController | null = null;
  private readonly pause = new Pause();
  private readonly readyWaiters = new Set<{ resolve(): void; reject(err: Error): void }>();
  private lastError: Error | null = null;
  private running: Promise<void> = Promise.resolve();

  constructor(options: DunwallOptions, internals: Internals) {
    if (typeof options !== 'object' || options === null)
      throw new TypeError('createDunwall: options are required ({ baseUrl, secretKey })');
    this.base = baseOf(options.baseUrl);
    this.headers = {
      authorization: `Bearer ${secretOf(options.secretKey)}`,
      accept: 'application/json',
      'user-agent': 'dunwall-node',
    };
    this.staleAfterMs = positive(options.staleAfterMs, 'staleAfterMs', DEFAULT_STALE_AFTER_MS);
    this.requestTimeoutMs = positive(options.requestTimeoutMs, 'requestTimeoutMs', DEFAULT_REQUEST_TIMEOUT_MS);
    this.maxAnswerBytes = whole(options.maxAnswerBytes, 'maxAnswerBytes', DEFAULT_MAX_ANSWER_BYTES);
    this.maxSubscribers = whole(options.maxSubscribers, 'maxSubscribers', DEFAULT_MAX_SUBSCRIBERS);
    if (options.now !== undefined && typeof options.now !== 'function')
      throw new TypeError('createDunwall: now must be a function returning epoch milliseconds');
    this.now = options.now ?? Date.now;
    this.onError = typeof options.onError === 'function' ? options.onError : null;
    if (options.hmacSecret !== undefined && options.hmacSecret !== null && typeof options.hmacSecret !== 'string')
      throw new TypeError("createDunwall: hmacSecret must be the tenant's HMAC secret (a string)");
    this.hmacSecret = options.hmacSecret ? options.hmacSecret : null;
    // A healthy copy hears from the service at least twice within staleAfterMs.
    this.waitS = Math.max(1, Math.min(MAX_WAIT_S, Math.floor(this.staleAfterMs / 2000)));
    this.pageLimit = internals.pageLimit ?? PAGE_LIMIT;
    this.maxListPages = 2 * Math.ceil(this.maxSubscribers / this.pageLimit) + 10;
    this.backoff = internals.backoff ?? BACKOFF;
    this.refusedKeyRetryMs = internals.refusedKeyRetryMs ?? REFUSED_KEY_RETRY_MS;
    this.fetch = internals.fetch ?? ((input, init) => fetch(input, init));
  }

  start(): void {
    this.running = this.run().catch((err: unknown) => this.report(err instanceof Error ? err : new Error(String(err))));
  }

  ready(timeoutMs: number): Promise<void> {
    if (typeof timeoutMs !== 'number' || !(timeoutMs > 0))
      return Promise.reject(new TypeError('dunwall.ready(timeoutMs): a positive number of milliseconds'));
    if (this.copy !== null) return Promise.resolve();
    if (this.closed)
      return Promise.reject(new DunwallReadyError('Dunwall: closed before the first list completed', 'closed'));
    // A refused key is retried once a minute: waiting out the timeout would change nothing.
    if (isRefusal(this.lastError)) return Promise.reject(readyFailure(this.lastError, this.base, null));
    return new Promise((resolve, reject) => {
      const waiter = {
        resolve: () => {
          clearTimeout(timer);
          this.readyWaiters.delete(waiter);
          resolve();
        },
        reject: (err: Error) => {
          clearTimeout(timer);
          this.readyWaiters.delete(waiter);
          reject(err);
        },
      };
      // Not unref()ed: while ready() is pending, it keeps the process alive (the copy's own
      // timers do not), so that a top-level `await dunwall.ready()` settles instead of the
      // process ending with the promise unsettled.
      const timer = setTimeout(
        () => waiter.reject(readyFailure(this.lastError, this.base, timeoutMs)),
        Math.min(timeoutMs, MAX_TIMER_MS),
      );
      this.readyWaiters.add(waiter);
    });
  }

  async close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.inflight?.abort();
      this.pause.end();
      for (const waiter of [...this.readyWaiters])
        waiter.reject(new DunwallReadyError('Dunwall: closed before the first list completed', 'closed'));
    }
    await this.running;
  }

  private report(err: Error): void {
    this.lastError = err;
    if (this.copy === null && isRefusal(err))
      for (const waiter of [...this.readyWaiters]) waiter.reject(readyFailure(err, this.base, null));
    if (this.onError === null) return;
    try {
      this.onError(err);
    } catch {
      // A logger that throws must not stop the copy.
    }
  }

  private async run(): Promise<void> {
    let failures = 0;
    let relisted = false;
    let early = 0;
    while (!this.closed) {
      try {
        if (this.cursor === null) await this.list();
        else {
          // After a failure, the first question does not wait: a long poll would hold the
          // answer (and the copy's staleness) for up to its wait once the service is back.
          // A long poll answered empty long before its wait (a service shutting down, a proxy
          // that does not hold requests): asked again at once the first time, then paced as
          // failures are, so that the copy never spins on it.
          const waitS = failures > 0 ? 0 : this.waitS;
          const cameEarly = await this.follow(this.cursor, waitS);
          early = waitS > 0 && cameEarly ? early + 1 : 0;
          relisted = false;
          if (early > 1) await this.pause.wait(this.backoffMs(early - 1));
        }
        failures = 0;
      } catch (caught) {
        if (this.closed) return;
        const err =
          caught instanceof DunwallFeedError
            ? caught
            : new DunwallFeedError(`Dunwall: ${(caught as Error)?.message ?? String(caught)}`);
        this.report(err);
        if (err.code === 'cursor_expired' || err.code === 'invalid_cursor') {
          // List again, from the start (a list cursor refused too), into a new copy: at once,
          // unless the last list's cursor was refused before a single page of changes.
          this.cursor = null;
          this.listing = null;
          if (!relisted) {
            relisted = true;
            continue;
          }
        }
        failures += 1;
        await this.pause.wait(this.delayAfter(err, failures));
      }
    }
  }

  /** The `n`th (from 1) wait of a capped exponential backoff, with jitter: between half the step and the step. */
  private backoffMs(
    n: number,
    cap: number = Math.min(this.backoff.maxMs, this.backoff.minMs * 2 ** Math.min(n - 1, 30)),
  ): number {
    return cap / 2 + Math.random() * (cap / 2);
  }

  /** The backoff; slower for a refused key; at least what Retry-After asks. */
  private delayAfter(err: DunwallFeedError, failures: number): number {
    const refused = err.status === 401 || err.status === 403;
    const jittered = refused ? this.backoffMs(failures, this.refusedKeyRetryMs) : this.backoffMs(failures);
    const asked = err.retryAfterS === null ? 0 : Math.min(MAX_RETRY_AFTER_MS, err.retryAfterS * 1000);
    return Math.max(jittered, asked);
  }

  /** Lists every page into a new copy (resuming a listing a failure interrupted), then swaps it in. */
  private async list(): Promise<void> {
    for (;;) {
      const listing = this.listing;
      const query = `limit=${this.pageLimit}${listing === null ? '' : `&cursor=${encodeURIComponent(listing.next ?? '')}`}`;
      const body = await this.get('/v1/statuses', query, 0);
      const page = listPageOf(body);
      if (page === null)
        throw new DunwallFeedError('Dunwall: GET /v1/statuses answered a page that is not a status list');
      this.lastHeardMs = this.now();
      this.lastError = null;
      const current = listing ?? {
        copy: new Copy(page.entitlements),
        feedCursor: page.feedCursor,
        next: null,
        pages: 0,
      };
      current.pages += 1;
      // A list past the bounds is given up whole (the next attempt starts it again): the
      // copy in use, if any, stays as it was, and a partial list is never swapped in.
      const beyond = this.beyond(current.copy.after(page.entries));
      if (beyond !== null) {
        this.listing = null;
        throw new DunwallFeedError(
          `Dunwall: GET /v1/statuses listed ${beyond}; the list is given up and the copy stays as it was`,
        );
      }
      if (page.next !== null && current.pages >= this.maxListPages) {
        this.listing = null;
        throw new DunwallFeedError(
          `Dunwall: GET /v1/statuses gave ${current.pages} pages without an end (at most ${this.maxListPages} with maxSubscribers ${this.maxSubscribers}); the list is given up and the copy stays as it was`,
        );
      }
      for (const entry of page.entries) current.copy.apply(entry);
      current.next = page.next;
      this.listing = current;
      if (page.next !== null) continue;
      // Read whole: swapped in at once, and the feed followed from the first page's position.
      this.listing = null;
      this.copy = current.copy;
      this.cursor = current.feedCursor;
      for (const waiter of [...this.readyWaiters]) waiter.resolve();
      return;
    }
  }

  /** What a copy of `footprint` holds beyond its bounds, in words; null within them. */
  private beyond(footprint: Footprint): string | null {
    if (footprint.size > this.maxSubscribers) return `more than ${this.maxSubscribers} subscribers (maxSubscribers)`;
    const maxBytes = this.maxSubscribers * BYTES_PER_SUBSCRIBER;
    if (footprint.bytes > maxBytes)
      return `subscribers taking more than ${maxBytes} bytes (maxSubscribers x ${BYTES_PER_SUBSCRIBER}: their ids and links are too long)`;
    return null;
  }

  /**
   * One long poll from `cursor`: its changes applied in order, the cursor moved on (an empty
   * page moves it too). True when it came back empty long before its wait.
   */
  private async follow(cursor: string, waitS: number): Promise<boolean> {
    const startedMs = performance.now();
    const body = await this.get(
      '/v1/status-changes',
      `after=${encodeURIComponent(cursor)}&wait=${waitS}&limit=${this.pageLimit}`,
      waitS * 1000,
    );
    const page = changesPageOf(body);
    if (page === null)
      throw new DunwallFeedError('Dunwall: GET /v1/status-changes answered a page that is not a page of changes');
    const copy = this.copy;
    // Not applied at all, nor counted as a sign of life: asked again from the same cursor
    // after a backoff, the copy goes stale meanwhile (and then never gates).
    const beyond = copy === null ? null : this.beyond(copy.after(page.entries));
    if (beyond !== null)
      throw new DunwallFeedError(`Dunwall: GET /v1/status-changes would make the copy hold ${beyond}; not applied`);
    this.lastHeardMs = this.now();
    this.lastError = null;
    if (copy !== null) for (const entry of page.entries) copy.apply(entry);
    this.cursor = page.next;
    return page.entries.length === 0 && performance.now() - startedMs < Math.min(EARLY_EMPTY_MS, (waitS * 1000) / 2);
  }

  /** A GET of the service, bounded by requestTimeoutMs plus the long poll's wait, its JSON body parsed. */
  private async get(path: string, query: string, waitMs: number): Promise<unknown> {
    if (this.closed) throw new DunwallFeedError('Dunwall: closed');
    // One controller per request, aborted by its own timer or by close(), rather than
    // AbortSignal.any over a long-lived signal: on Node 20 a plain fetch loop doing that
    // retains about 60 bytes a request (measured), and this needs nothing newer than 20.0.
    const controller = new AbortController();
    const boundMs = this.requestTimeoutMs + waitMs;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, boundMs);
    timer.unref();
    this.inflight = controller;
    let res: Response | null = null;
    let text: string | null;
    try {
      res = await this.fetch(`${this.base}${path}?${query}`, {
        headers: this.headers,
        signal: controller.signal,
        redirect: 'error',
      });
      // The timer bounds the whole answer, its body too (a body that drips is cut).
      text = await boundedText(
        res,
        res.status === 200 ? this.maxAnswerBytes : Math.min(this.maxAnswerBytes, MAX_SMALL_ANSWER_BYTES),
      );
    } catch (err) {
      const cause = err as Error & { cause?: { code?: unknown; message?: unknown } };
      const inner = cause?.cause;
      const code =
        typeof inner?.code === 'string'
          ? ` (${inner.code})`
          : typeof inner?.message === 'string'
            ? ` (${inner.message.slice(0, 200)})`
            : '';
      const what = !timedOut
        ? `${cause?.message ?? String(err)}${code}`
        : res === null
          ? `no answer within ${boundMs} ms`
          : `the answer (${res.status}) was not whole within ${boundMs} ms`;
      throw new DunwallFeedError(`Dunwall: GET ${path} failed: ${what}`, null, null, null, true);
    } finally {
      clearTimeout(timer);
      // Whatever was not read of the answer is not waited for: its connection is ended.
      controller.abort();
      if (this.inflight === controller) this.inflight = null;
    }
    if (text === null && res.status === 200)
      throw new DunwallFeedError(
        `Dunwall: GET ${path} answered more than ${this.maxAnswerBytes} bytes (maxAnswerBytes); not read further, nothing of it applied`,
      );
    text ??= '';
    if (res.status !== 200) {
      let code: string | null = null;
      let detail = '';
      try {
        const problem = JSON.parse(text) as { code?: unknown; detail?: unknown };
        if (typeof problem.code === 'string') code = problem.code.slice(0, 100);
        if (typeof problem.detail === 'string') detail = `: ${problem.detail.slice(0, 300)}`;
      } catch {
        // Not a problem document (a proxy's page): the status says enough.
      }
      const retryAfter = Number(res.headers.get('retry-after') ?? NaN);
      const hint = res.status === 401 || res.status === 403 ? ' (check the secret key and its status:read scope)' : '';
      throw new DunwallFeedError(
        `Dunwall: GET ${path} answered ${res.status}${code === null ? '' : ` ${code}`}${detail}${hint}`,
        res.status,
        code,
        Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : null,
      );
    }
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new DunwallFeedError(`Dunwall: GET ${path} answered 200 with a body that is not JSON`);
    }
  }

  /** The customer id and its hmac; a value that is not a customer id is no one. */
  identity(customerId: unknown): Identity {
    if (typeof customerId !== 'string' || customerId.length === 0 || customerId.length > MAX_CUSTOMER_ID_LENGTH)
      return { customer: null, hmac: null };
    const hmac =
      this.hmacSecret === null ? null : createHmac('sha256', this.hmacSecret).update(customerId).digest('hex');
    return { customer: customerId, hmac };
  }

  /**
   * The customer's answer as Dunwall's lookup gives it to a secret key (`GET
   * /v1/subscribers/:id/status`: with `pay_url` and `card_update_url`), within `timeoutMs`;
   * null on any failure. Its own request: the long poll in flight is not touched.
   */
  async ask(customerId: string, timeoutMs: number): Promise<BootstrapAnswer | null> {
    if (this.closed) return null;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), Math.min(timeoutMs, MAX_TIMER_MS));
    timer.unref();
    try {
      const res = await this.fetch(`${this.base}/v1/subscribers/${encodeURIComponent(customerId)}/status`, {
        headers: this.headers,
        signal: controller.signal,
        redirect: 'error',
      });
      const text = await boundedText(res, Math.min(this.maxAnswerBytes, MAX_SMALL_ANSWER_BYTES));
      if (res.status !== 200) {
        this.report(new DunwallFeedError(`Dunwall: GET /v1/subscribers/:id/status answered ${res.status}`, res.status));
        return null;
      }
      if (text === null) {
        this.report(
          new DunwallFeedError(
            `Dunwall: GET /v1/subscribers/:id/status answered more than ${Math.min(this.maxAnswerBytes, MAX_SMALL_ANSWER_BYTES)} bytes; not read further`,
          ),
        );
        return null;
      }
      return bootstrapOf(JSON.parse(text) as unknown, this.now());
    } catch (err) {
      this.report(
        new DunwallFeedError(
          `Dunwall: GET /v1/subscribers/:id/status failed: ${controller.signal.aborted ? `no answer within ${timeoutMs} ms` : (err as Error)?.message}`,
          null,
          null,
          null,
          true,
        ),
      );
      return null;
    } finally {
      clearTimeout(timer);
      controller.abort();
    }
  }
}

/** A bootstrap from an answer of the copy (which knows no card update link). */
function fromCopy(answer: StatusAnswer, at: number): BootstrapAnswer {
  return {
    status: answer.status,
    lockout_at: answer.lockout_at,
    pay_url: answer.pay_url,
    card_update_url: null,
    entitlements: bootstrapEntitlementsOf(answer.entitlements),
    at,
  };
}

/** `createDunwall` (./dunwall.ts), with the knobs the tests turn. */
export function createDunwallWith(options: DunwallOptions, internals: Internals): DunwallCopy {
  const follower = new Follower(options, internals);
  follower.start();
  const { now, staleAfterMs } = follower;
  const status = (customerId: string): StatusAnswer => {
    const copy = follower.copy;
    if (copy === null) return STARTING;
    const held: Answer | undefined = copy.held.get(customerId);
    const t = now();
    if (t - follower.lastHeardMs > staleAfterMs) return held === undefined ? copy.activeStale : held.stale();
    return held === undefined ? copy.active : held.at(t);
  };
  return Object.freeze({
    status,
    ready(timeoutMs: number = DEFAULT_READY_TIMEOUT_MS): Promise<void> {
      return follower.ready(timeoutMs);
    },
    identity(customerId: string | null | undefined): Identity {
      return follower.identity(customerId);
    },
    async pageBootstrap(
      customerId: string | null | undefined,
      timeoutMs: number = DEFAULT_PAGE_TIMEOUT_MS,
    ): Promise<PageBootstrap> {
      const identity = follower.identity(customerId);
      if (identity.customer === null) return { ...identity, bootstrap: null };
      try {
        const bound = typeof timeoutMs === 'number' && timeoutMs > 0 ? timeoutMs : DEFAULT_PAGE_TIMEOUT_MS;
        const held = status(identity.customer);
        const fresh = held.source === 'feed';
        // A customer the copy vouches is active: no request (the usual page).
        if (fresh && held.status === 'active') return { ...identity, bootstrap: fromCopy(held, now()) };
        // Otherwise the lookup's own answer (with the tenant's card update link), or the copy's while fresh.
        const asked = await follower.ask(identity.customer, bound);
        return { ...identity, bootstrap: asked ?? (fresh ? fromCopy(status(identity.customer), now()) : null) };
      } catch {
        return { ...identity, bootstrap: null };
      }
    },
    close(): Promise<void> {
      return follower.close();
    },
  });
}
