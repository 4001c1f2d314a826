import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { availableEngines } from '../helpers/engines.js';
import { harness } from '../helpers/harness.js';
import type { Harness } from '../helpers/harness.js';
import { Receiver } from '../helpers/receiver.js';
import {
  CUT_AFTER_MS,
  DownstreamDeliverer,
  MAX_IN_FLIGHT,
  MAX_IN_FLIGHT_PER_TENANT,
  RESERVED_SLOTS,
} from '../../src/downstream/index.js';

/**
 * Tenants whose receivers hang, more and more of them, each with 20 endpoints: a tenant with
 * nothing stuck is still delivered. Four such tenants held every slot of a process (4 x 16 =
 * 64) before the claim kept slots for tenants holding none.
 */

const engines = await availableEngines();
const quiet = { info() {}, warn() {} };
const LOOPBACK_OK = { allowHttpLoopback: true, allowedNetworks: ['127.0.0.0/8'] };
const ENDPOINTS_PER_TENANT = 20;

describe.each(engines)('delivery slots at any number of stuck tenants ($name)', (engine) => {
  let h: Harness;
  let healthy: Receiver;
  let stuck: Receiver;
  let deliverer: DownstreamDeliverer;

  beforeEach(async () => {
    h = await harness(engine, { downstream: LOOPBACK_OK }, {}, { fromTemplate: true });
    healthy = await Receiver.start();
    stuck = await Receiver.start(() => 'hang');
    // Attempts that outlast the test: a stuck receiver's slot frees only if the deliverer cuts it.
    deliverer = new DownstreamDeliverer({
      queue: h.store.downstream.queue,
      now: h.clock.now,
      random: () => 0.5,
      attemptTimeoutMs: 600_000,
      pollMs: 600_000,
      concurrencyPerEndpoint: 4,
      log: quiet,
      ...LOOPBACK_OK,
    });
  });

  afterEach(async () => {
    await deliverer.stop();
    await stuck.close();
    await healthy.close();
    await h.close();
  });

  async function endpoint(slug: string, url: string): Promise<string> {
    const res = await h.admin('POST', `/tenants/${slug}/webhook-endpoints`, { url });
    expect(res.statusCode, res.body).toBe(201);
    return (res.json() as { id: string }).id;
  }

  /** A tenant whose 20 endpoints all hang, with one message queued to each. */
  async function stuckTenant(slug: string): Promise<string[]> {
    await h.createTenant(slug, { tier: 'scale' });
    const ids: string[] = [];
    for (let i = 0; i < ENDPOINTS_PER_TENANT; i += 1) ids.push(await endpoint(slug, stuck.url(`/${slug}`)));
    await h.setSubscriber(slug, `cus_${slug}`, 'warning', 'payment_failed');
    return ids;
  }

  async function state(slug: string, id: string): Promise<unknown> {
    const res = await h.admin('GET', `/tenants/${slug}/webhook-endpoints/${id}/messages`);
    expect(res.statusCode, res.body).toBe(200);
    return (res.json() as { data: { state: string }[] }).data[0]?.state;
  }

  it('delivers a tenant with nothing stuck while 4, 8, 16, then enough tenants to fill every slot, have receivers that hang', async () => {
    await h.createTenant('calm', { tier: 'scale' });
    const calm = await endpoint('calm', healthy.url('/calm'));
    /** Attempts the stuck receivers hold: the first three tenants fill the shared slots, each later one takes one reserved slot. */
    const held = (tenants: number) =>
      Math.min(MAX_IN_FLIGHT, Math.min(tenants, 3) * MAX_IN_FLIGHT_PER_TENANT + Math.max(tenants - 3, 0));
    // 4: what held every slot of the process before; then more, up to as many as fill the reserve too.
    const full = 3 + RESERVED_SLOTS;
    expect(held(full)).toBe(MAX_IN_FLIGHT);
    let tenants = 0;
    const endpoints = new Map<string, string[]>();
    for (const target of [4, 8, 16, full]) {
      while (tenants < target) {
        tenants += 1;
        endpoints.set(`stuck${tenants}`, await stuckTenant(`stuck${tenants}`));
        deliverer.wake();
      }
      await vi.waitFor(() => expect(stuck.open).toBe(held(tenants)), { timeout: 30_000 });

      h.clock.advance(1_000);
      const sent = healthy.received.length;
      await h.setSubscriber('calm', `cus_calm_${target}`, 'warning', 'payment_failed');
      deliverer.wake();
      if (held(tenants) === MAX_IN_FLIGHT) {
        // Every slot is a stuck tenant's: the calm tenant's message waits until the attempt
        // under way longest, of a tenant holding the most, has run long enough to be cut.
        await vi.waitFor(() => expect(deliverer.waitingSeen).toBeGreaterThan(0));
        expect(deliverer.cuts).toBe(0);
        expect(healthy.received).toHaveLength(sent);
        h.clock.advance(CUT_AFTER_MS);
        deliverer.wake();
      }
      await vi.waitFor(() => expect(healthy.received).toHaveLength(sent + 1), { timeout: 30_000 });
      await vi.waitFor(async () => expect(await state('calm', calm)).toBe('delivered'));
    }
    // One stuck attempt was cut, recorded as failed with the reason, and is retried later.
    expect(stuck.open).toBe(MAX_IN_FLIGHT - 1);
    expect(deliverer.cuts).toBe(1);
    expect(deliverer.counts.failed).toBe(1);
    // The cut one is the first tenant's (it holds the most, and started first), and says why.
    const recorded: { outcome: string; error: string | null }[] = [];
    for (const id of endpoints.get('stuck1') ?? []) {
      const res = await h.admin('GET', `/tenants/stuck1/webhook-endpoints/${id}/attempts`);
      recorded.push(...(res.json() as { data: { outcome: string; error: string | null }[] }).data);
    }
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({
      outcome: 'failed',
      error: expect.stringMatching(/^cut after \d+ s without an answer/) as unknown,
    });
  });
});
