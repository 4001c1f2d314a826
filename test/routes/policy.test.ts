import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerBody } from '../../src/domain/lookup.js';
import { ReadModel } from '../../src/readmodel/index.js';
import { storeOver } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { PolicyClock } from '../../src/runtime/policy-clock.js';
import { availableEngines } from '../helpers/engines.js';
import type { Engine } from '../helpers/engines.js';
import { buildApp } from '../../src/http/app.js';
import { computeHmac, FakeClock, ADMIN_TOKEN, adminRequest } from '../helpers/harness.js';
import type { CreatedTenant } from '../helpers/harness.js';
import { socketRequest } from '../helpers/socket.js';
import {
  BASIL_API,
  LEGACY_API,
  event,
  hostedInvoiceUrl,
  invoice,
  paymentIds,
  subscription,
} from '../helpers/stripe-fixtures.js';
import type { ApiShape, StripeEventFixture } from '../helpers/stripe-fixtures.js';
import { signed } from '../helpers/stripe-fixtures.js';
import type { App } from '../../src/http/app.js';

/**
 * The tenant's dunning policy (docs/policy.md): grace, escalation, banner_only and monitor,
 * the answer's `lockout_at` and `pay_url`, scheduled lockouts recorded once, and policy
 * changes, through the signed webhook, the lookup on a socket and the admin API, on a fake
 * clock, on both engines and in both payload shapes.
 */
const engines = await availableEngines();
const SECRET = 'whsec_policy_tests_0123456789abcdef';
const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;

interface Setup {
  app: App;
  model: ReadModel;
  clock: FakeClock;
  store: Store;
  db: Awaited<ReturnType<Engine['open']>>['db'];
  cleanup(): Promise<void>;
}

async function setup(engine: Engine): Promise<Setup> {
  const opened = await engine.open();
  const clock = new FakeClock();
  const store = opened.store as Store;
  const model = await ReadModel.open(store.changes, { now: clock.now });
  const app = await buildApp({ store, model, adminToken: ADMIN_TOKEN, now: clock.now });
  await app.ready();
  return {
    app,
    model,
    clock,
    store,
    db: opened.db,
    cleanup: async () => {
      await app.close();
      await model.close();
      await opened.cleanup();
    },
  };
}

describe.each(engines)('Dunning policy ($name)', (engine) => {
  let s: Setup;
  let n = 0;
  const tenants = new Map<string, CreatedTenant>();
  const nextCustomer = () => `cus_pol${(n += 1)}`;
  const nowS = () => Math.floor(s.clock.ms / 1000);

  beforeAll(async () => {
    s = await setup(engine);
  });
  afterAll(() => s.cleanup());

  const admin = (method: string, url: string, body?: unknown) => adminRequest(s.app, method, url, body);

  async function tenant(slug: string, fields: Record<string, unknown> = {}): Promise<CreatedTenant> {
    const res = await admin('POST', '/tenants', { slug, card_update_url: 'https://acme.test/card', ...fields });
    expect(res.statusCode).toBe(201);
    const created = res.json() as CreatedTenant;
    expect((await admin('PATCH', `/tenants/${slug}`, { stripe_webhook_secret: SECRET })).statusCode).toBe(200);
    tenants.set(slug, created);
    return created;
  }

  async function send(slug: string, fixture: StripeEventFixture): Promise<void> {
    const { payload, signature } = signed(fixture, SECRET, nowS());
    const res = await s.app.inject({
      method: 'POST',
      url: `/webhooks/stripe/${slug}`,
      headers: { 'content-type': 'application/json; charset=utf-8', 'stripe-signature': signature },
      payload,
    });
    expect(res.statusCode).toBe(200);
  }

  /** The lookup on a real socket; `signed`: with the customer's valid hmac. */
  async function lookup(slug: string, customerId: string, opts: { signed?: boolean; hmac?: string } = {}) {
    const t = tenants.get(slug);
    if (!t) throw new Error(`no tenant ${slug}`);
    const hmac = opts.hmac ?? (opts.signed === false ? undefined : computeHmac(t.hmac_secret, customerId));
    const q = new URLSearchParams({ processor_customer_id: customerId, ...(hmac === undefined ? {} : { hmac }) });
    return socketRequest(s.app, 'GET', `/api/subscriber-status/${slug}?${q}`, {
      authorization: `Bearer ${t.publishable_key}`,
    });
  }

  async function subscriber(slug: string, customerId: string) {
    const res = await admin('GET', `/tenants/${slug}/subscribers/${customerId}`);
    expect(res.statusCode).toBe(200);
    return res.json() as {
      status: string;
      derived_status: string;
      lockout_at: string | null;
      pay_url: string | null;
      reason: string;
      episodes: {
        dunning_started_at: string | null;
        resolved_at: string | null;
        invoice: {
          id: string;
          amount_due: number;
          amount_remaining: number;
          currency: string;
          hosted_invoice_url: string;
        } | null;
      }[];
      history: {
        status: string;
        derived_status: string;
        source: string;
        policy_rule: string | null;
        occurred_at: string;
        lockout_at: string | null;
      }[];
    };
  }

  async function tenantId(slug: string): Promise<number> {
    const t = await s.store.tenants.getTenant(slug);
    if (!t) throw new Error('no tenant');
    return t.id;
  }

  const iso = (ms: number) => new Date(ms).toISOString().replace('.000Z', 'Z');
  /** What the instance's background work does, then the read model catching up with it. */
  async function recordDue(): Promise<number> {
    const n = await s.store.maintenance.recordDueLockouts(new Date(s.clock.ms), 100);
    await s.model.catchUp();
    return n;
  }
  async function sweep(batch = 500): Promise<void> {
    while ((await s.store.maintenance.sweepPolicy(new Date(s.clock.ms), batch)).pending);
    await s.model.catchUp();
  }

  describe.each([LEGACY_API, BASIL_API] as ApiShape[])('API %s', (api) => {
    const exhausted = (cus: string, ids = paymentIds()) =>
      event('invoice.payment_failed', invoice(cus, { api, ids, next_payment_attempt: null }), { created: nowS(), api });
    const soft = (cus: string, ids = paymentIds()) =>
      event('invoice.payment_failed', invoice(cus, { api, ids, next_payment_attempt: nowS() + 3 * 86_400 }), {
        created: nowS(),
        api,
      });
    const paid = (cus: string, ids: ReturnType<typeof paymentIds>) =>
      event('invoice.paid', invoice(cus, { api, ids, status: 'paid' }), { created: nowS(), api });
    const slug = (base: string) => `${base}-${api === LEGACY_API ? 'l' : 'b'}`;

    it("keeps today's behaviour by default, and names the invoice to pay only to a signed lookup", async () => {
      const t = slug('plain');
      await tenant(t);
      const cus = nextCustomer();
      const ids = paymentIds();
      await send(t, exhausted(cus, ids));
      const signedRes = await lookup(t, cus);
      expect(signedRes.statusCode).toBe(200);
      expect(signedRes.body).toBe(
        `{"status":"lockout","card_update_url":null,"entitlements":{"powered_by_watermark":true,"custom_domain":false,"downstream_webhooks":false},"pay_url":"${hostedInvoiceUrl(ids.invoice)}"}`,
      );
      const unsigned = await lookup(t, cus, { signed: false });
      expect(unsigned.json()).toEqual({ status: 'lockout', card_update_url: null, entitlements: expect.any(Object) });
      expect(unsigned.body).not.toContain('pay_url');
      expect((await lookup(t, cus, { hmac: 'a'.repeat(64) })).statusCode).toBe(403);
      const record = await subscriber(t, cus);
      expect(record).toMatchObject({
        status: 'lockout',
        derived_status: 'lockout',
        lockout_at: null,
        pay_url: hostedInvoiceUrl(ids.invoice),
      });
      // What Stripe told about money is kept with the episode.
      expect(record.episodes[0]).toMatchObject({
        dunning_started_at: new Date(s.clock.ms - (s.clock.ms % 1000)).toISOString(),
        resolved_at: null,
        invoice: {
          id: ids.invoice,
          amount_due: 2900,
          amount_remaining: 2900,
          currency: 'usd',
          hosted_invoice_url: hostedInvoiceUrl(ids.invoice),
        },
      });
      s.clock.advance(HOUR_MS);
      await send(t, paid(cus, ids));
      expect((await lookup(t, cus)).json()).toEqual({
        status: 'active',
        card_update_url: null,
        entitlements: expect.any(Object),
      });
      expect((await subscriber(t, cus)).episodes[0]).toMatchObject({
        resolved_at: new Date(s.clock.ms - (s.clock.ms % 1000)).toISOString(),
        invoice: { amount_remaining: 0 },
      });
    });

    it('grace: a lockout is answered warning with lockout_at until it ends, then lockout on the clock, recorded once', async () => {
      const t = slug('grace');
      await tenant(t, { policy: { grace_days: 3 } });
      const cus = nextCustomer();
      const ids = paymentIds();
      const startMs = s.clock.ms - (s.clock.ms % 1000);
      await send(t, exhausted(cus, ids));
      const endsAt = iso(startMs + 3 * DAY_MS);
      expect((await lookup(t, cus)).json()).toEqual({
        status: 'warning',
        card_update_url: 'https://acme.test/card',
        entitlements: expect.any(Object),
        lockout_at: endsAt,
        pay_url: hostedInvoiceUrl(ids.invoice),
      });
      expect(await subscriber(t, cus)).toMatchObject({
        status: 'warning',
        derived_status: 'lockout',
        lockout_at: new Date(startMs + 3 * DAY_MS).toISOString(),
      });

      s.clock.ms = startMs + 3 * DAY_MS - 1000;
      expect((await lookup(t, cus)).json().status).toBe('warning');
      await recordDue();
      expect((await subscriber(t, cus)).status).toBe('warning');
      // The instant the grace ends, every lookup answers lockout, before anything is written.
      s.clock.ms = startMs + 3 * DAY_MS;
      expect((await lookup(t, cus)).json()).toEqual({
        status: 'lockout',
        card_update_url: null,
        entitlements: expect.any(Object),
        pay_url: hostedInvoiceUrl(ids.invoice),
      });
      expect((await subscriber(t, cus)).status).toBe('warning');
      expect(await recordDue()).toBeGreaterThanOrEqual(1);
      await recordDue();
      const record = await subscriber(t, cus);
      expect(record).toMatchObject({ status: 'lockout', derived_status: 'lockout', lockout_at: null });
      expect(record.history.at(-1)).toMatchObject({
        status: 'lockout',
        source: 'policy',
        policy_rule: 'grace_ended',
        occurred_at: new Date(startMs + 3 * DAY_MS).toISOString(),
      });
      expect(record.history.filter((h) => h.source === 'policy')).toHaveLength(1);
    });

    it('escalation: a warning still unresolved is answered lockout when due; two instances racing record it once', async () => {
      const t = slug('escalate');
      await tenant(t, { tier: 'scale', policy: { escalate_after_days: 5 } });
      expect(
        (await admin('POST', `/tenants/${t}/webhook-endpoints`, { url: 'https://hooks.example.com/dunwall' }))
          .statusCode,
      ).toBe(201);
      const cus = nextCustomer();
      const startMs = s.clock.ms - (s.clock.ms % 1000);
      await send(t, soft(cus));
      expect((await lookup(t, cus)).json()).toMatchObject({ status: 'warning', lockout_at: iso(startMs + 5 * DAY_MS) });
      s.clock.ms = startMs + 5 * DAY_MS + 2000;
      expect((await lookup(t, cus)).json().status).toBe('lockout');
      const other = storeOver(s.db);
      const recorded = await Promise.all([
        s.store.maintenance.recordDueLockouts(new Date(s.clock.ms), 100),
        other.maintenance.recordDueLockouts(new Date(s.clock.ms), 100),
      ]);
      expect(recorded[0] + recorded[1]).toBeGreaterThanOrEqual(1);
      await s.model.catchUp();
      const record = await subscriber(t, cus);
      expect(record.history.filter((h) => h.source === 'policy')).toEqual([
        expect.objectContaining({
          status: 'lockout',
          derived_status: 'warning',
          policy_rule: 'escalated',
          occurred_at: new Date(startMs + 5 * DAY_MS).toISOString(),
        }),
      ]);
      const messages = await s.db.query<{ payload: string }>(
        `SELECT payload::text AS payload FROM webhook_events WHERE processor_customer_id = $1 ORDER BY sequence`,
        [cus],
      );
      const payloads = messages.map((m) => JSON.parse(m.payload) as { data: Record<string, unknown> });
      expect(payloads.map((p) => [p.data.to, p.data.lockout_at ?? null, p.data.cause])).toEqual([
        [
          'warning',
          iso(startMs + 5 * DAY_MS),
          { source: 'stripe', stripe_event_id: expect.any(String), stripe_event_type: 'invoice.payment_failed' },
        ],
        ['lockout', null, { source: 'policy', rule: 'escalated' }],
      ]);
    });

    it('banner_only and monitor apply at once to every answer, and a sweep records each change once', async () => {
      const t = slug('enforce');
      await tenant(t);
      const locked = nextCustomer();
      const warned = nextCustomer();
      await send(t, exhausted(locked));
      await send(t, soft(warned));
      expect((await admin('PATCH', `/tenants/${t}`, { policy: { enforcement: 'banner_only' } })).json().policy).toEqual(
        {
          enforcement: 'banner_only',
          grace_days: 0,
          escalate_after_days: null,
          notices: [],
        },
      );
      // Before the sweep has written anything, the lookup already answers by the new policy.
      expect((await lookup(t, locked)).json()).toMatchObject({
        status: 'warning',
        card_update_url: 'https://acme.test/card',
      });
      await sweep(1);
      expect(await subscriber(t, locked)).toMatchObject({ status: 'warning', derived_status: 'lockout' });
      expect((await subscriber(t, locked)).history.at(-1)).toMatchObject({
        source: 'policy',
        policy_rule: 'policy_changed',
        status: 'warning',
      });
      expect((await subscriber(t, warned)).history.filter((h) => h.source === 'policy')).toHaveLength(0);

      await admin('PATCH', `/tenants/${t}`, { policy: { enforcement: 'monitor' } });
      for (const cus of [locked, warned]) {
        expect((await lookup(t, cus)).body).toBe(
          '{"status":"active","card_update_url":null,"entitlements":{"powered_by_watermark":true,"custom_domain":false,"downstream_webhooks":false}}',
        );
      }
      await sweep();
      expect(await subscriber(t, locked)).toMatchObject({ status: 'active', derived_status: 'lockout', pay_url: null });
      expect((await admin('GET', `/tenants/${t}`)).json()).toMatchObject({
        subscriber_counts: { active: 2, warning: 0, lockout: 0 },
        derived_subscriber_counts: { active: 0, warning: 1, lockout: 1 },
      });
      expect(await subscriber(t, warned)).toMatchObject({ status: 'active', derived_status: 'warning' });

      await admin('PATCH', `/tenants/${t}`, { policy: { enforcement: 'gate' } });
      await sweep();
      expect((await lookup(t, locked)).json().status).toBe('lockout');
      expect((await subscriber(t, locked)).history.filter((h) => h.source === 'policy').map((h) => h.status)).toEqual([
        'warning',
        'active',
        'lockout',
      ]);
    });

    it('a policy change mid-grace: grace shortened gates at once; lengthened lifts the gate', async () => {
      const t = slug('midgrace');
      await tenant(t, { policy: { grace_days: 7 } });
      const cus = nextCustomer();
      const startMs = s.clock.ms - (s.clock.ms % 1000);
      await send(t, exhausted(cus));
      s.clock.ms = startMs + 2 * DAY_MS;
      expect((await lookup(t, cus)).json()).toMatchObject({ status: 'warning', lockout_at: iso(startMs + 7 * DAY_MS) });
      await admin('PATCH', `/tenants/${t}`, { policy: { grace_days: 1 } });
      await sweep();
      expect((await lookup(t, cus)).json().status).toBe('lockout');
      expect((await subscriber(t, cus)).history.at(-1)).toMatchObject({
        status: 'lockout',
        source: 'policy',
        policy_rule: 'policy_changed',
      });
      await admin('PATCH', `/tenants/${t}`, { policy: { grace_days: 5 } });
      await sweep();
      expect((await lookup(t, cus)).json()).toMatchObject({ status: 'warning', lockout_at: iso(startMs + 5 * DAY_MS) });
    });

    it('a restart across the transition time: a new read model answers lockout from the stored schedule', async () => {
      const t = slug('restart');
      await tenant(t, { policy: { grace_days: 2 } });
      const cus = nextCustomer();
      const startMs = s.clock.ms - (s.clock.ms % 1000);
      await send(t, exhausted(cus));
      const reloaded = await ReadModel.open(s.store.changes, { now: s.clock.now });
      try {
        const tenantAuth = reloaded.tenant(t);
        if (tenantAuth === null) throw new Error('tenant not loaded');
        const id = await tenantId(t);
        const status = reloaded.status(id, cus);
        expect(status).toBe('warning');
        const at = (ms: number) =>
          JSON.parse(answerBody(tenantAuth, 'warning', reloaded.extra(id, cus), true, ms).toString()) as {
            status: string;
            lockout_at?: string;
          };
        expect(at(startMs + 2 * DAY_MS - 1000)).toMatchObject({
          status: 'warning',
          lockout_at: iso(startMs + 2 * DAY_MS),
        });
        expect(at(startMs + 2 * DAY_MS)).toMatchObject({ status: 'lockout' });
      } finally {
        await reloaded.close();
      }
    });

    it('an override is answered as set, untouched by grace, but banner_only still applies to it', async () => {
      const t = slug('override');
      await tenant(t, { policy: { grace_days: 10 } });
      const cus = nextCustomer();
      expect((await admin('PUT', `/tenants/${t}/subscribers/${cus}`, { status: 'lockout' })).statusCode).toBe(200);
      expect((await lookup(t, cus)).json()).toEqual({
        status: 'lockout',
        card_update_url: null,
        entitlements: expect.any(Object),
      });
      await admin('PATCH', `/tenants/${t}`, { policy: { enforcement: 'banner_only' } });
      expect((await lookup(t, cus)).json().status).toBe('warning');
      await sweep();
      expect(await subscriber(t, cus)).toMatchObject({ status: 'warning', derived_status: 'lockout' });
      // PUT of the same status is still a success (it holds), whatever the answer.
      expect((await admin('PUT', `/tenants/${t}/subscribers/${cus}`, { status: 'lockout' })).statusCode).toBe(200);
    });
  });

  it("each instance's policy clock records what fell due and goes through a changed policy, once", async () => {
    await tenant('clocked', { policy: { grace_days: 1 } });
    const cus = nextCustomer();
    const startMs = s.clock.ms - (s.clock.ms % 1000);
    await send(
      'clocked',
      event('invoice.payment_failed', invoice(cus, { next_payment_attempt: null }), { created: nowS() }),
    );
    const log = { info: () => {}, warn: () => {} };
    const clocks = [
      new PolicyClock({ maintenance: s.store.maintenance, now: s.clock.now, log }),
      new PolicyClock({ maintenance: storeOver(s.db).maintenance, now: s.clock.now, log }),
    ];
    s.clock.ms = startMs + DAY_MS;
    await Promise.all(clocks.map((c) => c.tick()));
    expect((await subscriber('clocked', cus)).history.filter((h) => h.source === 'policy')).toEqual([
      expect.objectContaining({ status: 'lockout', policy_rule: 'grace_ended' }),
    ]);
    await admin('PATCH', '/tenants/clocked', { policy: { enforcement: 'banner_only' } });
    await Promise.all(clocks.map((c) => c.tick()));
    expect(clocks.reduce((n, c) => n + c.counts.subscribersReanswered, 0)).toBeGreaterThanOrEqual(1);
    const record = await subscriber('clocked', cus);
    expect(record).toMatchObject({ status: 'warning', derived_status: 'lockout' });
    expect(record.history.filter((h) => h.policy_rule === 'policy_changed')).toHaveLength(1);
    await Promise.all(clocks.map((c) => c.stop()));
  });

  it("an episode's dunning start is its current run's first failure, whatever the order its events arrive in", async () => {
    await tenant('runs');
    const cus = nextCustomer();
    const ids = paymentIds();
    const t = nowS();
    // Stripe's events are dated in the past: the clock is two days on.
    s.clock.advance(2 * DAY_MS);
    const failed = (created: number, id: string) =>
      event('invoice.payment_failed', invoice(cus, { ids, next_payment_attempt: created + 86_400 }), { created, id });
    const paidAt = (created: number) =>
      event('invoice.paid', invoice(cus, { ids, status: 'paid' }), { created, id: `evt_runs_paid_${created}` });
    // A failure and its payment in one second, a new failure a day later: the run began with the new one.
    await send('runs', failed(t, 'evt_runs_f1'));
    await send('runs', failed(t + 86_400, 'evt_runs_f2'));
    await send('runs', paidAt(t));
    expect((await subscriber('runs', cus)).episodes[0]?.dunning_started_at).toBe(
      new Date((t + 86_400) * 1000).toISOString(),
    );
    // A failure of the same run arriving late moves its start back to it.
    await send('runs', failed(t + 3_600, 'evt_runs_f3'));
    expect((await subscriber('runs', cus)).episodes[0]?.dunning_started_at).toBe(
      new Date((t + 3_600) * 1000).toISOString(),
    );
  });

  it('refuses a bad policy with a clear detail', async () => {
    await tenant('badpolicy');
    for (const [policy, detail] of [
      [{ grace_days: 61 }, 'grace_days'],
      [{ escalate_after_days: 0 }, 'escalate_after_days'],
      [{ enforcement: 'block' }, 'enforcement'],
      [{ grace: 3 }, 'grace'],
    ] as const) {
      const res = await admin('PATCH', '/tenants/badpolicy', { policy });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ code: 'invalid_request' });
      expect(res.json().detail).toContain(detail);
    }
  });

  it('a subscription update to past_due names its latest invoice as the one to pay', async () => {
    await tenant('subpay');
    const cus = nextCustomer();
    const sub = subscription(cus, 'past_due');
    await send(
      'subpay',
      event(
        'invoice.payment_failed',
        invoice(cus, {
          ids: { ...paymentIds(), subscription: sub.id as string, invoice: 'in_subpay1' },
          next_payment_attempt: nowS() + 86_400,
        }),
        { created: nowS() },
      ),
    );
    s.clock.advance(1000);
    await send(
      'subpay',
      event(
        'customer.subscription.updated',
        { ...sub, latest_invoice: 'in_subpay1' },
        { created: nowS(), previous: { status: 'active' } },
      ),
    );
    expect((await lookup('subpay', cus)).json()).toMatchObject({
      status: 'warning',
      pay_url: hostedInvoiceUrl('in_subpay1'),
    });
  });
});
