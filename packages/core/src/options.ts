/**
 * What an app tells `<DunwallProvider>`, in `@dunwall/react` and `@dunwall/react-native`
 * alike (each package adds only what is its own: the web's CSP nonce, the app's NetInfo), and
 * the status store's options that the provider derives from it.
 */
import type { PreviewStatus } from '../../client/src/index.js';
import type { Branding, Role } from './view.js';
import type { BillingBootstrap, PersistStorage, StatusStoreOptions } from './status-store.js';

export interface DunwallOptions {
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
  /** Where the last answer is kept; null: nowhere. */
  storage?: PersistStorage | null;
  /** A persisted answer older than this is not used. Default 24 h. */
  maxAgeMs?: number;
  /** A test tenant only: show the real banner or gate. */
  preview?: PreviewStatus | null;
  timeoutMs?: number;
  /** Logs every answer and decision in the console (never a key, hmac, customer id or pay link). */
  debug?: boolean;
  /**
   * Who reads: `billing_admin` (default) is shown the ways to pay; `member`, the branding's
   * member texts and no pay or card link (any other value is taken as `member`). Display only.
   */
  role?: Role | null;
}

/**
 * The store's options for a provider's: `platformStorage` when the app gave no `storage`
 * (undefined; null is nowhere), and `reachable`, whether the service answers at all once a
 * question failed (the web's; an app has no CORS).
 */
export function storeOptions(
  o: DunwallOptions,
  platformStorage: () => PersistStorage | null,
  reachable: StatusStoreOptions['reachable'],
): StatusStoreOptions {
  return {
    baseUrl: o.baseUrl,
    tenant: o.tenant,
    publishableKey: o.publishableKey,
    customer: o.customer,
    hmac: o.hmac ?? null,
    preview: o.preview ?? null,
    bootstrap: o.bootstrap ?? null,
    branding: o.branding ?? null,
    storage: o.storage === undefined ? platformStorage() : o.storage,
    maxAgeMs: o.maxAgeMs,
    timeoutMs: o.timeoutMs,
    debug: o.debug,
    reachable,
  };
}
