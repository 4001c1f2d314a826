/**
 * @dunwall/react: a subscriber's billing enforcement status as a hook, and the banner and
 * gate as components. React 18 or 19; nothing else.
 */
export { DunwallProvider, useBillingFetch, useBillingStatus, useEntitlement } from './provider.js';
export type { DunwallProviderProps } from './provider.js';
export { BillingBanner, BillingGate } from './components.js';
export type { BillingBannerProps, BillingGateProps, BillingView, BillingViewProps } from './components.js';
export type {
  BillingBootstrap,
  BillingSource,
  BillingState,
  Branding,
  Colors,
  DunwallError,
  Entitlements,
  Link,
  Notice,
  PersistStorage,
  Role,
  SubscriberStatus,
  Texts,
} from '@dunwall/core';
