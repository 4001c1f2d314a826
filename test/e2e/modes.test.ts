import { afterAll, describe, expect, it } from 'vitest';
import { availableEngines, schemaScopedUrl } from '../helpers/engines.js';
import { Receiver } from '../helpers/receiver.js';
import { REQUEST_TIMEOUT_MS, adminCall, killAllServices, startServiceProcess } from '../helpers/service-process.js';
import { event, invoice, signed } from '../helpers/stripe-fixtures.js';

/**
 * One tenant's two modes through a real service process on PostgreSQL: a live and a test
 * publishable key, each mode's secret key, each mode's Stripe signing secret, and the
 * tenant's one downstream endpoint. Nothing of one mode is visible through the other.
 */

const engines = await availableEngines();
const TOKEN = 'modes-e2e-admin-token-0123456789abcdefghij';
const LIVE_SECRET = 'whsec_modes_live_0123456789abcdef';
const TEST_SECRET = 'whsec_modes_test_0123456789abcdef';
const DELIVERED_TIMEOUT_MS = 30_000;
const POLL_MS = 50;

afterAll(killAllServices);

async function until(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + DELIVERED_TIMEOUT_MS;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

describe.each(engines.filter((e) => e.name === 'postgres'))('modes, through a service process ($name)', () => {
  it('keeps the live and the test mode of one tenant apart: lookups, Stripe events, statuses and downstream messages', async () => {
    const scoped = await schemaScopedUrl('dunwall_modes');
    const receiver = await Receiver.start();
    try {
      const service = await startServiceProcess(scoped.url, TOKEN, {
        DUNWALL_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true',
        DUNWALL_WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
      });
      const base = service.base;
      const admin = async (method: string, path: string, body?: unknown) => {
        const res = await adminCall(base, TOKEN, method, path, body);
        const text = await res.text();
        return { status: res.status, body: text === '' ? null : (JSON.parse(text) as Record<string, unknown>) };
      };
      const created = await admin('POST', '/tenants', { slug: 'twomode', tier: 'scale' });
      expect(created.status).toBe(201);
      const liveKey = created.body?.publishable_key as string;
      const testKey = created.body?.test_publishable_key as string;
      expect(liveKey).toMatch(/^pk_live_/);
      expect(testKey).toMatch(/^pk_test_/);
      expect((await admin('PATCH', '/tenants/twomode', { stripe_webhook_secret: LIVE_SECRET })).status).toBe(200);
      expect((await admin('PATCH', '/tenants/twomode?mode=test', { stripe_webhook_secret: TEST_SECRET })).status).toBe(
        200,
      );
      expect((await admin('POST', '/tenants/twomode/webhook-endpoints', { url: receiver.url() })).status).toBe(201);
      const secretKey = async (mode: 'live' | 'test') =>
        (
          await admin('POST', `/tenants/twomode/keys?mode=${mode}`, {
            name: `${mode} server`,
            scopes: ['status:read'],
          })
        ).body?.secret_key as string;
      const skLive = await secretKey('live');
      const skTest = await secretKey('test');
      expect(skTest).toMatch(/^sk_test_/);

      const lookup = async (key: string, customer: string) => {
        const res = await fetch(`${base}/api/subscriber-status/twomode?processor_customer_id=${customer}`, {
          headers: { authorization: `Bearer ${key}` },
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
        expect(res.status).toBe(200);
        return ((await res.json()) as { status: string }).status;
      };
      const stripeEvent = async (customer: string, livemode: boolean, secret: string) => {
        const created = Math.floor(Date.now() / 1000);
        const { payload, signature } = signed(
          event('invoice.payment_failed', invoice(customer, { next_payment_attempt: null }), { created, livemode }),
          secret,
          created,
        );
        const res = await fetch(`${base}/webhooks/stripe/twomode`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'stripe-signature': signature },
          body: payload,
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
        return { status: res.status, body: (await res.json()) as { outcome?: string } };
      };

      // Set by the operator in one mode: unknown (active) to the other mode's key.
      expect(
        (await admin('PUT', '/tenants/twomode/subscribers/cus_set_test?mode=test', { status: 'lockout' })).status,
      ).toBe(200);
      expect((await admin('PUT', '/tenants/twomode/subscribers/cus_set_live', { status: 'warning' })).status).toBe(200);
      expect(await lookup(testKey, 'cus_set_test')).toBe('lockout');
      expect(await lookup(liveKey, 'cus_set_test')).toBe('active');
      expect(await lookup(liveKey, 'cus_set_live')).toBe('warning');
      expect(await lookup(testKey, 'cus_set_live')).toBe('active');

      // Stripe events land in the mode of their livemode; one signed with the other mode's secret is refused.
      expect(await stripeEvent('cus_evt_live', true, LIVE_SECRET)).toEqual({
        status: 200,
        body: expect.objectContaining({ outcome: 'applied' }),
      });
      expect(await stripeEvent('cus_evt_test', false, TEST_SECRET)).toEqual({
        status: 200,
        body: expect.objectContaining({ outcome: 'applied' }),
      });
      expect((await stripeEvent('cus_evt_cross', false, LIVE_SECRET)).status).toBe(400);
      expect(await lookup(liveKey, 'cus_evt_live')).toBe('lockout');
      expect(await lookup(testKey, 'cus_evt_live')).toBe('active');
      expect(await lookup(testKey, 'cus_evt_test')).toBe('lockout');
      expect(await lookup(liveKey, 'cus_evt_test')).toBe('active');
      expect(await lookup(liveKey, 'cus_evt_cross')).toBe('active');
      expect(await lookup(testKey, 'cus_evt_cross')).toBe('active');

      // The statuses list of each mode's secret key: its own mode's subscribers only.
      const statuses = async (sk: string) => {
        const res = await fetch(`${base}/v1/statuses`, {
          headers: { authorization: `Bearer ${sk}` },
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
        expect(res.status).toBe(200);
        const body = (await res.json()) as { data: { processor_customer_id: string }[] };
        return body.data.map((d) => d.processor_customer_id).sort();
      };
      expect(await statuses(skLive)).toEqual(['cus_evt_live', 'cus_set_live']);
      expect(await statuses(skTest)).toEqual(['cus_evt_test', 'cus_set_test']);

      // The tenant's one endpoint hears both modes, each message saying its mode.
      const messages = () =>
        receiver.received.map(
          (r) => JSON.parse(r.body) as { livemode: boolean; data: { processor_customer_id: string } },
        );
      await until('the four downstream messages', () => messages().length >= 4);
      const byCustomer = Object.fromEntries(messages().map((m) => [m.data.processor_customer_id, m.livemode]));
      expect(byCustomer).toEqual({
        cus_set_test: false,
        cus_set_live: true,
        cus_evt_live: true,
        cus_evt_test: false,
      });
      process.stdout.write(
        `modes e2e: ${messages().length} downstream messages, live ${messages().filter((m) => m.livemode).length}, test ${messages().filter((m) => !m.livemode).length}\n`,
      );
    } finally {
      await killAllServices();
      await receiver.close();
      await scoped.drop();
    }
  });
});
