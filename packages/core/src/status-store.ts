/**
 * The billing status of one customer, as an app shows it: a store with `subscribe` and
 * `getSnapshot` (what `useSyncExternalStore` takes), shared by `@dunwall/react` and
 * `@dunwall/react-native`. No React in here, and no DOM: the platform tells it when to ask
 * again (`refresh`, `returned`).
 *
 * Never a false gate: `lockout` only ever from a fresh answer (the service's, or the tenant's
 * own API refusing with its 402 `billing_lockout` problem); from anything else it is shown
 * as `warning`. A persisted copy may show its warning before any answer (a reload with the
 * lookup failing keeps the banner), but never after a fresh answer, and never worse than a
 * newer bootstrap. A failed question keeps what was shown, never as a gate: fail open.
 */
import { askStatus, STATUSES } from '../../client/src/index.js';
import type {
  DunwallError,
  Entitlements,
  PreviewStatus,
  StatusResult,
  SubscriberStatus,
} from '../../client/src/index.js';
import { explain, say } from './explain.js';
import { fetchBranding, noticeOf } from './view.js';
import type { Branding, Notice } from './view.js';

export type { DunwallError, Entitlements, SubscriberStatus };

/** Where the snapshot's status comes from; `api`: the tenant's own API refused with its 402 `billing_lockout` problem. */
export type BillingSource = 'service' | 'api' | 'persisted' | 'bootstrap' | 'fallback';

export interface BillingState {
  status: SubscriberStatus;
  /** While `warning` (or a lockout from the tenant's API): when the lockout is scheduled (RFC 3339), else null. */
  lockoutAt: string | null;
  /** Stripe's page of the overdue invoice (needs the `hmac`), else null. */
  payUrl: string | null;
  /** The tenant's card update page, with a warning or a notice. */
  cardUpdateUrl: string | null;
  /** With `active`: what the service tells ahead of a failure (a card expiring), shown as a soft banner; else null. */
  notice: Notice | null;
  /** The tenant tier's flags; null until some answer named them. */
  entitlements: Entitlements | null;
  /** An answer of the service, or its failure, has come (or a bootstrap was given). */
  ready: boolean;
  source: BillingSource;
  /** Why the last question failed, while the snapshot is a fallback. */
  error: DunwallError | null;
}

/** A lookup's answer as the tenant's server got it, given to the page that it renders. */
export interface BillingBootstrap {
  status: SubscriberStatus;
  lockout_at?: string | null;
  pay_url?: string | null;
  card_update_url?: string | null;
  entitlements?: Entitlements | null;
  notice?: Notice | null;
  /** When the server asked (epoch ms or RFC 3339): a bootstrap older than the page's last fresh answer never makes it worse. */
  at?: number | string;
}

/** localStorage, sessionStorage, AsyncStorage, or anything with these three methods. */
export interface PersistStorage {
  getItem(key: string): string | null | Promise<string | null>;
  setItem(key: string, value: string): void | Promise<void>;
  removeItem(key: string): void | Promise<void>;
}

export interface StatusStoreOptions {
  /** The Dunwall service, e.g. `https://dunwall.example.com`. */
  baseUrl: string;
  tenant: string;
  publishableKey: string;
  /** The signed-in customer (`cus_...`); none: nothing to ask, everyone is active. */
  customer: string | null | undefined;
  /** Hex HMAC-SHA256 of the customer id, from the tenant's backend (gives `pay_url`). */
  hmac?: string | null;
  /** A test tenant only: show the real banner or gate without a failing card. Never persisted. */
  preview?: PreviewStatus | null;
  bootstrap?: BillingBootstrap | null;
  /** The tenant's branding, when the app has it already. */
  branding?: Branding | null;
  /** Where the last answer is kept between loads; null: nowhere. */
  storage?: PersistStorage | null;
  /** A persisted answer older than this is not used. Default 24 h. */
  maxAgeMs?: number;
  /** Default 3000. */
  timeoutMs?: number;
  fetch?: typeof fetch;
  /** Logs every answer and decision in the console (never a key, hmac, customer id or pay link). */
  debug?: boolean;
  /** Whether the service answers at all, CORS aside (the web's: after a network error, is it the origin?). */
  reachable?: ((url: string) => Promise<boolean>) | null;
  now?: () => number;
  /** Timers, for tests. */
  setTimeout?: (fn: () => void, ms: number) => unknown;
  clearTimeout?: (handle: unknown) => void;
}

export interface StatusStore {
  subscribe(listener: () => void): () => void;
  getSnapshot(): BillingState;
  /** What a server renders, and what hydration starts from: the bootstrap, or active. */
  getServerSnapshot(): BillingState;
  /** Asks the service now (at most one question at a time, one a second). */
  refresh(): Promise<void>;
  /** The customer is back (focus, foreground, online): asks again, and follows a warning or gate for a while. */
  returned(): void;
  /** The tenant's own API refused a request (402): its problem; a `billing_lockout` gates. */
  refused(problem: unknown): void;
  /** Starts asking: the first question, then at `lockout_at`. Returns the stop. */
  start(): () => void;
  /** The tenant's branding once asked for (`loadBranding`, when something is to be shown); null before. */
  getBranding(): Branding | null;
  loadBranding(): void;
}

export const DEFAULT_MAX_AGE_MS = 24 * 3_600_000;
const RANK: Readonly<Record<SubscriberStatus, number>> = { active: 0, warning: 1, lockout: 2 };
const RETURN_GAP_MS = 1_000;
const FOLLOW_EVERY_MS = 2_000;
const FOLLOW_FOR_MS = 30_000;
/** setTimeout's largest delay; a later lockout is armed again when this one fires. */
const MAX_TIMER_MS = 2_147_483_647;

const ACTIVE: BillingState = {
  status: 'active',
  lockoutAt: null,
  payUrl: null,
  cardUpdateUrl: null,
  notice: null,
  entitlements: null,
  ready: false,
  source: 'fallback',
  error: null,
};

/** The key of a customer's persisted answer. */
export function persistKey(tenant: string, customer: string): string {
  return `dunwall:v1:${tenant}:${customer}`;
}

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

/** An answer as a state; `lockout` from anything but a fresh answer is shown as `warning`. */
function stateOf(a: BillingBootstrap, source: BillingSource, ready: boolean): BillingState {
  const status = source !== 'service' && a.status === 'lockout' ? 'warning' : a.status;
  const notice = status === 'active' ? noticeOf(a.notice) : null;
  const shown = status !== 'active';
  return {
    status,
    lockoutAt: status === 'warning' ? str(a.lockout_at) : null,
    payUrl: shown ? str(a.pay_url) : null,
    cardUpdateUrl: shown || notice ? str(a.card_update_url) : null,
    notice,
    entitlements: isObject(a.entitlements) ? a.entitlements : null,
    ready,
    source,
    error: null,
  };
}

/** A persisted copy, strictly read: anything else is no copy. */
function readCopy(text: string | null): (BillingBootstrap & { at: number }) | null {
  try {
    const v: unknown = JSON.parse(text ?? '');
    return isObject(v) && typeof v.at === 'number' && (STATUSES as readonly string[]).includes(v.status as string)
      ? (v as unknown as BillingBootstrap & { at: number })
      : null;
  } catch {
    return null;
  }
}

export function createStatusStore(o: StatusStoreOptions): StatusStore {
  const now = o.now ?? Date.now;
  const later = o.setTimeout ?? ((fn: () => void, ms: number) => setTimeout(fn, ms));
  const cancel = o.clearTimeout ?? ((h: unknown) => clearTimeout(h as ReturnType<typeof setTimeout>));
  const maxAgeMs = o.maxAgeMs ?? DEFAULT_MAX_AGE_MS;
  const customer = o.customer || null;
  const key = customer ? persistKey(o.tenant, customer) : null;
  const listeners = new Set<() => void>();

  const server: BillingState = !customer
    ? { ...ACTIVE, ready: true }
    : o.bootstrap
      ? stateOf(o.bootstrap, 'bootstrap', true)
      : ACTIVE;
  let state = server;
  /** The first question has been answered (or failed) in this page. */
  let asked = false;
  /** A fresh answer has come (the service's, or the tenant's API's 402): no copy speaks after it. */
  let fresh = false;
  /** When the tenant's API refused: an answer to a question asked before does not undo it. */
  let refusedAt = -Infinity;
  const debug = (...line: unknown[]) => o.debug && console.info('[dunwall]', ...line.filter((x) => x !== undefined));
  const probe = o.reachable;

  let branding = o.branding ?? null;
  let brandingAsked = branding !== null;
  const changed = () => {
    for (const l of [...listeners]) l();
  };
  const set = (next: BillingState) => {
    state = next;
    debug(next.status, next.source, next.error?.message);
    changed();
  };
  // A secret key in an app's code is public: said at once (the service refuses it from a browser, not from an app).
  if (o.publishableKey.startsWith('sk_')) say('secret_key_in_browser', o.tenant);

  /** When what is shown was said (the bootstrap's time, or the copy's). */
  let shownAt: number | null = new Date(o.bootstrap?.at ?? NaN).getTime();
  if (shownAt !== shownAt) shownAt = null;

  /**
   * A persisted copy (a lockout in it shown as a warning): shown until a fresh answer comes, or
   * kept after a failed question (the reload with the lookup failing keeps its banner). Never
   * after a fresh answer, never too old, and never over a newer bootstrap, nor worse than one.
   */
  const usePersisted = (text: string | null) => {
    const copy = readCopy(text);
    if (!copy || fresh) return;
    const candidate = stateOf(copy, 'persisted', state.ready);
    if (
      now() - copy.at > maxAgeMs ||
      (shownAt !== null && (shownAt >= copy.at || RANK[candidate.status] > RANK[state.status]))
    )
      return debug('copy unused');
    shownAt = copy.at;
    // Read after a failed question: the failure's source and error stay.
    set(asked ? { ...candidate, source: state.source, error: state.error } : candidate);
  };

  // The persisted copy: at once when the storage answers at once (localStorage).
  if (key && o.storage && !o.preview) {
    try {
      const got = o.storage.getItem(key);
      if (typeof got === 'string' || got === null) usePersisted(got);
      else void Promise.resolve(got).then(usePersisted, () => {});
    } catch {
      // Storage refused (private mode, a full quota): no copy.
    }
  }

  const persist = (result: StatusResult, at: number) => {
    if (!key || !o.storage || o.preview) return;
    try {
      // Never the pay link, nor the card link: one opens the customer's invoice, the other (a
      // Dunwall card link) a portal session on the customer's card, to whoever holds it.
      void Promise.resolve(
        o.storage.setItem(
          key,
          JSON.stringify({ ...result, pay_url: undefined, card_update_url: undefined, source: undefined, at }),
        ),
      ).catch(() => {});
    } catch {
      // A full or refused storage: the copy is only a convenience.
    }
  };

  let inFlight: Promise<void> | null = null;
  let askedAtMs = -Infinity;
  let again: unknown;
  let wake: unknown;
  let followUntil = 0;
  let running = false;

  const arm = () => {
    cancel(wake);
    wake = undefined;
    if (!running || state.status !== 'warning' || !state.lockoutAt || state.source !== 'service') return;
    const left = Date.parse(state.lockoutAt) - now();
    if (Number.isNaN(left)) return;
    // At the lockout the service answers `lockout` from that instant: ask it then.
    wake = later(() => (left > MAX_TIMER_MS ? arm() : void refresh()), Math.max(0, Math.min(left, MAX_TIMER_MS)));
  };

  const ask = async () => {
    const askedAt = now();
    const fetchImpl = o.fetch ?? (typeof fetch === 'function' ? fetch : null);
    const result = await askStatus(
      {
        baseUrl: o.baseUrl,
        tenant: o.tenant,
        publishableKey: o.publishableKey,
        customerId: customer ?? '',
        hmac: o.hmac ?? null,
        preview: o.preview ?? null,
        timeoutMs: o.timeoutMs,
      },
      fetchImpl ?? (() => Promise.reject(new Error('fetch is not available'))),
    );
    asked = true;
    // The tenant's API refused after this question was asked: its lockout stands.
    const before = askedAt < refusedAt;
    if (result.source === 'fallback') {
      void explain(
        result.error,
        o.tenant,
        probe ? () => probe(`${o.baseUrl.replace(/\/+$/, '')}/snippet.js`) : undefined,
      );
      // Kept as shown, never as a gate; nothing known at all: active.
      const kept = RANK[state.status] > RANK.warning ? 'warning' : state.status;
      if (!before) set({ ...state, status: kept, ready: true, source: 'fallback', error: result.error });
    } else {
      fresh = true;
      if (!before) set(stateOf(result, 'service', true));
      persist(result, now());
    }
    if (before) debug(result.status, result.source, 'asked before the 402: unused');
    arm();
    if (running && state.status !== 'active' && now() < followUntil) {
      cancel(again);
      again = later(() => void refresh(), FOLLOW_EVERY_MS);
    }
  };

  let pending: Promise<void> | null = null;
  function refresh(): Promise<void> {
    if (!customer) return Promise.resolve();
    if (inFlight) return inFlight;
    const wait = askedAtMs + RETURN_GAP_MS - now();
    // A second question within the second (focus and visibility together): asked once it ends, never dropped.
    if (wait > 0)
      return (pending ??= new Promise((resolve) => {
        later(() => {
          pending = null;
          void (running ? refresh() : Promise.resolve()).then(resolve);
        }, wait);
      }));
    askedAtMs = now();
    return (inFlight = ask().finally(() => (inFlight = null)));
  }

  return {
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    getSnapshot: () => state,
    getServerSnapshot: () => server,
    getBranding: () => branding,
    loadBranding() {
      if (brandingAsked) return;
      brandingAsked = true;
      void fetchBranding(o.baseUrl, o.tenant, o.fetch).then((b) => {
        branding = b;
        changed();
      });
    },
    refresh,
    returned() {
      if (!running) return;
      // Nobody to ask about: the API's lockout ends on return (its next refusal says it again).
      if (!customer) return state.source === 'api' ? set(server) : undefined;
      if (state.status !== 'active') followUntil = now() + FOLLOW_FOR_MS;
      void refresh();
    },
    refused(problem) {
      if (!isObject(problem) || problem.code !== 'billing_lockout') return;
      fresh = true;
      refusedAt = now();
      // A fresh answer, never persisted: the gate, with the problem's way to pay.
      set({
        ...state,
        status: 'lockout',
        lockoutAt: str(problem.lockout_at),
        payUrl: str(problem.pay_url),
        ready: true,
        source: 'api',
        error: null,
      });
      arm();
    },
    start() {
      running = true;
      void refresh();
      return () => {
        running = false;
        cancel(again);
        cancel(wake);
      };
    },
  };
}
