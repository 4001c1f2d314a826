import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toStripeEventInput } from '../../src/services/stripe-events.js';
import { availableEngines } from '../helpers/engines.js';
import { harness, T0 } from '../helpers/harness.js';
import type { Harness } from '../helpers/harness.js';
import { event, invoice, paymentIds } from '../helpers/stripe-fixtures.js';

/**
 * GET /v1/analytics/recovery and the operator's /admin/v1/tenants/:slug/analytics/recovery:
 * one route file, the same figures for both, `subscribers:read` for a tenant key, and every
 * bad parameter named. The figures themselves are checked in test/store/analytics.test.ts.
 */
const engines = await availableEngines();
const DAY = 86_400;
const T = Date.parse('2026-01-05T00:00:00Z') / 1000;

describe.each(engines)('recovery analytics routes ($name)', (engine) => {
  let h: Harness;
  let readKey = '';
  let statusKey = '';

  const v1 = (key: string, url: string) =>
    h.app.inject({ method: 'GET', url: `/v1${url}`, headers: { authorization: `Bearer ${key}` } });

  beforeAll(async () => {
    h = await harness(engine);
    await h.createTenant('acme');
    const tenant = await h.store.tenants.getTenant('acme');
    if (tenant === null) throw new Error('tenant');
    // One run recovered after two days, one still open.
    const paid = paymentIds();
    const fixtures = [
      event('invoice.payment_failed', invoice('cus_paid', { ids: paid, next_payment_attempt: T + 3 * DAY }), {
        created: T,
      }),
      event('invoice.paid', invoice('cus_paid', { ids: paid, status: 'paid' }), { created: T + 2 * DAY }),
      event('invoice.payment_failed', invoice('cus_open', { next_payment_attempt: null }), { created: T + DAY }),
    ];
    for (const f of fixtures) {
      const input = toStripeEventInput(f);
      if (input === null) throw new Error('relevant');
      await h.store.stripe.recordStripeEvent(tenant.id, input, new Date(f.created * 1000));
    }
    for (const [scopes, set] of [
      [['subscribers:read'], (k: string) => (readKey = k)],
      [['status:read'], (k: string) => (statusKey = k)],
    ] as const) {
      const res = await h.admin('POST', '/tenants/acme/keys', { name: scopes.join(' '), scopes });
      expect(res.statusCode, res.body).toBe(201);
      set((res.json() as { secret_key: string }).secret_key);
    }
  });
  afterAll(() => h.close());

  const query = '?from=2026-01-01&to=2026-02-01T00:00:00Z&granularity=month';

  it('answers the operator and a tenant key with subscribers:read the same figures', async () => {
    const operator = await h.admin('GET', `/tenants/acme/analytics/recovery${query}`);
    expect(operator.statusCode, operator.body).toBe(200);
    const body = operator.json();
    process.stdout.write(`${engine.name} route: ${operator.body}\n`);
    expect(body).toEqual({
      from: '2026-01-01T00:00:00.000Z',
      to: '2026-02-01T00:00:00.000Z',
      granularity: 'month',
      at_risk: { count: 1, amounts: [{ currency: 'usd', amount: 2900 }] },
      recovered: {
        ended: 1,
        recovered: 1,
        rate: 1,
        amounts: [{ currency: 'usd', amount: 2900 }],
        periods: [
          {
            period_start: '2026-01-01T00:00:00.000Z',
            ended: 1,
            recovered: 1,
            rate: 1,
            amounts: [{ currency: 'usd', amount: 2900 }],
          },
        ],
      },
      time_to_recover: { median_seconds: 2 * DAY, p90_seconds: 2 * DAY },
      outcomes: { paid: 1, voided: 0, subscription_ended: 0, removed: 0, open: 1 },
      decline_mix: { soft: 1, authentication: 0, exhausted: 1, hard: 0 },
      cohorts: [{ month: '2026-01-01T00:00:00.000Z', started: 2, recovered: 1, rate: 0.5 }],
      // No pay or card link was opened.
      links: {
        opened: 0,
        recovered_after_open: 0,
        median_seconds_to_payment: null,
        periods: [
          {
            period_start: '2026-01-01T00:00:00.000Z',
            opened: 0,
            recovered_after_open: 0,
            median_seconds_to_payment: null,
          },
        ],
      },
    });
    const tenant = await v1(readKey, `/analytics/recovery${query}`);
    expect(tenant.statusCode, tenant.body).toBe(200);
    expect(tenant.json()).toEqual(body);
  });

  it('defaults to the 365 days before now, by month', async () => {
    const res = await v1(readKey, '/analytics/recovery');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({
      to: new Date(T0).toISOString(),
      from: new Date(T0 - 365 * DAY * 1000).toISOString(),
      granularity: 'month',
    });
    // 2025-01-01 to 2026-01-01: twelve months, the last one's end excluded.
    const periods = res.json().recovered.periods as { period_start: string }[];
    expect(periods.map((p) => p.period_start.slice(0, 7))).toEqual(
      [...Array(12).keys()].map((m) => `2025-${String(m + 1).padStart(2, '0')}`),
    );
  });

  it('refuses a key without subscribers:read (403 insufficient_scope) and a request without a key', async () => {
    const res = await v1(statusKey, `/analytics/recovery${query}`);
    expect(res.statusCode).toBe(403);
    expect(res.json().code).toBe('insufficient_scope');
    const none = await h.app.inject({ method: 'GET', url: `/v1/analytics/recovery${query}` });
    expect(none.statusCode).toBe(401);
  });

  it.each([
    ['from=2026-02-30', 'from'],
    ['from=yesterday', 'from'],
    ['to=2026-01-01T12:00:00', 'to'],
    ['granularity=day', 'granularity'],
    ['from=2026-02-01&to=2026-01-01', 'from'],
    ['from=2023-01-01&to=2026-01-02', 'from'],
    ['limit=5', 'limit'],
  ])('answers 400 invalid_request naming the parameter for %s', async (q, name) => {
    const res = await v1(readKey, `/analytics/recovery?${q}`);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().code).toBe('invalid_request');
    expect(res.json().detail).toContain(name);
  });
});
