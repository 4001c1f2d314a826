/**
 * The billing status of one customer, as an app shows it: a store with `subscribe` and
 * `getSnapshot` (what `useSyncExternalStore` takes), shared by `@dunwall/react` and
 * `@dunwall/react-native`. No React in here, and no DOM: the platform tells it when to ask
 * again (`refresh`, `returned`).
 *
 * Never a false gate: a better answer applies at once; a worse one only from a fresh answer
 * of the service, never from a persisted copy, a bootstrap older than the last fresh answer,
 * or a failure; and `lockout` only ever from a fresh answer (from anything else it is shown
 * as `warning`). A failed question keeps what was shown, never as a gate: fail open.
 */
import { askStatus } from '../../../client/src/index.js';
import type { DunwallError, Entitlements, StatusResult, SubscriberStatus } from '../../../client/src/index.js';
import { fetchBranding } from './view.js';
import type { Branding } from './view.js';

export type { DunwallError, Entitlements, SubscriberStatus };

/** Where the snapshot's status comes from. */
export type BillingSource = 'service' | 'persisted' | 'bootstrap' | 'fallback';

export interface BillingState {
  status: SubscriberStatus;
  /** While `warning`: when the lockout is scheduled (RFC 3339), else null. */
  lockoutAt: string | null;
  /** Stripe's page of the overdue invoice (needs the `hmac`), else null. */
  payUrl: string | null;
  /** The tenant's card update page, with a warning. */
  cardUpdateUrl: string | null;
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
  preview?: 'warning' | 'lockout' | null;
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
const STATUSES: readonly string[] = ['active', 'warning', 'lockout'];

const ACTIVE: BillingState = {
  status: 'active',
  lockoutAt: null,
  payUrl: null,
  cardUpdateUrl: null,
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
  const shown = status !== 'active';
  return {
    status,
    lockoutAt: status === 'warning' ? str(a.lockout_at) : null,
    payUrl: shown ? str(a.pay_url) : null,
    cardUpdateUrl: shown ? str(a.card_update_url) : null,
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
    return isObject(v) && typeof v.at === 'number' && STATUSES.includes(v.status as string) ? (v as unknown as BillingBootstrap & { at: number }) : null;
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

  const server: BillingState = !customer ? { ...ACTIVE, ready: true } : o.bootstrap ? stateOf(o.bootstrap, 'bootstrap', true) : ACTIVE;
  let state = server;
  /** The first question has been answered (or failed) in this page. */
  let asked = false;

  let branding = o.branding ?? null;
  let brandingAsked = branding !== null;
  const changed = () => {
    for (const l of [...listeners]) l();
  };
  const set = (next: BillingState) => {
    state = next;
    changed();
  };

  /** When what is shown was said (the bootstrap's time, or the copy's). */
  let shownAt: number | null = new Date(o.bootstrap?.at ?? NaN).getTime();
  if (shownAt !== shownAt) shownAt = null;

  /** A persisted copy: it may make things better than what is shown, never worse. */
  const usePersisted = (text: string | null) => {
    const copy = readCopy(text);
    if (!copy || asked) return;
    const candidate = stateOf(copy, 'persisted', state.ready);
    const [was, is] = [RANK[state.status], RANK[candidate.status]];
    // Not too old, never worse, and what is shown speaks while it is the newer (a bootstrap rendered after the copy).
    if (now() - copy.at > maxAgeMs || is > was || (shownAt !== null && shownAt >= copy.at)) return;
    shownAt = copy.at;
    set(candidate);
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
      // Never the pay link: it opens the customer's invoice to whoever holds it.
      void Promise.resolve(o.storage.setItem(key, JSON.stringify({ ...result, pay_url: undefined, source: undefined, at }))).catch(() => {});
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
    if (result.source === 'fallback') {
      // Kept as shown, never as a gate; nothing known at all: active.
      const kept = RANK[state.status] > RANK.warning ? 'warning' : state.status;
      set({ ...state, status: kept, ready: true, source: 'fallback', error: result.error });
    } else {
      set(stateOf(result, 'service', true));
      persist(result, now());
    }
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
      if (!running || !customer) return;
      if (state.status !== 'active') followUntil = now() + FOLLOW_FOR_MS;
      void refresh();
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
