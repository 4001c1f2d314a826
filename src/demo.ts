import { computeHmac } from './domain/hmac.js';
import { generateHmacSecret, generatePublishableKey, sha256 } from './domain/keys.js';
import type { SubscriberStatus } from './domain/types.js';
import type { Store } from './store/store.js';

export const DEMO_SLUG = 'demo';
export const DEMO_CARD_UPDATE_URL = 'https://billing.example.com/update-card';
export const DEMO_CUSTOMERS: ReadonlyArray<[string, SubscriberStatus, string]> = [
  ['cus_demo_active', 'active', 'paid'],
  ['cus_demo_warning', 'warning', 'soft_decline'],
  ['cus_demo_lockout', 'lockout', 'hard_decline'],
];
const UNKNOWN_CUSTOMER = 'cus_demo_unknown';

export interface DemoKeys {
  publishableKey: string;
  hmacSecret: string;
}

/** Ready-to-paste lookups: single quotes only, so that they survive a JSON log line intact. */
export function demoCurlCommands(baseUrl: string, { publishableKey, hmacSecret }: DemoKeys): { customer: string; curl: string }[] {
  return [...DEMO_CUSTOMERS.map(([id]) => id), UNKNOWN_CUSTOMER].map((customer) => ({
    customer,
    curl:
      `curl -s -H 'Authorization: Bearer ${publishableKey}' ` +
      `'${baseUrl}/api/subscriber-status/${DEMO_SLUG}?processor_customer_id=${customer}&hmac=${computeHmac(hmacSecret, customer)}'`,
  }));
}

/** Creates the demo tenant and its three subscribers; the keys are random, made here. */
export async function seedDemo(store: Store, now: Date): Promise<DemoKeys | null> {
  const publishableKey = generatePublishableKey();
  const hmacSecret = generateHmacSecret();
  const created = await store.createTenant(
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
    await store.applyChange(
      created.tenant.id,
      customer,
      { kind: 'set', status, reason },
      { source: 'admin', eventId: null, eventType: null, declineCode: null, occurredAt: now },
      now,
    );
  }
  return { publishableKey, hmacSecret };
}
