/**
 * @dunwall/core: what the browser snippet, `@dunwall/react` and `@dunwall/react-native`
 * share, bundled into each (never published on its own). The status store (what an app
 * shows, never a false gate, fail open), the view of a status (banner, gate or nothing; its
 * texts, links, countdown, dismissal), and why an app shows nothing (said in the console).
 * The drawers (DOM, React, React Native) render a view; they decide none of it.
 *
 * Imported by this name only, never by a path into the folder (`npm run lint` checks it).
 */
export { createStatusStore, DEFAULT_MAX_AGE_MS, persistKey } from './status-store.js';
export type {
  BillingBootstrap,
  BillingSource,
  BillingState,
  DunwallError,
  Entitlements,
  PersistStorage,
  StatusStore,
  StatusStoreOptions,
  SubscriberStatus,
} from './status-store.js';
export {
  countdown,
  DEFAULT_COLORS,
  fetchBranding,
  gateLinks,
  LOOPBACK,
  noticeOf,
  payLinks,
  roleOf,
  safeUrl,
  shownFor,
  viewOf,
} from './view.js';
export type {
  BannerOptions,
  BillingView,
  Branding,
  Colors,
  GateOptions,
  Link,
  Notice,
  Role,
  Shown,
  ViewInput,
  ViewOptions,
  ViewState,
} from './view.js';
export { DEFAULT_TEXTS, FROM_BRANDING, localeChain, resolveText, textsFor } from './texts.js';
export type { Texts } from './texts.js';
export { holdPage } from './gate.js';
export type { GateParts } from './gate.js';
export { dismissKey, memoryDismissals, sessionDismissals } from './dismissal.js';
export type { Dismissals } from './dismissal.js';
export { explain, reachable, say } from './explain.js';
export { storeOptions } from './options.js';
export type { DunwallOptions } from './options.js';
