/**
 * A dismissed banner stays hidden, per tenant and customer: for the browser session in a
 * browser (every tab: a session cookie, and sessionStorage; the snippet and `@dunwall/react`
 * share the key, so a banner dismissed in one is dismissed in the other), for the app's
 * session in React Native (memory: a new launch shows it again).
 */

/**
 * Tenant slugs and customer ids are [a-z0-9-] and [A-Za-z0-9_]: safe in a cookie name. A
 * notice's dismissal is its own (kind and month): dismissing it never hides a warning, and a
 * card expiring another month is told again.
 */
export function dismissKey(
  tenant: string,
  customer: string,
  notice?: { kind: string; expires: string } | null,
): string {
  return `dunwall_dismissed_${tenant}_${customer}${notice ? `_${notice.kind}_${notice.expires}` : ''}`.replace(
    /[^A-Za-z0-9_-]/g,
    '_',
  );
}

export interface Dismissals {
  has(key: string): boolean;
  add(key: string): void;
  /** Told when a banner is dismissed (for `useSyncExternalStore`). */
  subscribe(listener: () => void): () => void;
}

function dismissals(has: (key: string) => boolean, remember: (key: string) => void): Dismissals {
  const listeners = new Set<() => void>();
  return {
    has,
    add(key) {
      remember(key);
      for (const l of [...listeners]) l();
    },
    subscribe(l) {
      listeners.add(l);
      return () => listeners.delete(l);
    },
  };
}

/** The browser session's: a session cookie (no expiry), shared by every tab, and sessionStorage. */
export const sessionDismissals: Dismissals = /* @__PURE__ */ dismissals(
  (key) => {
    try {
      if (sessionStorage.getItem(key) === '1') return true;
    } catch {
      // Storage blocked (or none, server rendering): the cookie decides.
    }
    return typeof document !== 'undefined' && document.cookie.split('; ').includes(`${key}=1`);
  },
  (key) => {
    document.cookie = `${key}=1; path=/; SameSite=Lax`;
    try {
      sessionStorage.setItem(key, '1');
    } catch {
      // Storage blocked: the cookie remembers.
    }
  },
);

/** The app's session: memory. */
export function memoryDismissals(): Dismissals {
  const dismissed = new Set<string>();
  return dismissals(
    (key) => dismissed.has(key),
    (key) => void dismissed.add(key),
  );
}
