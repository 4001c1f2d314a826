import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DownstreamDeliverer } from '../../src/downstream/index.js';
import { availableEngines } from '../helpers/engines.js';
import { harness } from '../helpers/harness.js';
import type { Harness } from '../helpers/harness.js';
import { Receiver } from '../helpers/receiver.js';

/**
 * A customer's webhook messages (GET .../subscribers/:customerId/webhooks), for the operator
 * and the tenant: newest first, each with its delivery to every endpoint, another
 * customer's and another tenant's never shown, the limit bounded, the scope required.
 */

const engines = await availableEngines();
const LOOPBACK_OK = { allowHttpLoopback: true, allowedNetworks: ['127.0.0.0/8'] };
const quiet = { info() {}, warn() {} };

interface Message {
  message_id: string;
  type: string;
  sequence: number;
  created_at: string;
  deliveries: {
    endpoint_id: string;
    state: string;
    attempts: number;
    last_status: number | null;
    last_attempt_at: string | null;
  }[];
}

describe.each(engines)("a customer's webhook messages ($name)", (engine) => {
  let h: Harness;
  let receiver: Receiver;
  let deliverer: DownstreamDeliverer;
  let delivered = '';
  let parked = '';
  let readKey = '';
  let statusKey = '';

  function v1(key: string, url: string) {
    return h.app.inject({ method: 'GET', url: `/v1${url}`, headers: { authorization: `Bearer ${key}` } });
  }

  async function key(scopes: string[]): Promise<string> {
    const res = await h.admin('POST', '/tenants/acme/keys', { name: scopes.join(' '), scopes });
    expect(res.statusCode, res.body).toBe(201);
    return (res.json() as { secret_key: string }).secret_key;
  }

  beforeAll(async () => {
    h = await harness(engine, { downstream: LOOPBACK_OK });
    // cus_A's lockout meets a 500 once, then goes through; everything else at once.
    let failed = false;
    receiver = await Receiver.start((_n, r) => {
      if (failed || !r.body.includes('"tenant":"acme"') || !r.body.includes('"to":"lockout"')) return 200;
      failed = true;
      return 500;
    });
    deliverer = new DownstreamDeliverer({
      queue: h.store.downstream.queue,
      now: h.clock.now,
      random: () => 0.5,
      attemptTimeoutMs: 2_000,
      concurrencyPerEndpoint: 4,
      log: quiet,
      ...LOOPBACK_OK,
    });
    await h.createTenant('acme', { tier: 'scale' });
    await h.createTenant('other', { tier: 'scale' });
    // A change before the tenant has any endpoint raises no message.
    await h.setSubscriber('acme', 'cus_A', 'warning', 'soft_decline');
    const make = async (slug: string, body: Record<string, unknown> = {}) => {
      const res = await h.admin('POST', `/tenants/${slug}/webhook-endpoints`, { url: receiver.url(), ...body });
      expect(res.statusCode, res.body).toBe(201);
      return (res.json() as { id: string }).id;
    };
    delivered = await make('acme');
    // For status changes only (a deletion is not queued for it), and disabled once the
    // lockout is queued for it: that delivery waits.
    parked = await make('acme', { event_types: ['subscriber.status_changed'] });
    await make('other');
    h.clock.advance(1_000);
    await h.setSubscriber('acme', 'cus_A', 'lockout', 'retries_exhausted');
    expect((await h.admin('PATCH', `/tenants/acme/webhook-endpoints/${parked}`, { enabled: false })).statusCode).toBe(
      200,
    );
    h.clock.advance(1_000);
    await h.setSubscriber('acme', 'cus_B', 'warning', 'soft_decline');
    await h.setSubscriber('other', 'cus_A', 'lockout', 'hard_decline');
    h.clock.advance(1_000);
    expect((await h.admin('DELETE', '/tenants/acme/subscribers/cus_A')).statusCode).toBe(204);
    // Everything due is sent at once; cus_A's lockout again once its backoff (30 s) has passed.
    expect(await deliverer.runOnce()).toBe(4);
    h.clock.advance(60_000);
    expect(await deliverer.runOnce()).toBe(1);
    readKey = await key(['subscribers:read']);
    statusKey = await key(['status:read']);
  });
  afterAll(async () => {
    await deliverer?.stop();
    await receiver?.close();
    await h?.close();
  });

  it("lists the customer's messages newest first, each with its delivery to each endpoint it was queued for", async () => {
    const res = await h.admin('GET', '/tenants/acme/subscribers/cus_A/webhooks');
    expect(res.statusCode, res.body).toBe(200);
    const data = (res.json() as { data: Message[] }).data;
    expect(data.map((m) => [m.sequence, m.type])).toEqual([
      [2, 'subscriber.deleted'],
      [1, 'subscriber.status_changed'],
    ]);
    for (const m of data) expect(m.message_id).toMatch(/^msg_/);
    const [deleted, locked] = data;
    expect(locked?.created_at).toBe(new Date(h.clock.ms - 62_000).toISOString());
    expect(deleted?.created_at).toBe(new Date(h.clock.ms - 60_000).toISOString());
    // Endpoints in the order they were made; a disabled one's delivery waits, unattempted.
    // The deletion went to the endpoint that takes every type only.
    expect(locked?.deliveries.map((d) => [d.endpoint_id, d.state])).toEqual([
      [delivered, 'delivered'],
      [parked, 'pending'],
    ]);
    expect(locked?.deliveries[1]).toMatchObject({ attempts: 0, last_status: null, last_attempt_at: null });
    expect(locked?.deliveries[0]).toEqual({
      endpoint_id: delivered,
      state: 'delivered',
      attempts: 2,
      last_status: 200,
      last_attempt_at: new Date(h.clock.ms).toISOString(),
    });
    expect(deleted?.deliveries).toHaveLength(1);
    expect(deleted?.deliveries[0]).toEqual({
      endpoint_id: delivered,
      state: 'delivered',
      attempts: 1,
      last_status: 200,
      last_attempt_at: new Date(h.clock.ms - 60_000).toISOString(),
    });
    // The same messages the endpoint's own list shows.
    const endpointMessages = await h.admin('GET', `/tenants/acme/webhook-endpoints/${delivered}/messages`);
    const ids = (endpointMessages.json() as { data: { message_id: string; processor_customer_id: string }[] }).data
      .filter((m) => m.processor_customer_id === 'cus_A')
      .map((m) => m.message_id);
    expect(ids).toEqual([deleted?.message_id, locked?.message_id]);
  });

  it("never shows another customer's or another tenant's messages; a customer that raised none has an empty list", async () => {
    const mine = (await h.admin('GET', '/tenants/acme/subscribers/cus_A/webhooks')).json() as { data: Message[] };
    const b = (await h.admin('GET', '/tenants/acme/subscribers/cus_B/webhooks')).json() as { data: Message[] };
    expect(b.data.map((m) => m.sequence)).toEqual([1]);
    const other = (await h.admin('GET', '/tenants/other/subscribers/cus_A/webhooks')).json() as { data: Message[] };
    expect(other.data.map((m) => [m.sequence, m.deliveries[0]?.state])).toEqual([[1, 'delivered']]);
    const ids = [...mine.data, ...b.data, ...other.data].map((m) => m.message_id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(other.data[0]?.deliveries[0]?.endpoint_id).not.toMatch(new RegExp(`^(${delivered}|${parked})$`));
    const none = await h.admin('GET', '/tenants/acme/subscribers/cus_never/webhooks');
    expect(none.statusCode).toBe(200);
    expect(none.json()).toEqual({ data: [] });
    expect((await h.admin('GET', '/tenants/nobody/subscribers/cus_A/webhooks')).statusCode).toBe(404);
  });

  it('takes a limit of 1 to 100 (the newest first), and refuses anything else', async () => {
    const one = (await h.admin('GET', '/tenants/acme/subscribers/cus_A/webhooks?limit=1')).json() as {
      data: Message[];
    };
    expect(one.data.map((m) => m.sequence)).toEqual([2]);
    expect((await h.admin('GET', '/tenants/acme/subscribers/cus_A/webhooks?limit=100')).statusCode).toBe(200);
    for (const bad of ['101', '0', '-1', 'x', '1000']) {
      const res = await h.admin('GET', `/tenants/acme/subscribers/cus_A/webhooks?limit=${bad}`);
      expect(res.statusCode, bad).toBe(400);
      expect(res.json().code).toBe('invalid_request');
    }
    expect((await h.admin('GET', '/tenants/acme/subscribers/cus_A/webhooks?after=x')).statusCode).toBe(400);
    expect((await h.admin('GET', '/tenants/acme/subscribers/not-a-customer/webhooks')).statusCode).toBe(400);
  });

  it('answers the tenant with subscribers:read, the same as the operator; without the scope, 403', async () => {
    const tenant = await v1(readKey, '/subscribers/cus_A/webhooks');
    expect(tenant.statusCode, tenant.body).toBe(200);
    expect(tenant.json()).toEqual((await h.admin('GET', '/tenants/acme/subscribers/cus_A/webhooks')).json());
    const refused = await v1(statusKey, '/subscribers/cus_A/webhooks');
    expect(refused.statusCode).toBe(403);
    expect(refused.json().code).toBe('insufficient_scope');
    expect((await h.app.inject({ method: 'GET', url: '/v1/subscribers/cus_A/webhooks' })).statusCode).toBe(401);
  });
});
