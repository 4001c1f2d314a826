import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { availableEngines } from '../helpers/engines.js';
import { harness } from '../helpers/harness.js';
import type { Harness } from '../helpers/harness.js';
import { Receiver } from '../helpers/receiver.js';
import { DownstreamDeliverer } from '../../src/downstream/index.js';
import type { DelivererOptions } from '../../src/downstream/index.js';
import { RETRY_WINDOW_MS } from '../../src/domain/downstream-endpoints.js';
import { deliver, verifyDelivery } from '../helpers/webhook.js';
import { Retention } from '../../src/runtime/retention.js';
import { customer, event, invoice, paymentIds } from '../helpers/stripe-fixtures.js';

const engines = await availableEngines();
const quiet = { info() {}, warn() {} };
const LOOPBACK_OK = { allowHttpLoopback: true, allowedNetworks: ['127.0.0.0/8'] };
/**
 * An attempt's bound on a real loopback socket. Long enough that a receiver answering at once
 * is never timed out on a loaded 2-core runner (300 ms was, once: a message left pending);
 * the tests of a hanging receiver wait it out.
 */
const TIMEOUT_MS = 1_000;

interface Payload {
  id: string;
  type: string;
  tenant: string;
  timestamp: string;
  data: Record<string, unknown> & { sequence: number; cause: Record<string, unknown> };
}

/** Verifies as a tenant would (test/helpers/webhook.ts). */
function verify(secret: string, r: { headers: Record<string, unknown>; body: string }): Payload {
  return verifyDelivery<Payload>(secret, r);
}

describe.each(engines)('downstream webhooks ($name)', (engine) => {
  let h: Harness;
  let receiver: Receiver;
  let deliverer: DownstreamDeliverer;
  const open: { close(): Promise<void> }[] = [];

  function newDeliverer(extra: Partial<DelivererOptions> = {}): DownstreamDeliverer {
    return new DownstreamDeliverer({
      queue: h.store.downstream.queue,
      now: h.clock.now,
      random: () => 0.5,
      attemptTimeoutMs: TIMEOUT_MS,
      concurrencyPerEndpoint: 4,
      log: quiet,
      ...LOOPBACK_OK,
      ...extra,
    });
  }

  async function endpoint(slug: string, body: Record<string, unknown> = {}): Promise<{ id: string; secret: string }> {
    const res = await h.admin('POST', `/tenants/${slug}/webhook-endpoints`, { url: receiver.url(), ...body });
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as { id: string; secret: string };
  }

  async function messages(slug: string, id: string, query = ''): Promise<Record<string, unknown>[]> {
    const res = await h.admin('GET', `/tenants/${slug}/webhook-endpoints/${id}/messages${query}`);
    expect(res.statusCode, res.body).toBe(200);
    return (res.json() as { data: Record<string, unknown>[] }).data;
  }

  async function attempts(slug: string, id: string): Promise<Record<string, unknown>[]> {
    const res = await h.admin('GET', `/tenants/${slug}/webhook-endpoints/${id}/attempts`);
    expect(res.statusCode, res.body).toBe(200);
    return (res.json() as { data: Record<string, unknown>[] }).data;
  }

  beforeEach(async () => {
    // A store per test: each a copy of the run's migrated folder, not an initdb of its own.
    h = await harness(engine, { downstream: LOOPBACK_OK }, {}, { fromTemplate: true });
    receiver = await Receiver.start();
    deliverer = newDeliverer();
    await h.createTenant('acme', { tier: 'scale' });
  });

  afterEach(async () => {
    await deliverer.stop();
    for (const o of open.splice(0)) await o.close();
    await receiver.close();
    await h.close();
  });

  it('sends each change once, signed for the Standard Webhooks library, in order by sequence; nothing when nothing changed', async () => {
    const ep = await endpoint('acme');
    expect(ep.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    await h.setSubscriber('acme', 'cus_A', 'warning', 'payment_failed');
    await h.setSubscriber('acme', 'cus_A', 'warning', 'payment_failed'); // the same: no event
    h.clock.advance(1_000);
    await h.setSubscriber('acme', 'cus_A', 'lockout', 'unpaid');
    expect(await deliverer.runOnce()).toBe(2);
    expect(receiver.received).toHaveLength(2);

    const [first, second] = receiver.received.map((r) => verify(ep.secret, r));
    expect(first).toMatchObject({
      type: 'subscriber.status_changed',
      tenant: 'acme',
      data: {
        processor_customer_id: 'cus_A',
        sequence: 1,
        from: null,
        to: 'warning',
        reason: 'payment_failed',
        previous_reason: null,
        cause: { source: 'admin', action: 'set_status' },
      },
    });
    expect(second?.data).toMatchObject({
      sequence: 2,
      from: 'warning',
      to: 'lockout',
      reason: 'unpaid',
      previous_reason: 'payment_failed',
    });
    expect(second?.data.occurred_at).toBe(new Date(h.clock.ms).toISOString());
    const r0 = receiver.received[0];
    expect(r0?.headers['webhook-id']).toBe(first?.id);
    expect(r0?.headers['content-type']).toBe('application/json');
    // A wrong secret does not verify: the library checks, not this test.
    expect(() => verify(`whsec_${Buffer.alloc(32, 1).toString('base64')}`, r0 as never)).toThrow(/signature/i);

    const delResponse = await h.admin('DELETE', '/tenants/acme/subscribers/cus_A');
    expect(delResponse.statusCode).toBe(204);
    await h.admin('DELETE', '/tenants/acme/subscribers/cus_A'); // already gone: no event
    await deliverer.runOnce();
    expect(receiver.received).toHaveLength(3);
    expect(verify(ep.secret, receiver.received[2] as never)).toMatchObject({
      type: 'subscriber.deleted',
      data: {
        processor_customer_id: 'cus_A',
        sequence: 3,
        from: 'lockout',
        previous_reason: 'unpaid',
        cause: { source: 'admin', action: 'delete' },
      },
    });
    const listed = await messages('acme', ep.id);
    expect(listed.map((m) => [m.sequence, m.state, m.attempts])).toEqual([
      [3, 'delivered', 1],
      [2, 'delivered', 1],
      [1, 'delivered', 1],
    ]);
    expect(new Set(receiver.received.map((r) => r.headers['webhook-id'])).size).toBe(3);
  });

  it('names the Stripe event that caused a change, and raises nothing for its redelivery or a stale event', async () => {
    const secret = 'whsec_downstream_test_0123456789abcdef';
    expect((await h.admin('PATCH', '/tenants/acme', { stripe_webhook_secret: secret })).statusCode).toBe(200);
    const ep = await endpoint('acme', { event_types: ['subscriber.status_changed'] });
    const ids = paymentIds();
    const nowS = Math.floor(h.clock.ms / 1000);
    const failed = event('invoice.payment_failed', invoice('cus_S', { ids, next_payment_attempt: nowS + 86_400 }), {
      created: nowS,
    });
    expect((await deliver(h, 'acme', failed, secret)).json()).toMatchObject({ outcome: 'applied' });
    expect((await deliver(h, 'acme', failed, secret)).json()).toMatchObject({ outcome: 'duplicate' }); // a redelivery
    // An older event of the same invoice, arriving late: stale, so no change and no event.
    const older = event('invoice.payment_failed', invoice('cus_S', { ids, next_payment_attempt: null }), {
      created: nowS - 60,
    });
    expect((await deliver(h, 'acme', older, secret)).json()).toMatchObject({ outcome: 'stale' });
    await deliverer.runOnce();
    expect(receiver.received).toHaveLength(1);
    expect(verify(ep.secret, receiver.received[0] as never).data).toMatchObject({
      processor_customer_id: 'cus_S',
      to: 'warning',
      cause: { source: 'stripe', stripe_event_id: failed.id, stripe_event_type: 'invoice.payment_failed' },
    });
    // customer.deleted raises subscriber.deleted, which this endpoint did not ask for.
    const deleted = event('customer.deleted', customer('cus_S'), { created: Math.floor(h.clock.ms / 1000) + 5 });
    expect((await deliver(h, 'acme', deleted, secret)).statusCode).toBe(200);
    await deliverer.runOnce();
    expect(receiver.received).toHaveLength(1);
  });

  it('retries with exponential backoff and jitter on a fake clock until the receiver recovers, with one webhook-id', async () => {
    receiver.behaviour = (n) => (n < 3 ? 500 : 200);
    const ep = await endpoint('acme');
    await h.setSubscriber('acme', 'cus_B', 'lockout', 'unpaid');
    expect(await deliverer.runOnce()).toBe(1); // 500
    // random() = 0.5: no jitter; the waits are 30 s, 60 s, 120 s.
    for (const wait of [30_000, 60_000, 120_000]) {
      h.clock.advance(wait - 1_000);
      expect(await deliverer.runOnce()).toBe(0);
      h.clock.advance(1_000);
      expect(await deliverer.runOnce()).toBe(1);
    }
    expect(receiver.received.map((r) => r.headers['webhook-id'])).toEqual(
      Array(4).fill(receiver.received[0]?.headers['webhook-id']),
    );
    const tried = await attempts('acme', ep.id);
    expect(tried.map((a) => [a.status_code, a.outcome])).toEqual([
      [200, 'delivered'],
      [500, 'failed'],
      [500, 'failed'],
      [500, 'failed'],
    ]);
    expect(tried[1]?.error).toBe('HTTP 500: nope 500');
    expect(typeof tried[0]?.latency_ms).toBe('number');
    const [msg] = await messages('acme', ep.id);
    expect(msg).toMatchObject({ state: 'delivered', attempts: 4, last_status: 200 });
    expect(deliverer.counts).toMatchObject({ delivered: 1, failed: 3 });
  });

  it('spreads retries with jitter, within a quarter of the wait either way', async () => {
    const { retryDelayMs } = await import('../../src/domain/downstream-endpoints.js');
    expect([retryDelayMs(1, () => 0), retryDelayMs(1, () => 0.99)].map((ms) => Math.round(ms / 1000))).toEqual([
      23, 37,
    ]);
    expect(retryDelayMs(12, () => 0.5)).toBe(8 * 3_600_000);
  });

  it('times out a receiver that hangs, and retries it', async () => {
    receiver.behaviour = () => 'hang';
    const ep = await endpoint('acme');
    await h.setSubscriber('acme', 'cus_H', 'warning', 'payment_failed');
    await deliverer.runOnce();
    const [a] = await attempts('acme', ep.id);
    expect(a).toMatchObject({ status_code: null, outcome: 'failed', error: `timed out after ${TIMEOUT_MS} ms` });
    const [m] = await messages('acme', ep.id);
    expect(m).toMatchObject({ state: 'pending', attempts: 1 });
  });

  it('disables an endpoint that answers 410 and sends it nothing more until it is enabled again', async () => {
    receiver.behaviour = (n) => (n === 0 ? 410 : 200);
    const ep = await endpoint('acme');
    await h.setSubscriber('acme', 'cus_G', 'warning', 'payment_failed');
    await deliverer.runOnce();
    let shown = (await h.admin('GET', `/tenants/acme/webhook-endpoints/${ep.id}`)).json() as Record<string, unknown>;
    expect(shown).toMatchObject({ enabled: false, disabled_reason: 'gone', pending: 1 });
    expect(String(shown.disabled_detail)).toMatch(/410/);
    await h.setSubscriber('acme', 'cus_G2', 'warning', 'payment_failed');
    h.clock.advance(3_600_000);
    expect(await deliverer.runOnce()).toBe(0);
    expect(receiver.received).toHaveLength(1);
    // What waits for it is parked: not even the check of whether anything is due sees it.
    const limits = { perEndpoint: 4, perTenant: 16, batch: 10, leaseMs: 60_000 };
    expect(await h.store.downstream.queue.claim(new Date(h.clock.ms), limits)).toEqual({ deliveries: [], due: false });
    expect((await messages('acme', ep.id))[0]).toMatchObject({ state: 'pending', next_attempt_at: null });
    const [waiting] = await messages('acme', ep.id);
    expect(
      (await h.admin('POST', `/tenants/acme/webhook-endpoints/${ep.id}/messages/${String(waiting?.message_id)}/retry`))
        .statusCode,
    ).toBe(202);
    expect(await h.store.downstream.queue.claim(new Date(h.clock.ms), limits)).toEqual({ deliveries: [], due: false });

    expect((await h.admin('PATCH', `/tenants/acme/webhook-endpoints/${ep.id}`, { enabled: true })).statusCode).toBe(
      200,
    );
    await deliverer.runOnce();
    // The message that met the 410 is sent again; cus_G2's change came while it was disabled: a replay sends it.
    expect(receiver.received.map((r) => (JSON.parse(r.body) as Payload).data.processor_customer_id)).toEqual([
      'cus_G',
      'cus_G',
    ]);
    const replayed = await h.admin('POST', `/tenants/acme/webhook-endpoints/${ep.id}/replay`, {
      since: new Date(h.clock.ms - 86_400_000).toISOString(),
    });
    expect(replayed.statusCode, replayed.body).toBe(202);
    expect(replayed.json()).toEqual({ queued: 2, next: null });
    await deliverer.runOnce();
    expect(receiver.received.slice(2).map((r) => (JSON.parse(r.body) as Payload).data.processor_customer_id)).toEqual([
      'cus_G',
      'cus_G2',
    ]);
    shown = (await h.admin('GET', `/tenants/acme/webhook-endpoints/${ep.id}`)).json() as Record<string, unknown>;
    expect(shown).toMatchObject({ enabled: true, disabled_reason: null, pending: 0, failing_since: null });
  });

  it('gives a message up after about three days, and disables an endpoint that failed for days', async () => {
    receiver.behaviour = () => 503;
    const ep = await endpoint('acme');
    const start = h.clock.ms;
    await h.setSubscriber('acme', 'cus_F', 'lockout', 'unpaid');
    let tries = 0;
    for (; tries < 40; tries += 1) {
      await deliverer.runOnce();
      const [m] = await messages('acme', ep.id);
      if (m?.state !== 'pending') break;
      h.clock.ms = Date.parse(String(m.next_attempt_at));
    }
    const [m] = await messages('acme', ep.id);
    expect(m?.state).toBe('failed');
    expect(h.clock.ms - start).toBeGreaterThanOrEqual(RETRY_WINDOW_MS - 8 * 3_600_000);
    expect(h.clock.ms - start).toBeLessThanOrEqual(RETRY_WINDOW_MS);
    expect(receiver.received.length).toBeGreaterThan(12);
    expect(deliverer.counts.gave_up).toBe(1);
    expect((await attempts('acme', ep.id))[0]).toMatchObject({ outcome: 'gave_up', status_code: 503 });

    // Failing on: each day a new change, each failing; after five days the endpoint is disabled.
    for (let day = 0; day < 3; day += 1) {
      h.clock.advance(86_400_000);
      await h.setSubscriber('acme', 'cus_F', day % 2 === 0 ? 'warning' : 'lockout', 'unpaid');
      await deliverer.runOnce();
    }
    const shown = (await h.admin('GET', `/tenants/acme/webhook-endpoints/${ep.id}`)).json() as Record<string, unknown>;
    expect(shown).toMatchObject({
      enabled: false,
      disabled_reason: 'failing',
      failing_since: new Date(start).toISOString(),
    });
    expect(String(shown.disabled_detail)).toMatch(/every attempt failed since .*HTTP 503/);
  });

  it('sends a message again on demand, with the same webhook-id', async () => {
    const ep = await endpoint('acme');
    await h.setSubscriber('acme', 'cus_R', 'warning', 'payment_failed');
    await deliverer.runOnce();
    const [m] = await messages('acme', ep.id);
    const retry = await h.admin(
      'POST',
      `/tenants/acme/webhook-endpoints/${ep.id}/messages/${String(m?.message_id)}/retry`,
    );
    expect(retry.statusCode, retry.body).toBe(202);
    await deliverer.runOnce();
    expect(receiver.received.map((r) => r.headers['webhook-id'])).toEqual([m?.message_id, m?.message_id]);
    const missing = await h.admin(
      'POST',
      `/tenants/acme/webhook-endpoints/${ep.id}/messages/msg_${'a'.repeat(24)}/retry`,
    );
    expect([missing.statusCode, missing.json().code]).toEqual([404, 'webhook_message_not_found']);
  });

  it('signs with both secrets during a rotation, and with the new one alone after the overlap', async () => {
    const ep = await endpoint('acme');
    const rotated = await h.admin('POST', `/tenants/acme/webhook-endpoints/${ep.id}/rotate-secret`, {
      overlap_seconds: 3600,
    });
    expect(rotated.statusCode, rotated.body).toBe(200);
    const { secret: next, signing_secrets } = rotated.json() as { secret: string; signing_secrets: unknown[] };
    expect(next).not.toBe(ep.secret);
    expect(signing_secrets).toHaveLength(2);
    await h.setSubscriber('acme', 'cus_K', 'warning', 'payment_failed');
    await deliverer.runOnce();
    const r = receiver.received[0] as never;
    expect(String((r as { headers: Record<string, string> }).headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(verify(ep.secret, r).type).toBe('subscriber.status_changed');
    expect(verify(next, r).type).toBe('subscriber.status_changed');
    h.clock.advance(3_601_000);
    await h.setSubscriber('acme', 'cus_K', 'lockout', 'unpaid');
    await deliverer.runOnce();
    const later = receiver.received[1] as never;
    expect(verify(next, later).data.to).toBe('lockout');
    expect(() => verify(ep.secret, later)).toThrow(/signature/i);
    // The secret is shown at creation and rotation only.
    const listed = (await h.admin('GET', '/tenants/acme/webhook-endpoints')).body;
    expect(listed).not.toContain(ep.secret.slice(6));
    expect(listed).not.toContain(next.slice(6));
  });

  it('holds an endpoint to its concurrency cap', async () => {
    await deliverer.stop();
    deliverer = newDeliverer({ concurrencyPerEndpoint: 2 });
    let release!: () => void;
    receiver.hold = new Promise((resolve) => (release = resolve));
    await endpoint('acme');
    for (let i = 0; i < 6; i += 1) await h.setSubscriber('acme', `cus_C${i}`, 'warning', 'payment_failed');
    const first = deliverer.runOnce();
    await vi.waitFor(() => expect(receiver.received).toHaveLength(2));
    // Every claim now finds the endpoint full.
    expect(
      (
        await h.store.downstream.queue.claim(new Date(h.clock.ms), {
          perEndpoint: 2,
          perTenant: 16,
          batch: 10,
          leaseMs: 60_000,
        })
      ).deliveries,
    ).toEqual([]);
    release();
    expect(await first).toBe(2);
    deliverer.start();
    await vi.waitFor(() => expect(receiver.received).toHaveLength(6));
    expect(receiver.maxOpen).toBe(2);
  });

  it('records nothing, and fails nothing, for an endpoint deleted while an attempt to it was under way', async () => {
    const warnings: unknown[] = [];
    await deliverer.stop();
    deliverer = newDeliverer({ log: { info() {}, warn: (obj: unknown) => void warnings.push(obj) } });
    let release!: () => void;
    receiver.hold = new Promise((resolve) => (release = resolve));
    const ep = await endpoint('acme');
    await h.setSubscriber('acme', 'cus_D', 'warning', 'payment_failed');
    const run = deliverer.runOnce();
    await vi.waitFor(() => expect(receiver.received).toHaveLength(1));
    expect((await h.admin('DELETE', `/tenants/acme/webhook-endpoints/${ep.id}`)).statusCode).toBe(204);
    release();
    expect(await run).toBe(1);
    expect(warnings).toEqual([]);
    expect(deliverer.counts.delivered).toBe(1);
    expect((await h.admin('GET', `/tenants/acme/webhook-endpoints/${ep.id}/attempts`)).statusCode).toBe(404);
  });

  it('counts a 2xx as delivered at its status line, whatever its body does', async () => {
    receiver.behaviour = () => 'endless-200';
    const ep = await endpoint('acme');
    await h.setSubscriber('acme', 'cus_E', 'warning', 'payment_failed');
    await deliverer.runOnce();
    expect((await attempts('acme', ep.id))[0]).toMatchObject({ outcome: 'delivered', status_code: 200, error: null });
  });

  it('ends the attempts under way when it stops, recording nothing; once the lease ends, they are sent again with the same webhook-id', async () => {
    await deliverer.stop();
    deliverer = newDeliverer({ attemptTimeoutMs: 60_000 });
    receiver.behaviour = (n) => (n === 0 ? 'hang' : 200);
    const ep = await endpoint('acme');
    await h.setSubscriber('acme', 'cus_Q', 'lockout', 'unpaid');
    const run = deliverer.runOnce();
    await vi.waitFor(() => expect(receiver.received).toHaveLength(1));
    await deliverer.stop();
    await run;
    expect(await attempts('acme', ep.id)).toEqual([]);
    expect((await messages('acme', ep.id))[0]).toMatchObject({ state: 'pending', attempts: 1 });
    // Another instance: nothing until the lease (2 x timeout + 1 s) ends.
    deliverer = newDeliverer({ attemptTimeoutMs: 60_000 });
    expect(await deliverer.runOnce()).toBe(0);
    h.clock.advance(121_000);
    expect(await deliverer.runOnce()).toBe(1);
    expect(receiver.received.map((r) => r.headers['webhook-id'])).toEqual([
      receiver.received[0]?.headers['webhook-id'],
      receiver.received[0]?.headers['webhook-id'],
    ]);
    expect((await messages('acme', ep.id))[0]).toMatchObject({ state: 'delivered', attempts: 2 });
  });

  it('judges an endpoint by its current URL: an attempt to the URL it had does not disable it', async () => {
    let release!: () => void;
    receiver.hold = new Promise((resolve) => (release = resolve));
    receiver.behaviour = () => 410;
    const ep = await endpoint('acme');
    await h.setSubscriber('acme', 'cus_U', 'warning', 'payment_failed');
    const run = deliverer.runOnce();
    await vi.waitFor(() => expect(receiver.received).toHaveLength(1));
    const other = await Receiver.start();
    open.push(other);
    expect((await h.admin('PATCH', `/tenants/acme/webhook-endpoints/${ep.id}`, { url: other.url() })).statusCode).toBe(
      200,
    );
    release();
    await run;
    expect((await h.admin('GET', `/tenants/acme/webhook-endpoints/${ep.id}`)).json()).toMatchObject({
      enabled: true,
      disabled_reason: null,
      pending: 1,
    });
    h.clock.advance(60_000);
    await deliverer.runOnce();
    expect(other.received).toHaveLength(1);
  });

  it('replays a range a page at a time, messages of one instant included, each queued as new', async () => {
    const ep = await endpoint('acme');
    for (let i = 0; i < 5; i += 1) await h.setSubscriber('acme', `cus_Y${i}`, 'warning', 'payment_failed');
    // Four at a time (the endpoint's cap): until none is left.
    const drain = async () => {
      while ((await deliverer.runOnce()) > 0) {
        /* more */
      }
    };
    await drain();
    const tenant = await h.store.tenants.getTenant('acme');
    const range = { since: new Date(h.clock.ms), until: new Date(h.clock.ms + 1) };
    const seen: number[] = [];
    let page = await h.store.downstream.endpoints.replay(tenant?.id ?? 0, ep.id, range, 2, new Date(h.clock.ms));
    seen.push(page?.queued ?? -1);
    while (page?.next) {
      page = await h.store.downstream.endpoints.replay(
        tenant?.id ?? 0,
        ep.id,
        { ...range, ...page.next },
        2,
        new Date(h.clock.ms),
      );
      seen.push(page?.queued ?? -1);
    }
    expect(seen).toEqual([2, 2, 1]);
    await drain();
    const ids = receiver.received.map((r) => r.headers['webhook-id']);
    expect(ids).toHaveLength(10);
    expect(new Set(ids).size).toBe(5);
    expect((await messages('acme', ep.id)).map((m) => m.attempts)).toEqual([1, 1, 1, 1, 1]);
  });

  it('holds a tenant to its share of attempts under way, whatever its number of endpoints', async () => {
    for (let i = 0; i < 5; i += 1) await endpoint('acme');
    await h.createTenant('other', { tier: 'scale' });
    const res = await h.admin('POST', '/tenants/other/webhook-endpoints', { url: receiver.url('/other') });
    expect(res.statusCode).toBe(201);
    for (let i = 0; i < 4; i += 1) await h.setSubscriber('acme', `cus_F${i}`, 'warning', 'payment_failed');
    await h.setSubscriber('other', 'cus_O', 'warning', 'payment_failed');
    // acme: 5 endpoints x 4 messages, 4 at once each: 20 by the endpoints' caps, 6 by the tenant's.
    const limits = { perEndpoint: 4, perTenant: 6, batch: 64, leaseMs: 60_000 };
    const first = await h.store.downstream.queue.claim(new Date(h.clock.ms), limits);
    const byTenant = (d: { url: string }) => (d.url.endsWith('/other') ? 'other' : 'acme');
    expect(first.deliveries.filter((d) => byTenant(d) === 'acme')).toHaveLength(6);
    expect(first.deliveries.filter((d) => byTenant(d) === 'other')).toHaveLength(1);
    // Another claim (another instance) finds acme's share taken.
    expect((await h.store.downstream.queue.claim(new Date(h.clock.ms), limits)).deliveries).toEqual([]);
  });

  /**
   * Three tenants with many endpoints, each with a backlog past its caps, all due before
   * `calm`'s message; their endpoints point at `to`, at a path of their own. Returns their
   * endpoints' ids.
   */
  async function crowd(to: Receiver): Promise<Map<string, string[]>> {
    const crowded = new Map<string, string[]>();
    for (const slug of ['stuck1', 'stuck2', 'stuck3']) {
      await h.createTenant(slug, { tier: 'scale' });
      const ids: string[] = [];
      // 10 endpoints x 5 messages: 50 due, 16 at once by the tenant's share (4 endpoints
      // full), 6 endpoints still under their own cap.
      for (let i = 0; i < 10; i += 1) ids.push((await endpoint(slug, { url: to.url(`/${slug}`) })).id);
      for (let i = 0; i < 5; i += 1) await h.setSubscriber(slug, `cus_${slug}_${i}`, 'warning', 'payment_failed');
      crowded.set(slug, ids);
    }
    return crowded;
  }

  it("claims a tenant's due delivery while other tenants with backlogs sit at their share", async () => {
    await crowd(receiver);
    const limits = { perEndpoint: 4, perTenant: 16, batch: 64, leaseMs: 60_000 };
    const first = await h.store.downstream.queue.claim(new Date(h.clock.ms), limits);
    for (const slug of ['stuck1', 'stuck2', 'stuck3'])
      expect(first.deliveries.filter((d) => d.url.endsWith(`/${slug}`))).toHaveLength(16);
    expect(first.deliveries).toHaveLength(48);

    // Later, a fourth tenant's message: the 18 endpoints of the full tenants that are due
    // (older, under their own cap) come before it by due time, yet none of them may be taken.
    h.clock.advance(1_000);
    await h.createTenant('calm', { tier: 'scale' });
    const calm = await endpoint('calm', { url: receiver.url('/calm') });
    await h.setSubscriber('calm', 'cus_calm', 'warning', 'payment_failed');
    // The process has 16 slots free (64 less 48 under way).
    const second = await h.store.downstream.queue.claim(new Date(h.clock.ms), { ...limits, batch: 16 });
    expect(second.deliveries.map((d) => d.endpointId)).toEqual([calm.id]);
    expect(second.due).toBe(true);
    // Everything else due belongs to tenants at their share.
    expect((await h.store.downstream.queue.claim(new Date(h.clock.ms), limits)).deliveries).toEqual([]);
  });

  it("fills one claim with every tenant's due deliveries, not with endpoints of a tenant past its share", async () => {
    // `big` has 10 endpoints due before `small`'s one; a claim of 3 with a share of 2 takes 2 of big's and small's.
    await h.createTenant('big', { tier: 'scale' });
    for (let i = 0; i < 10; i += 1) await endpoint('big', { url: receiver.url('/big') });
    await h.setSubscriber('big', 'cus_big', 'warning', 'payment_failed');
    h.clock.advance(1_000);
    await h.createTenant('small', { tier: 'scale' });
    const small = await endpoint('small', { url: receiver.url('/small') });
    await h.setSubscriber('small', 'cus_small', 'warning', 'payment_failed');
    const { deliveries } = await h.store.downstream.queue.claim(new Date(h.clock.ms), {
      perEndpoint: 4,
      perTenant: 2,
      batch: 3,
      leaseMs: 60_000,
    });
    expect(deliveries.filter((d) => d.url.endsWith('/big'))).toHaveLength(2);
    expect(deliveries.filter((d) => d.endpointId === small.id)).toHaveLength(1);
  });

  it("delivers a tenant's message while three other tenants' receivers hang, each with a backlog", async () => {
    const stuck = await Receiver.start(() => 'hang');
    open.push(stuck);
    const crowded = await crowd(stuck);
    await deliverer.stop();
    // Attempts that outlast the test: the stuck receivers hold their slots throughout.
    deliverer = newDeliverer({ attemptTimeoutMs: 600_000, pollMs: 600_000 });
    deliverer.wake();
    // Each stuck tenant holds its share of the process's 64 slots, no more: 16 left free.
    await vi.waitFor(() => expect(stuck.open).toBe(48));
    const tenants = stuck.received.map((r) => String((JSON.parse(r.body) as Payload).tenant));
    for (const slug of crowded.keys()) expect(tenants.filter((t) => t === slug)).toHaveLength(16);

    h.clock.advance(1_000);
    await h.createTenant('calm', { tier: 'scale' });
    const calm = await endpoint('calm', { url: receiver.url('/calm') });
    await h.setSubscriber('calm', 'cus_calm', 'warning', 'payment_failed');
    // What a commit does: wake the deliverer once.
    deliverer.wake();
    await vi.waitFor(() => expect(receiver.received).toHaveLength(1), { timeout: 10_000 });
    await vi.waitFor(async () => expect((await messages('calm', calm.id))[0]).toMatchObject({ state: 'delivered' }));
    // ...while every stuck attempt is still under way: none has ended, none is recorded.
    expect(stuck.open).toBe(48);
    expect(stuck.received).toHaveLength(48);
    for (const [slug, ids] of crowded) for (const id of ids) expect(await attempts(slug, id)).toEqual([]);
  });

  it('refuses what a tier without downstream_webhooks asks, and URLs that are not https or point inside', async () => {
    await h.createTenant('small', { tier: 'starter' });
    const refused = await h.admin('POST', '/tenants/small/webhook-endpoints', { url: 'https://hooks.example.com/x' });
    expect([refused.statusCode, refused.json().code]).toEqual([403, 'downstream_webhooks_not_entitled']);
    expect((await h.admin('GET', '/tenants/small/webhook-endpoints')).json()).toEqual({ data: [] });
    // A tenant moved off the tier raises no event and is sent nothing.
    const ep = await endpoint('acme');
    expect((await h.admin('PATCH', '/tenants/acme', { tier: 'growth' })).statusCode).toBe(200);
    await h.setSubscriber('acme', 'cus_T', 'lockout', 'unpaid');
    expect(await deliverer.runOnce()).toBe(0);
    expect(await messages('acme', ep.id)).toEqual([]);
    expect((await h.admin('POST', `/tenants/acme/webhook-endpoints/${ep.id}/rotate-secret`, {})).statusCode).toBe(403);
    expect((await h.admin('PATCH', '/tenants/acme', { tier: 'scale' })).statusCode).toBe(200);

    const bad = async (url: string) => {
      const res = await h.admin('POST', '/tenants/acme/webhook-endpoints', { url });
      return [res.statusCode, (res.json() as { detail: string }).detail];
    };
    expect(await bad('http://hooks.example.com/x')).toEqual([
      400,
      'url: must be an https URL (http is allowed for loopback addresses only)',
    ]);
    expect(await bad('ftp://hooks.example.com/x')).toEqual([400, 'url: must be an https URL']);
    expect(await bad('https://user:pw@hooks.example.com/x')).toEqual([400, 'url: must not carry credentials']);
    expect((await bad('https://10.1.2.3/x'))[1]).toMatch(
      /10\.1\.2\.3 is a loopback, private, link-local or reserved address/,
    );
    expect((await bad('https://[fe80::1]/x'))[1]).toMatch(/reserved address/);
    expect((await bad('https://169.254.169.254/latest'))[1]).toMatch(/link-local/);
    const unknownType = await h.admin('POST', '/tenants/acme/webhook-endpoints', {
      url: 'https://hooks.example.com/x',
      event_types: ['subscriber.created'],
    });
    expect(unknownType.statusCode).toBe(400);
    const notFound = await h.admin('GET', `/tenants/acme/webhook-endpoints/ep_${'b'.repeat(24)}`);
    expect([notFound.statusCode, notFound.json().code]).toEqual([404, 'webhook_endpoint_not_found']);
  });

  it('refuses, at delivery, names that resolve to private, loopback or link-local addresses', async () => {
    const addresses: Record<string, string[]> = {
      'metadata.example': ['169.254.169.254'],
      'intranet.example': ['10.0.0.7'],
      'rebind.example': ['93.184.216.34', '127.0.0.1'],
      'mapped.example': ['::ffff:192.168.1.1'],
      'receiver.example': ['127.0.0.1'],
    };
    const resolve = async (host: string) =>
      (addresses[host] ?? []).map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    await deliverer.stop();
    // No network allowed: the loopback receiver itself is refused too.
    deliverer = newDeliverer({ resolve, allowedNetworks: [] });
    const eps: Record<string, string> = {};
    for (const host of Object.keys(addresses)) {
      const res = await h.admin('POST', '/tenants/acme/webhook-endpoints', {
        url: `https://${host}:${receiver.port}/x`,
      });
      expect(res.statusCode, res.body).toBe(201);
      eps[host] = (res.json() as { id: string }).id;
    }
    // Allowed when it was created, not where it is sent from now: a literal address is checked at delivery too.
    const literal = await endpoint('acme');
    await h.setSubscriber('acme', 'cus_X', 'warning', 'payment_failed');
    await deliverer.runOnce();
    expect(receiver.received).toHaveLength(0);
    const [refusedLiteral] = await attempts('acme', literal.id);
    expect(refusedLiteral).toMatchObject({ outcome: 'refused', status_code: null });
    expect(String(refusedLiteral?.error)).toMatch(/^refused: 127\.0\.0\.1 is a loopback/);
    for (const [host, id] of Object.entries(eps)) {
      const [a] = await attempts('acme', id);
      expect(a, host).toMatchObject({ outcome: 'refused', status_code: null });
      expect(String(a?.error), host).toMatch(
        new RegExp(
          `^refused: ${host.replace('.', '\\.')} resolves to .* is a loopback, private, link-local or reserved address`,
        ),
      );
    }
    expect(deliverer.counts.refused).toBe(6);
    await deliverer.stop();
    // An http endpoint is not sent once the operator no longer allows http.
    deliverer = newDeliverer({ allowHttpLoopback: false });
    h.clock.advance(60_000);
    await deliverer.runOnce();
    expect((await attempts('acme', literal.id))[0]?.error).toMatch(/^refused: http: URLs are not sent/);
  });

  it('prunes delivered and failed messages and old attempts after the retention, never one still waiting', async () => {
    receiver.behaviour = (n, r) =>
      (JSON.parse(r.body) as Payload).data.processor_customer_id === 'cus_P2' ? 500 : 200;
    const ep = await endpoint('acme');
    await h.setSubscriber('acme', 'cus_P1', 'warning', 'payment_failed');
    await h.setSubscriber('acme', 'cus_P2', 'warning', 'payment_failed');
    await deliverer.runOnce();
    const day = 86_400_000;
    h.clock.advance(31 * day);
    const retention = new Retention({
      maintenance: h.store.maintenance,
      stripeEventsDays: 30,
      historyDays: 0,
      downstreamDays: 30,
      now: h.clock.now,
      log: quiet,
    });
    // cus_P2's message is still pending (its retry is due): it stays, with its attempt's message.
    expect(await retention.runOnce()).toMatchObject({ webhook_events: 1, webhook_attempts: 2 });
    expect((await messages('acme', ep.id)).map((m) => [m.processor_customer_id, m.state])).toEqual([
      ['cus_P2', 'pending'],
    ]);
    expect(await attempts('acme', ep.id)).toEqual([]);
  });

  it('sends to a private network the operator allows', async () => {
    await deliverer.stop();
    const resolve = async () => [{ address: '127.0.0.1', family: 4 }];
    deliverer = newDeliverer({ resolve, allowedNetworks: ['127.0.0.1/32'] });
    const res = await h.admin('POST', '/tenants/acme/webhook-endpoints', {
      url: `http://localhost:${receiver.port}/x`,
    });
    expect(res.statusCode, res.body).toBe(201);
    await h.setSubscriber('acme', 'cus_L', 'warning', 'payment_failed');
    await deliverer.runOnce();
    expect(receiver.received).toHaveLength(1);
  });
});
