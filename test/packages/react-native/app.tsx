/**
 * The hooks test's app: `@dunwall/react-native`'s provider over a probe of the status, the
 * banner and the gate, with an AsyncStorage-shaped storage (its reads held until the test
 * lets them go, when it asks) and a NetInfo-shaped source the test moves.
 */
import { createRoot } from 'react-dom/client';
import { Text } from 'react-native';
import {
  BillingBanner,
  BillingGate,
  DunwallProvider,
  useBillingStatus,
} from '../../../packages/react-native/src/index.js';
import type { BillingBootstrap } from '../../../packages/react-native/src/index.js';

interface Config {
  customer: string;
  hmac?: string;
  preview?: 'warning' | 'lockout';
  /** An answer the app's backend got for it. */
  bootstrap?: BillingBootstrap;
  /** What the storage holds at launch. */
  stored?: Record<string, string>;
  /** Hold the storage's reads until `releaseStorage()`. */
  slowStorage?: boolean;
}
const config = JSON.parse(new URLSearchParams(location.search).get('config') ?? '{}') as Config;

const entries = new Map(Object.entries(config.stored ?? {}));
const writes: [string, string][] = [];
let release = () => {};
const held = config.slowStorage ? new Promise<void>((resolve) => (release = resolve)) : Promise.resolve();
let reads = 0;
const storage = {
  async getItem(key: string): Promise<string | null> {
    await held;
    reads += 1;
    return entries.get(key) ?? null;
  },
  async setItem(key: string, value: string): Promise<void> {
    writes.push([key, value]);
    entries.set(key, value);
  },
  async removeItem(key: string): Promise<void> {
    entries.delete(key);
  },
};

const netListeners = new Set<(state: { isConnected: boolean | null }) => void>();
let connected: boolean | null = true;
const netInfo = {
  // As NetInfo does: the current state at once, then each change.
  addEventListener(listener: (state: { isConnected: boolean | null }) => void) {
    netListeners.add(listener);
    listener({ isConnected: connected });
    return () => void netListeners.delete(listener);
  },
};

/** Every status the app rendered, in order. */
const seen: string[] = [];
function Probe() {
  const { status, source } = useBillingStatus();
  const shown = `${status}|${source}`;
  if (seen[seen.length - 1] !== shown) seen.push(shown);
  return <Text testID="probe">{shown}</Text>;
}

Object.assign(window, {
  app: {
    seen,
    writes,
    reads: () => reads,
    releaseStorage: () => release(),
    setConnected(next: boolean | null) {
      connected = next;
      for (const l of [...netListeners]) l({ isConnected: next });
    },
  },
});

const root = document.getElementById('root');
if (root)
  createRoot(root).render(
    <DunwallProvider
      baseUrl={location.origin}
      tenant="acme"
      publishableKey="pk_test_standin"
      customer={config.customer}
      hmac={config.hmac ?? null}
      preview={config.preview ?? null}
      bootstrap={config.bootstrap ?? null}
      storage={storage}
      netInfo={netInfo}
    >
      <Probe />
      <BillingBanner />
      <BillingGate />
    </DunwallProvider>,
  );
