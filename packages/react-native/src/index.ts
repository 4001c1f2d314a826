/**
 * @dunwall/react-native: a subscriber's billing enforcement status as a hook, and the banner
 * and gate as React Native components. React 18 or 19 and React Native 0.72 or later; nothing
 * else (AsyncStorage and NetInfo are the app's, given to the provider).
 */
export { DunwallProvider } from './provider.js';
export type { DunwallProviderProps, NetInfoLike } from './provider.js';
export { useBillingFetch, useBillingStatus, useEntitlement } from '../../react/src/provider.js';
export { BillingBanner, BillingGate } from './components.js';
export type {
  BillingBannerProps,
  BillingGateProps,
  BillingStyles,
  BillingView,
  BillingViewProps,
} from './components.js';
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
