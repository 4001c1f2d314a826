/**
 * `<DunwallProvider>` for React Native: the hooks of `@dunwall/react` over the status store
 * of `@dunwall/core` (never a false gate), with the app's own return signals. The customer is
 * back when the app comes to the foreground (`AppState` becomes `active`) and, given
 * `netInfo`, when the device is online again: then the service is asked again, and a
 * warning or a gate is followed for a while (the customer may have just paid).
 */
import { createElement, useMemo } from 'react';
import type { ReactNode } from 'react';
import { AppState } from 'react-native';
import type { AppStateStatus } from 'react-native';
import type { DunwallOptions, PersistStorage } from '@dunwall/core';
import { makeProvider } from '../../react/src/provider.js';
import type { PlatformWatch } from '../../react/src/provider.js';

/** What `@react-native-community/netinfo`'s default export offers, as far as it is used. */
export interface NetInfoLike {
  addEventListener(listener: (state: { isConnected: boolean | null }) => void): () => void;
}

export interface DunwallProviderProps extends DunwallOptions {
  /**
   * Where the last answer is kept between launches: `AsyncStorage`, or any object whose
   * `getItem`, `setItem` and `removeItem` return promises. Default: nowhere (null).
   */
  storage?: PersistStorage | null;
  /** `NetInfo` from `@react-native-community/netinfo`: ask again when the device is back online. */
  netInfo?: NetInfoLike | null;
  children?: ReactNode;
}

/** The app's returns: to the foreground, and (with `netInfo`) back online. */
export function watchApp(netInfo?: NetInfoLike | null): PlatformWatch {
  return (returned) => {
    const foreground = AppState.addEventListener('change', (state: AppStateStatus) => {
      if (state === 'active') returned();
    });
    // NetInfo tells the current state at once: only a change from offline (or unknown) to online is a return.
    let online: boolean | null | undefined;
    const unwatchNet = netInfo?.addEventListener(({ isConnected }) => {
      if (isConnected === true && online !== undefined && online !== true) returned();
      online = isConnected;
    });
    return () => {
      foreground.remove();
      unwatchNet?.();
    };
  };
}

// No storage unless the app gives one: React Native has no synchronous one to assume.
// No CORS in an app: a failed question is the network's.
const Provider = makeProvider(() => null, watchApp(), null);

export function DunwallProvider(props: DunwallProviderProps) {
  const { netInfo } = props;
  const watch = useMemo(() => watchApp(netInfo), [netInfo]);
  return createElement(Provider, { ...props, watch });
}
