import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { computeHmac } from '../domain/hmac.js';
import { generateHmacSecret, generatePublishableKey, sha256 } from '../domain/keys.js';
import type { SubscriberStatus } from '../domain/types.js';
import type { Store } from '../store/index.js';

export const DEMO_SLUG = 'demo';
export const DEMO_CARD_UPDATE_URL = 'https://billing.example.com/update-card';
export const DEMO_CUSTOMERS: ReadonlyArray<[string, SubscriberStatus, string]> = [
  ['cus_demo_active', 'active', 'paid'],
  ['cus_demo_warning', 'warning', 'soft_decline'],
  ['cus_demo_lockout', 'lockout', 'hard_decline'],
];
export const UNKNOWN_CUSTOMER = 'cus_demo_unknown';

/** Ready-to-paste lookups: single quotes only, so that they survive a JSON log line intact. */
export function demoCurlCommands(baseUrl: string, page: DemoPage): { customer: string; curl: string }[] {
  return Object.entries(page.hmacs).map(([customer, hmac]) => ({
    customer,
    curl:
      `curl -s -H 'Authorization: Bearer ${page.publishableKey}' ` +
      `'${baseUrl}/api/subscriber-status/${DEMO_SLUG}?processor_customer_id=${customer}&hmac=${hmac}'`,
  }));
}

/** Creates the demo tenant and its three subscribers; the keys are random, made here. */
export async function seedDemo(store: Pick<Store, 'tenants' | 'subscribers'>, now: Date): Promise<DemoPage | null> {
  const publishableKey = generatePublishableKey();
  const hmacSecret = generateHmacSecret();
  const created = await store.tenants.createTenant(
    {
      slug: DEMO_SLUG,
      tier: 'starter',
      cardUpdateUrl: DEMO_CARD_UPDATE_URL,
      hmacRequired: false,
      allowedOrigins: null,
      publishableKeyHash: sha256(publishableKey).toString('hex'),
      hmacSecret,
    },
    now,
  );
  if (!created.ok) return null;
  for (const [customer, status, reason] of DEMO_CUSTOMERS) {
    await store.subscribers.applyChange(
      created.tenant.id,
      customer,
      { kind: 'set', status, reason },
      { source: 'admin', eventId: null, eventType: null, declineCode: null, occurredAt: now },
      now,
    );
  }
  const hmacs: Record<string, string> = {};
  for (const customer of [...DEMO_CUSTOMERS.map(([id]) => id), UNKNOWN_CUSTOMER])
    hmacs[customer] = computeHmac(hmacSecret, customer);
  return { publishableKey, hmacs };
}

export const DEMO_FILE = 'demo.json';

/**
 * What the demo page needs to call the lookup: the publishable key (public anyway) and each
 * demo customer's hmac. The HMAC secret itself is never kept.
 */
export interface DemoPage {
  publishableKey: string;
  hmacs: Record<string, string>;
}

export function writeDemoPage(dataDir: string, page: DemoPage): void {
  writeFileSync(join(dataDir, DEMO_FILE), `${JSON.stringify(page, null, 2)}\n`, { mode: 0o600 });
}

export function readDemoPage(dataDir: string): DemoPage | null {
  const path = join(dataDir, DEMO_FILE);
  if (!existsSync(path)) return null;
  try {
    const page = JSON.parse(readFileSync(path, 'utf8')) as DemoPage;
    return typeof page.publishableKey === 'string' && typeof page.hmacs === 'object' ? page : null;
  } catch {
    return null;
  }
}
