import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReadModel } from '../../src/readmodel/index.js';
import { storeOver } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { PolicyClock } from '../../src/runtime/policy-clock.js';
import { createMetrics } from '../../src/metrics/index.js';
import { buildApp } from '../../src/http/app.js';
import type { App } from '../../src/http/app.js';
import { availableEngines } from '../helpers/engines.js';
import type { Engine } from '../helpers/engines.js';
import { ADMIN_TOKEN, FakeClock, adminRequest } from '../helpers/harness.js';
import { socketRequest } from '../helpers/socket.js';
import { event, invoice, paymentIds, signed } from '../helpers/stripe-fixtures.js';

/**
 * Scheduled lockouts are recorded on the database's clock: of three instances on one store,
 * the one whose clock runs 90 s ahead records nothing before the database's `now()` reaches
 * `lockout_at`, and says that its clock is off (log, metric, /readyz), on both engines.
 */
const engines = await availableEngines();
const SECRET = 'whsec_clock_tests_0123456789abcdef';
const DAY_MS = 86_400_000;
const AHEAD_MS = 90_000;

interface Setup {
  app: App;
  model: ReadModel;
  clock: FakeClock;
  db: Awaited<ReturnType<Engine['open']>>['db'];
  stores: Store[];
  fast: PolicyClock;
  warnings: { fields: unknown; message: string }[];
  cleanup(): Promise<void>;
}

describe.each(engines)('Time-driven changes on the database clock ($name)', (engine) => {
  let s: Setup;

  beforeAll(async () => {
    const opened = await engine.open();
    const clock = new FakeClock();
    const store = opened.store as Store;
    const warnings: Setup['warnings'] = [];
    // The fast instance: its own clock (the real one moved ahead), its own store on the same database.
    const fast = new PolicyClock({
      maintenance: storeOver(opened.db).maintenance,
      now: () => Date.now() + AHEAD_MS,
      log: {
        info: () => {},
        warn: (fields: unknown, message?: string) => void warnings.push({ fields, message: message ?? '' }),
      },
    });
    const model = await ReadModel.open(store.changes, { now: clock.now });
    const app = await buildApp({ store, model, adminToken: ADMIN_TOKEN, now: clock.now, clockSkew: () => fast.skew() });
    await app.ready();
    s = {
      app,
      model,
      clock,
      db: opened.db,
      stores: [store, storeOver(opened.db)],
      fast,
      warnings,
      cleanup: async () => {
        await fast.stop();
        await app.close();
        await model.close();
        await opened.cleanup();
      },
    };
    expect((await adminRequest(app, 'POST', '/tenants', { slug: 'clock', policy: { grace_days: 1 } })).statusCode).toBe(
      201,
    );
    expect((await adminRequest(app, 'PATCH', '/tenants/clock', { stripe_webhook_secret: SECRET })).statusCode).toBe(
      200,
    );
  });
  afterAll(() => s.cleanup());

  /** A payment failure with no retry left, received at `receivedMs`: its grace (one day) ends a day later. */
  async function failedAt(customerId: string, receivedMs: number): Promise<string> {
    s.clock.ms = receivedMs;
    const created = Math.floor(receivedMs / 1000);
    const { payload, signature } = signed(
      event('invoice.payment_failed', invoice(customerId, { ids: paymentIds(), next_payment_attempt: null }), {
        created,
      }),
      SECRET,
      created,
    );
    const res = await s.app.inject({
      method: 'POST',
      url: '/webhooks/stripe/clock',
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      payload,
    });
    expect(res.statusCode).toBe(200);
    const record = (await adminRequest(s.app, 'GET', `/tenants/clock/subscribers/${customerId}`)).json() as {
      status: string;
      lockout_at: string;
    };
    expect(record.status).toBe('warning');
    return record.lockout_at;
  }

  async function policyEntries(customerId: string): Promise<{ status: string; policy_rule: string | null }[]> {
    const res = await adminRequest(s.app, 'GET', `/tenants/clock/subscribers/${customerId}`);
    const body = res.json() as {
      status: string;
      history: { source: string; status: string; policy_rule: string | null }[];
    };
    return body.history.filter((h) => h.source === 'policy');
  }

  it('an instance whose clock runs 90 s ahead records no lockout before the database reaches it', async () => {
    // The grace ends 60 s from now by the database's clock: 30 s behind the fast instance's.
    const lockoutAt = await failedAt('cus_clock_early', Date.now() - DAY_MS + 60_000);
    const [before] = await s.db.query<{ now: Date }>('SELECT now() AS now');
    expect(Date.parse(lockoutAt)).toBeGreaterThan(new Date(before?.now ?? 0).getTime());
    expect(Date.parse(lockoutAt)).toBeLessThan(Date.now() + AHEAD_MS);

    await s.fast.tick();
    expect(s.fast.counts.lockoutsRecorded).toBe(0);
    expect(await s.stores[1]?.maintenance.recordDueLockouts(new Date(Date.now() + AHEAD_MS), 100)).toBe(0);
    expect(await s.stores[1]?.maintenance.sweepPolicy(new Date(Date.now() + AHEAD_MS), 100)).toMatchObject({ seen: 0 });
    expect(await policyEntries('cus_clock_early')).toEqual([]);
    expect((await adminRequest(s.app, 'GET', '/tenants/clock/subscribers/cus_clock_early')).json()).toMatchObject({
      status: 'warning',
      lockout_at: lockoutAt,
    });
  });

  it('a lockout the database has reached is recorded once, as of its time, whichever instance ticks', async () => {
    const lockoutAt = await failedAt('cus_clock_due', Date.now() - DAY_MS - 1_000);
    await Promise.all([s.fast.tick(), ...s.stores.map((store) => store.maintenance.recordDueLockouts(null, 100))]);
    expect(await policyEntries('cus_clock_due')).toEqual([
      expect.objectContaining({ status: 'lockout', policy_rule: 'grace_ended' }),
    ]);
    const history = (
      (await adminRequest(s.app, 'GET', '/tenants/clock/subscribers/cus_clock_due')).json() as {
        history: { source: string; occurred_at: string }[];
      }
    ).history;
    expect(history.find((h) => h.source === 'policy')?.occurred_at).toBe(new Date(lockoutAt).toISOString());
    // The early one is still not recorded.
    expect(await policyEntries('cus_clock_early')).toEqual([]);
  });

  it('the fast instance says its clock is off: in its log, its metric and /readyz, which stays ready', async () => {
    const skew = await s.fast.measureSkew();
    expect(skew.ok).toBe(false);
    expect(skew.skewSeconds).toBeGreaterThan(AHEAD_MS / 1000 - 5);
    expect(skew.skewSeconds).toBeLessThan(AHEAD_MS / 1000 + 5);
    expect(skew.boundSeconds).toBe(2);
    // Logged once when the bound was crossed, not at every measure.
    expect(s.warnings.filter((w) => w.message.startsWith('clock:'))).toHaveLength(1);
    expect(s.warnings[0]?.fields).toMatchObject({ skew_seconds: expect.any(Number), bound_seconds: 2 });

    const ready = await socketRequest(s.app, 'GET', '/readyz');
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toMatchObject({
      status: 'ok',
      clock: { skew_seconds: skew.skewSeconds, bound_seconds: 2, within_bound: false },
    });

    const metrics = createMetrics();
    metrics.observeGauge('dunwall_clock_skew_seconds', 'skew', () => s.fast.skew().skewSeconds);
    const text = await metrics.registry.metrics();
    const line = text.split('\n').find((l) => l.startsWith('dunwall_clock_skew_seconds '));
    expect(Number(line?.split(' ')[1])).toBe(skew.skewSeconds);
  });

  it('an instance on time is within the bound', async () => {
    const onTime = new PolicyClock({
      maintenance: (s.stores[0] as Store).maintenance,
      log: { info: () => {}, warn: () => {} },
    });
    const skew = await onTime.measureSkew();
    expect(skew.ok).toBe(true);
    expect(Math.abs(skew.skewSeconds ?? Infinity)).toBeLessThan(2);
  });
});
