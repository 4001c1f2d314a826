/**
 * `<DunwallProvider>` holds one customer's billing status for the components under it, and
 * `useBillingStatus()` / `useEntitlement()` read it. Built on `useSyncExternalStore`: the
 * server renders the bootstrap (or active), hydration starts from exactly that, and the page
 * then moves on to the persisted copy and the service's answer, never worse than a fresh
 * answer allows (`core/status-store.ts`).
 */
import { createContext, createElement, useContext, useEffect, useMemo, useRef, useSyncExternalStore } from 'react';
import type { ReactNode } from 'react';
import { createStatusStore } from './core/status-store.js';
import type { BillingBootstrap, BillingState, PersistStorage, StatusStore } from './core/status-store.js';
import type { Branding } from './core/view.js';

export interface DunwallProviderProps {
  /** The Dunwall service, e.g. `https://dunwall.example.com`. */
  baseUrl: string;
  tenant: string;
  publishableKey: string;
  /** The signed-in customer's Stripe id (`cus_...`); none: nothing is asked, nothing shown. */
  customer: string | null | undefined;
  /** Hex HMAC-SHA256 of the customer id, computed by your backend: gives the "Pay now" link. */
  hmac?: string | null;
  /** The answer your server got while rendering the page (no flash, no mismatch). */
  bootstrap?: BillingBootstrap | null;
  /** The tenant's branding, when your server has it (texts without a second request). */
  branding?: Branding | null;
  /** Where the last answer is kept (default: localStorage); null: nowhere. */
  storage?: PersistStorage | null;
  /** A persisted answer older than this is not used. Default 24 h. */
  maxAgeMs?: number;
  /** A test tenant only: show the real banner or gate. */
  preview?: 'warning' | 'lockout' | null;
  timeoutMs?: number;
  /** A CSP nonce for the components' one `<style>` element. */
  nonce?: string;
  children?: ReactNode;
}

/** What the components need beside the status: the store, who, and the style's nonce. */
export interface DunwallContext {
  store: StatusStore;
  tenant: string;
  customer: string | null;
  nonce: string | undefined;
}

const Context = createContext<DunwallContext | null>(null);

function defaultStorage(): PersistStorage | null {
  try {
    return typeof window !== 'undefined' ? window.localStorage : null;
  } catch {
    // Storage blocked (a sandboxed frame): no copy.
    return null;
  }
}

export type PlatformWatch = (returned: () => void) => () => void;

/** The web's returns: focus, the tab back in view, and the network back. */
const watchWindow: PlatformWatch = (returned) => {
  if (typeof window === 'undefined') return () => {};
  const listening = new AbortController();
  const { signal } = listening;
  window.addEventListener('focus', returned, { signal });
  window.addEventListener('online', returned, { signal });
  document.addEventListener('visibilitychange', () => document.visibilityState === 'visible' && returned(), { signal });
  return () => listening.abort();
};

/** The provider, for a platform: its storage and what tells it the customer is back. */
export function makeProvider(platformStorage: () => PersistStorage | null, watch: PlatformWatch) {
  return function DunwallProvider(props: DunwallProviderProps & { watch?: PlatformWatch }) {
    const { baseUrl, tenant, publishableKey, customer, hmac, preview, maxAgeMs, timeoutMs } = props;
    // The bootstrap, branding and storage of the render that made the store: an inline object
    // given again on every render must not make a new store.
    const latest = useRef(props);
    latest.current = props;
    const value = useMemo<DunwallContext>(() => {
      const p = latest.current;
      const store = createStatusStore({
        baseUrl,
        tenant,
        publishableKey,
        customer,
        hmac: hmac ?? null,
        preview: preview ?? null,
        bootstrap: p.bootstrap ?? null,
        branding: p.branding ?? null,
        storage: p.storage === undefined ? platformStorage() : p.storage,
        maxAgeMs,
        timeoutMs,
      });
      return { store, tenant, customer: customer || null, nonce: p.nonce };
    }, [baseUrl, tenant, publishableKey, customer, hmac, preview, maxAgeMs, timeoutMs]);
    const platform = props.watch ?? watch;
    useEffect(() => {
      const stop = value.store.start();
      const unwatch = platform(() => value.store.returned());
      return () => {
        unwatch();
        stop();
      };
    }, [value, platform]);
    return createElement(Context.Provider, { value }, props.children);
  };
}

export const DunwallProvider = makeProvider(defaultStorage, watchWindow);

/** The provider's context; a clear error outside one. */
export function useDunwallContext(): DunwallContext {
  const context = useContext(Context);
  if (!context) throw new Error('Dunwall: no <DunwallProvider> above');
  return context;
}

/** The customer's billing status: `{status, lockoutAt, payUrl, entitlements, ready, source, error}`. */
export function useBillingStatus(): BillingState {
  const { store } = useDunwallContext();
  return useSyncExternalStore(store.subscribe, store.getSnapshot, store.getServerSnapshot);
}

/** One entitlement flag of the tenant's tier; `fallback` until an answer names it. */
export function useEntitlement(flag: string, fallback = false): boolean {
  const { entitlements } = useBillingStatus();
  const value = entitlements?.[flag];
  return typeof value === 'boolean' ? value : fallback;
}

const noSubscribe = () => () => {};

/** The branding once asked for (while something is shown); null before. */
export function useBranding(active: boolean): Branding | null {
  const { store } = useDunwallContext();
  useEffect(() => {
    if (active) store.loadBranding();
  }, [active, store]);
  return useSyncExternalStore(store.subscribe, store.getBranding, store.getBranding);
}

/** The reader's languages: `own`, else `en` on the server and through hydration, then the browser's. */
export function useLanguages(own: string | readonly string[] | undefined): readonly string[] {
  const fixed = own === undefined ? null : typeof own === 'string' ? own : own.join(',');
  const joined = useSyncExternalStore(
    noSubscribe,
    () => fixed ?? ((typeof navigator !== 'undefined' && navigator.languages?.join(',')) || 'en'),
    () => fixed ?? 'en',
  );
  return useMemo(() => joined.split(','), [joined]);
}
