import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StripeIntakeCount } from '../../src/domain/stripe/intake.js';
import { StripeIntake } from '../../src/http/stripe-intake.js';
import type { ClaimedDelivery } from '../../src/store/index.js';
import { availableEngines } from '../helpers/engines.js';
import { harness, T0 } from '../helpers/harness.js';
import type { Harness } from '../helpers/harness.js';
import { socketRequest } from '../helpers/socket.js';
import { event, invoice, signed } from '../helpers/stripe-fixtures.js';
import type { StripeEventFixture } from '../helpers/stripe-fixtures.js';
import { deliver } from '../helpers/webhook.js';

/**
 * The Stripe intake counters (migration 016) as the webhook and the replay count them, and
 * GET /v1/health with the operator's /admin/v1/tenants/:slug/health over a constructed state:
 * deliveries received, refused for their signature (over a real socket) and for their mode,
 * events replayed, on three UTC days; downstream deliveries pending, parked, failed lately
 * and long ago; the read model's lag on the app's clock.
 */
const engines = await availableEngines();
const SECRET = 'whsec_health_tests_0123456789abcdef';
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const LOOPBACK_OK = { allowHttpLoopback: true, allowedNetworks: ['127.0.0.0/8'] };
const CLAIM = { perEndpoint: 10, perTenant: 10, batch: 10, leaseMs: 60_000 };

describe.each(engines)('Stripe intake and the tenant health ($name)', (engine) => {
  let h: Harness;
  let intake: StripeIntake;
  let readKey = '';
  let statusKey = '';
  let acmeId = 0;
  let noSecretId = 0;
  const flushed: StripeIntakeCount[][] = [];
  let n = 0;

  const nowS = () => Math.floor(h.clock.ms / 1000);
  const iso = (ms: number) => new Date(ms).toISOString();
  const live = (overrides: { livemode?: boolean } = {}): StripeEventFixture =>
    event('invoice.payment_failed', invoice(`cus_in${(n += 1)}`, { next_payment_attempt: null }), {
      created: nowS(),
      livemode: true,
      ...overrides,
    });
  const flush = () =>
    intake.flush(async (counts) => {
      flushed.push([...counts]);
      await h.store.stripe.addStripeIntake(counts);
    });
  const v1 = (key: string, url: string) =>
    h.app.inject({ method: 'GET', url: `/v1${url}`, headers: { authorization: `Bearer ${key}` } });

  /** A delivery over a real socket, signed with `secret` as Stripe signs, or with no signature at all. */
  function overSocket(slug: string, fixture: StripeEventFixture, secret: string | null) {
    const { payload, signature } = signed(fixture, secret ?? SECRET, nowS());
    const headers = {
      'content-type': 'application/json',
      ...(secret === null ? {} : { 'stripe-signature': signature }),
    };
    return socketRequest(h.app, 'POST', `/webhooks/stripe/${slug}`, headers, payload);
  }

  beforeAll(async () => {
    intake = new StripeIntake();
    // No poll of the change log on its own: the lag below is the app clock's, to the millisecond.
    h = await harness(engine, { stripeIntake: intake, downstream: LOOPBACK_OK }, { pollIntervalMs: 3_600_000 });
    h.clock.ms = T0 - 10 * DAY;
    await h.createTenant('acme', { livemode: true, tier: 'scale' });
    expect((await h.admin('PATCH', '/tenants/acme', { stripe_webhook_secret: SECRET })).statusCode).toBe(200);
    await h.createTenant('no-secret');
    await h.createTenant('shop', { tier: 'scale' });
    for (const [scopes, set] of [
      [['subscribers:read'], (k: string) => (readKey = k)],
      [['status:read', 'subscribers:write', 'settings:write'], (k: string) => (statusKey = k)],
    ] as const) {
      const res = await h.admin('POST', '/tenants/acme/keys', { name: scopes.join(' '), scopes });
      expect(res.statusCode, res.body).toBe(201);
      set((res.json() as { secret_key: string }).secret_key);
    }
    acmeId = (await h.store.tenants.getTenant('acme'))?.id ?? 0;
    noSecretId = (await h.store.tenants.getTenant('no-secret'))?.id ?? 0;
  });
  afterAll(() => h.close());

  const times: Record<string, number> = {};

  it('counts in memory what reaches the webhook and the replay, per tenant, UTC day and kind, and flushes one row for each', async () => {
    // 2025-12-22, outside the health's 7 days: one delivery, and a replay of two events.
    h.clock.ms = T0 - 10 * DAY + HOUR;
    expect((await deliver(h, 'acme', live(), SECRET)).json()).toEqual({ received: true, outcome: 'applied' });
    const early = await h.admin('POST', '/tenants/acme/stripe-events', { events: [live(), live()] });
    expect(early.json()).toMatchObject({ received: 2, dry_run: false });
    times.earlySync = h.clock.ms;
    await flush();
    expect(flushed.at(-1)).toEqual([
      { tenantId: acmeId, day: '2025-12-22', kind: 'received', count: 1, lastAt: new Date(times.earlySync) },
      { tenantId: acmeId, day: '2025-12-22', kind: 'replayed', count: 2, lastAt: new Date(times.earlySync) },
    ]);

    // 2025-12-30: two deliveries, one refused for its secret (over a socket).
    h.clock.ms = T0 - 2 * DAY + HOUR;
    for (let i = 0; i < 2; i += 1) {
      expect((await deliver(h, 'acme', live(), SECRET)).statusCode).toBe(200);
      h.clock.advance(60_000);
    }
    const wrong = await overSocket('acme', live(), 'whsec_not_the_secret_at_all_0000');
    expect([wrong.statusCode, wrong.json().code]).toEqual([400, 'invalid_signature']);

    // 2026-01-01: a delivery; a test event signed with the live mode's secret (refused for
    // its signature: the test mode has its own); one with no signature; one to a slug nobody
    // has; one to a tenant with no secret; a replay of three events, and a dry run that takes none.
    h.clock.ms = T0 + HOUR;
    expect((await deliver(h, 'acme', live(), SECRET)).statusCode).toBe(200);
    times.lastReceived = h.clock.ms;
    h.clock.advance(60_000);
    const otherMode = await overSocket('acme', live({ livemode: false }), SECRET);
    expect([otherMode.statusCode, otherMode.json().code]).toEqual([400, 'invalid_signature']);
    h.clock.advance(60_000);
    const unsigned = await overSocket('acme', live(), null);
    expect([unsigned.statusCode, unsigned.json().code]).toEqual([400, 'invalid_signature']);
    times.lastRefused = h.clock.ms;
    h.clock.advance(60_000);
    const keys = intake.size;
    const nobody = await overSocket('nobody', live(), SECRET);
    expect([nobody.statusCode, nobody.json().code]).toEqual([404, 'tenant_not_found']);
    expect(intake.size).toBe(keys);
    const noSecret = await overSocket('no-secret', live(), SECRET);
    expect([noSecret.statusCode, noSecret.json().code]).toEqual([400, 'invalid_signature']);
    h.clock.advance(60_000);
    expect(
      (await h.admin('POST', '/tenants/acme/stripe-events', { events: [live(), live(), live()] })).json(),
    ).toMatchObject({ received: 3 });
    times.lastSync = h.clock.ms;
    expect(
      (await h.admin('POST', '/tenants/acme/stripe-events', { events: [live(), live()], dry_run: true })).json(),
    ).toMatchObject({ dry_run: true });

    // Counted in memory only: until the flush, the store holds nothing of them.
    expect((await h.store.stripe.stripeIntake(acmeId, new Date(T0 - 7 * DAY))).days).toEqual([]);
    expect((await h.store.stripe.stripeIntake(noSecretId, new Date(T0 - 7 * DAY))).days).toEqual([]);
    // Eleven deliveries and five events since the first flush: one row per (tenant, day, kind).
    await flush();
    const rows = (flushed.at(-1) ?? []).map((c) => [c.tenantId, c.day, c.kind, c.count]);
    expect(rows.sort()).toEqual(
      [
        [acmeId, '2025-12-30', 'received', 2],
        [acmeId, '2025-12-30', 'refused_signature', 1],
        [acmeId, '2026-01-01', 'received', 1],
        [acmeId, '2026-01-01', 'refused_signature', 2],
        [acmeId, '2026-01-01', 'replayed', 3],
        [noSecretId, '2026-01-01', 'refused_signature', 1],
      ].sort(),
    );
    // Nothing left: a flush with nothing to write writes nothing.
    const before = flushed.length;
    await flush();
    expect(flushed.length).toBe(before);
  });

  it('answers the health of the tenant: 7 days of intake, the last of each, the read model, the deliveries', async () => {
    h.clock.ms = T0 + 2 * HOUR;
    await h.model.catchUp();
    h.clock.advance(1_234);
    const res = await v1(readKey, '/health');
    expect(res.statusCode, res.body).toBe(200);
    process.stdout.write(`${engine.name} GET /v1/health: ${res.body}\n`);
    expect(res.json()).toEqual({
      stripe: {
        since: '2025-12-26T00:00:00.000Z',
        received: 3,
        refused_signature: 3,
        refused_livemode: 0,
        replayed: 3,
        last_received_at: iso(times.lastReceived ?? 0),
        last_refused_at: iso(times.lastRefused ?? 0),
        last_sync_at: iso(times.lastSync ?? 0),
        days: [
          { day: '2025-12-30', received: 2, refused_signature: 1, refused_livemode: 0 },
          { day: '2026-01-01', received: 1, refused_signature: 2, refused_livemode: 0 },
        ],
      },
      // Set by the operator (beforeAll): the change names no key.
      stripe_webhook_secret: { set: true, changes: [{ at: iso(T0 - 10 * DAY), by: 'operator', key: null }] },
      read_model: { serving: true, lag_ms: 1_234 },
      deliveries: { pending: 0, oldest_pending_at: null, failed_7d: 0, endpoints: 0, disabled_endpoints: 0 },
      secret_keys: { seen_in_browser: [] },
      at: iso(T0 + 2 * HOUR + 1_234),
    });
    // The operator reads the same answer.
    const operator = await h.admin('GET', '/tenants/acme/health');
    expect(operator.statusCode, operator.body).toBe(200);
    expect(operator.json()).toEqual(res.json());
    // Another tenant's counts are its own; a tenant with nothing counted has no day and no last.
    const other = await h.admin('GET', '/tenants/shop/health');
    expect(other.json().stripe).toEqual({
      since: '2025-12-26T00:00:00.000Z',
      received: 0,
      refused_signature: 0,
      refused_livemode: 0,
      replayed: 0,
      last_received_at: null,
      last_refused_at: null,
      last_sync_at: null,
      days: [],
    });
    expect((await h.admin('GET', '/tenants/no-secret/health')).json().stripe).toMatchObject({
      refused_signature: 1,
      received: 0,
    });
  });

  it("counts the tenant's downstream deliveries: waiting (a disabled endpoint's too), failed in 7 days, endpoints", async () => {
    const endpoint = async (): Promise<string> => {
      const res = await h.admin('POST', '/tenants/shop/webhook-endpoints', { url: 'http://127.0.0.1:9/hook' });
      expect(res.statusCode, res.body).toBe(201);
      return (res.json() as { id: string }).id;
    };
    const change = async (customerId: string, status: string) => h.setSubscriber('shop', customerId, status);
    /** Claims the one message just written (one delivery per endpoint) and records how each attempt went. */
    const attempt = async (outcomes: Record<string, 'delivered' | 'gave_up'>, at: number) => {
      const claimed = await h.store.downstream.queue.claim(new Date(h.clock.ms), CLAIM);
      expect(claimed.deliveries.map((d) => d.endpointId).sort()).toEqual(Object.keys(outcomes).sort());
      for (const d of claimed.deliveries as ClaimedDelivery[]) {
        const outcome = outcomes[d.endpointId];
        const result = {
          statusCode: outcome === 'delivered' ? 200 : 500,
          latencyMs: 5,
          error: outcome === 'delivered' ? null : 'HTTP 500',
        };
        // A retry past the message's retry window: the delivery gives up.
        const done = await h.store.downstream.queue.complete(
          d,
          { ...result, outcome: outcome === 'delivered' ? 'delivered' : 'failed', retryAt: new Date(at + 100 * DAY) },
          new Date(at),
        );
        expect(done).toBe(outcome === 'delivered' ? 'recorded' : 'gave_up');
      }
    };

    h.clock.ms = T0 - 10 * DAY;
    const a = await endpoint();
    const b = await endpoint();
    await change('cus_old', 'warning');
    // Gave up 8 days ago: outside the 7 days.
    await attempt({ [a]: 'delivered', [b]: 'gave_up' }, T0 - 8 * DAY);
    h.clock.ms = T0 - DAY;
    await change('cus_1', 'warning');
    await attempt({ [a]: 'gave_up', [b]: 'delivered' }, h.clock.ms);
    await change('cus_2', 'lockout');
    await attempt({ [a]: 'delivered', [b]: 'gave_up' }, h.clock.ms);
    h.clock.ms = T0 - 12 * HOUR;
    await change('cus_3', 'warning');
    expect((await h.admin('PATCH', `/tenants/shop/webhook-endpoints/${b}`, { enabled: false })).statusCode).toBe(200);
    h.clock.ms = T0;
    await change('cus_4', 'lockout');

    h.clock.ms = T0 + 2 * HOUR;
    const res = await h.admin('GET', '/tenants/shop/health');
    expect(res.statusCode, res.body).toBe(200);
    // cus_3's message waits on both endpoints (parked on the disabled one), cus_4's on the enabled one only.
    expect(res.json().deliveries).toEqual({
      pending: 3,
      oldest_pending_at: iso(T0 - 12 * HOUR),
      failed_7d: 2,
      endpoints: 2,
      disabled_endpoints: 1,
    });
    // acme's endpoints are not shop's.
    expect((await v1(readKey, '/health')).json().deliveries).toMatchObject({ endpoints: 0, pending: 0 });
  });

  it('refuses a key without subscribers:read (403), a request without a key (401), an unknown tenant (404)', async () => {
    for (const path of ['/health', '/analytics/policy-impact']) {
      const res = await v1(statusKey, path);
      expect([res.statusCode, res.json().code], path).toEqual([403, 'insufficient_scope']);
      const none = await h.app.inject({ method: 'GET', url: `/v1${path}` });
      expect(none.statusCode, path).toBe(401);
    }
    const unknown = await h.admin('GET', '/tenants/nobody/health');
    expect([unknown.statusCode, unknown.json().code]).toEqual([404, 'tenant_not_found']);
    const noToken = await h.app.inject({ method: 'GET', url: '/admin/v1/tenants/acme/health' });
    expect(noToken.statusCode).toBe(401);
  });
});
