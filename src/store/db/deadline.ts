import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * How long a request may wait on the store in all (DUNWALL_STORE_REQUEST_TIMEOUT_MS): below
 * the 5 s within which a caller is promised an answer, 503 and Retry-After included, when
 * the database is frozen (every socket open, nothing answering) rather than down.
 */
export const DEFAULT_STORE_REQUEST_TIMEOUT_MS = 4_000;

/**
 * `request`: one deadline for every store call of the request, from the first call on (the
 * time its body took to arrive is not the store's). `call`: each call (a query, or a
 * transaction with everything in it) gets the whole bound from its own start, for a route
 * that makes many small calls in a row (a replay batch): a frozen store still ends it
 * within the bound of the call it froze in.
 */
export type StoreBoundMode = 'request' | 'call';

/** A store call that did not end within its request's bound: answered 503, like the store being down. */
export class StoreTimeoutError extends Error {
  readonly code = 'STORE_TIMEOUT';

  constructor() {
    super("the store did not answer within the request's bound");
    this.name = 'StoreTimeoutError';
  }
}

const clock = (): number => performance.now();

/** The bound of the store calls made on behalf of one request (or one transaction of it). */
export class StoreBound {
  private endMs: number | null;

  constructor(
    readonly timeoutMs: number,
    readonly mode: StoreBoundMode | 'fixed' = 'request',
    endMs: number | null = null,
  ) {
    this.endMs = endMs;
  }

  /** When a call starting at `nowMs` must have ended, on the monotonic clock. */
  endFor(nowMs: number): number {
    if (this.mode === 'call') return nowMs + this.timeoutMs;
    this.endMs ??= nowMs + this.timeoutMs;
    return this.endMs;
  }
}

const bounds = new AsyncLocalStorage<StoreBound>();

/** Runs `fn` (and everything it starts) with its store calls bounded by `bound`. */
export function withStoreBound<T>(bound: StoreBound, fn: () => T): T {
  return bounds.run(bound, fn);
}

/** Requests whose bound is held (`holdStoreBound`): while none is, the bounds' async context is off. */
let held = 0;

/**
 * Runs `fn` (and everything it starts) with its store calls bounded by `bound`, like
 * `withStoreBound`, until the returned function is called (once the request has answered).
 * The async context that carries a bound costs every async resource of the process (each
 * socket, request, timer and promise) once it is on, those of the requests that never touch
 * the store included; it is switched off again whenever no held request is left. A store
 * call made after its request released the bound (work the request does not wait for) keeps
 * only the store's own bounds.
 */
export function holdStoreBound(bound: StoreBound, fn: () => void): () => void {
  held++;
  let released = false;
  const release = (): void => {
    if (released) return;
    released = true;
    if (--held === 0) bounds.disable();
  };
  bounds.run(bound, fn);
  return release;
}

/**
 * Runs `fn` outside any request's bound: work a request sets off but does not wait for
 * (the read model's catch-up after a commit, the outbox's delivery) keeps the store's own
 * bounds, and never ends at the deadline of the request that happened to wake it.
 */
export function outsideRequestBounds<T>(fn: () => T): T {
  return bounds.exit(fn);
}

/** The end (monotonic ms) of a store call starting now, or null when no request bounds it. */
export function storeCallEnd(): number | null {
  return bounds.getStore()?.endFor(clock()) ?? null;
}

/** Milliseconds left until `endMs`; a call with none left fails at once, never sent. */
export function remainingMs(endMs: number): number {
  const left = Math.floor(endMs - clock());
  if (left <= 0) throw new StoreTimeoutError();
  return left;
}

/**
 * Runs `fn` (one transaction) with every call inside it bounded by the transaction's own
 * end: in `call` mode the queries of a transaction share its bound, not one each.
 */
export function withinEnd<T>(endMs: number, fn: () => Promise<T>): Promise<T> {
  const bound = bounds.getStore();
  return bounds.run(new StoreBound(bound?.timeoutMs ?? 0, 'fixed', endMs), fn);
}

/**
 * The app-level net under the driver's own timeouts: `work` or a StoreTimeoutError at
 * `endMs`, whichever comes first. A result that arrives too late is handed to `late` (a
 * connection to give back) and never to the caller.
 */
export function raceEnd<T>(work: Promise<T>, endMs: number, late?: (value: T) => void): Promise<T> {
  let left: number;
  try {
    left = remainingMs(endMs);
  } catch (err) {
    void work.then(late, () => {});
    return Promise.reject(err);
  }
  return new Promise<T>((resolve, reject) => {
    let settled = false;
    const timer = setTimeout(() => {
      settled = true;
      reject(new StoreTimeoutError());
    }, left);
    work.then(
      (value) => {
        if (settled) {
          late?.(value);
          return;
        }
        settled = true;
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}
