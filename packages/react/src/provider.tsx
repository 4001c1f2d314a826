/**
 * `<DunwallProvider>` holds one customer's billing status for the components under it, and
 * `useBillingStatus()` / `useEntitlement()` read it. Built on `useSyncExternalStore`: the
 * server renders the bootstrap (or active), hydration starts from exactly that, and the page
 * then moves on to the persisted copy and the service's answer, never worse than a fresh
 * answer allows (`@dunwall/core`'s status store). `useBillingFetch()` is `fetch` for the app's own API:
 * its 402 `billing_lockout` problem gates too.
 */
import { createContext, createElement, useContext, useEffect, useMemo, useRef, useSyncExternalStore } from 'react';
import type { ReactNode } from 'react';
import { createStatusStore, reachable, roleOf, storeOptions } from '@dunwall/core';
import type { BillingState, Branding, DunwallOptions, PersistStorage, Role, StatusStore } from '@dunwall/core';

export interface DunwallProviderProps extends DunwallOptions {
  /** Where the last answer is kept (default: localStorage); null: nowhere. */
  storage?: PersistStorage | null;
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
  /** Who reads (the provider's `role`): a member is shown no pay or card link. */
  role: Role;
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

/**
 * The provider, for a platform: its storage, what tells it the customer is back, and (the
 * web's) whether the service answers at all when a question fails (a refused origin).
 */
export function makeProvider(
  platformStorage: () => PersistStorage | null,
  watch: PlatformWatch,
  probe: ((url: string) => Promise<boolean>) | null,
) {
  return function DunwallProvider(
    props: DunwallOptions & { nonce?: string; children?: ReactNode; watch?: PlatformWatch },
  ) {
    const { baseUrl, tenant, publishableKey, customer, hmac, preview, maxAgeMs, timeoutMs, debug, role } = props;
    // The bootstrap, branding and storage of the render that made the store: an inline object
    // given again on every render must not make a new store.
    const latest = useRef(props);
    latest.current = props;
    const store = useMemo(
      () => createStatusStore(storeOptions(latest.current, platformStorage, probe)),
      [baseUrl, tenant, publishableKey, customer, hmac, preview, maxAgeMs, timeoutMs, debug],
    );
    // The role is display only: another role draws the same answer differently, never asks again.
    const value = useMemo<DunwallContext>(
      () => ({ store, tenant, customer: customer || null, nonce: latest.current.nonce, role: roleOf(role, tenant) }),
      [store, role],
    );
    const platform = props.watch ?? watch;
    useEffect(() => {
      const stop = store.start();
      const unwatch = platform(() => store.returned());
      return () => {
        unwatch();
        stop();
      };
    }, [store, platform]);
    return createElement(Context.Provider, { value }, props.children);
  };
}

export const DunwallProvider = makeProvider(defaultStorage, watchWindow, reachable);

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

/**
 * `fetch` for the app's own API: every call passes through unchanged, and a `402` with the
 * `billing_lockout` problem (`application/problem+json`, as `@dunwall/node`'s middleware
 * refuses) gates at once, with the problem's `pay_url`. Outside a provider: plain `fetch`.
 */
export function useBillingFetch(): typeof fetch {
  const store = useContext(Context)?.store;
  return useMemo(
    () =>
      async (...args: Parameters<typeof fetch>) => {
        const res = await fetch(...args);
        if (store && res.status === 402 && /^application\/problem\+json/i.test(res.headers.get('content-type') ?? '')) {
          // A copy of the body, read apart: the app gets its response as it came, at once.
          res
            .clone()
            .json()
            .then(store.refused, () => {});
        }
        return res;
      },
    [store],
  );
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
