import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toStripeEventInput } from '../../src/services/stripe-events.js';
import { availableEngines } from '../helpers/engines.js';
import { harness, T0 } from '../helpers/harness.js';
import type { Harness } from '../helpers/harness.js';
import { event, invoice, paymentIds } from '../helpers/stripe-fixtures.js';

/**
 * GET /v1/analytics/policy-impact and the operator's
 * /admin/v1/tenants/:slug/analytics/policy-impact: the same answer for both, the tenant's
 * current policy for every field not given, `none` for no escalation, and every bad
 * parameter named. The counts themselves are checked in test/store/policy-impact.test.ts.
 */
const engines = await availableEngines();
const DAY = 86_400;
const NOW_S = T0 / 1000;

describe.each(engines)('policy impact routes ($name)', (engine) => {
  let h: Harness;
  let readKey = '';

  const v1 = (url: string) =>
    h.app.inject({ method: 'GET', url: `/v1${url}`, headers: { authorization: `Bearer ${readKey}` } });

  beforeAll(async () => {
    h = await harness(engine);
    await h.createTenant('acme', { policy: { grace_days: 3 } });
    const tenant = await h.store.tenants.getTenant('acme');
    if (tenant === null) throw new Error('tenant');
    // Locked out 10 days ago (past a 3-day grace), locked out a day ago (in it), a warning 30
    // days ago, and an override to lockout.
    const fixtures = [
      event('invoice.payment_failed', invoice('cus_old_lock', { ids: paymentIds(), next_payment_attempt: null }), {
        created: NOW_S - 10 * DAY,
      }),
      event('invoice.payment_failed', invoice('cus_new_lock', { ids: paymentIds(), next_payment_attempt: null }), {
        created: NOW_S - DAY,
      }),
      event('invoice.payment_failed', invoice('cus_warn', { ids: paymentIds(), next_payment_attempt: NOW_S }), {
        created: NOW_S - 30 * DAY,
      }),
    ];
    for (const f of fixtures) {
      const input = toStripeEventInput(f);
      if (input === null) throw new Error('relevant');
      expect((await h.store.stripe.recordStripeEvent(tenant.id, input, new Date(f.created * 1000))).outcome).toBe(
        'applied',
      );
    }
    await h.setSubscriber('acme', 'cus_override', 'lockout');
    const res = await h.admin('POST', '/tenants/acme/keys', { name: 'console', scopes: ['subscribers:read'] });
    expect(res.statusCode, res.body).toBe(201);
    readKey = (res.json() as { secret_key: string }).secret_key;
  });
  afterAll(() => h.close());

  it('answers the operator and a tenant key with subscribers:read the same impact', async () => {
    const query = '?grace_days=0&escalate_after_days=20';
    const operator = await h.admin('GET', `/tenants/acme/analytics/policy-impact${query}`);
    expect(operator.statusCode, operator.body).toBe(200);
    process.stdout.write(`${engine.name} GET /v1/analytics/policy-impact${query}: ${operator.body}\n`);
    expect(operator.json()).toEqual({
      policy: { enforcement: 'gate', grace_days: 0, escalate_after_days: 20 },
      current: { warning: 2, lockout: 2 },
      proposed: { warning: 0, lockout: 4 },
      newly_gated: 2,
      released: 0,
      at: new Date(T0).toISOString(),
    });
    const tenant = await v1(`/analytics/policy-impact${query}`);
    expect(tenant.statusCode, tenant.body).toBe(200);
    expect(tenant.json()).toEqual(operator.json());
  });

  it("keeps the tenant's current policy for what is not given; none is no escalation", async () => {
    expect((await v1('/analytics/policy-impact')).json()).toMatchObject({
      policy: { enforcement: 'gate', grace_days: 3, escalate_after_days: null },
      current: { warning: 2, lockout: 2 },
      proposed: { warning: 2, lockout: 2 },
      newly_gated: 0,
      released: 0,
    });
    expect(
      (await v1('/analytics/policy-impact?enforcement=banner_only&escalate_after_days=none')).json(),
    ).toMatchObject({
      policy: { enforcement: 'banner_only', grace_days: 3, escalate_after_days: null },
      proposed: { warning: 4, lockout: 0 },
      released: 2,
    });
    expect(
      (await v1('/analytics/policy-impact?enforcement=monitor&grace_days=60&escalate_after_days=120')).json(),
    ).toMatchObject({
      policy: { enforcement: 'monitor', grace_days: 60, escalate_after_days: 120 },
      proposed: { warning: 0, lockout: 0 },
    });
  });

  it.each([
    ['enforcement=strict', 'enforcement'],
    ['grace_days=61', 'grace_days'],
    ['grace_days=-1', 'grace_days'],
    ['grace_days=1.5', 'grace_days'],
    ['grace_days=', 'grace_days'],
    ['escalate_after_days=0', 'escalate_after_days'],
    ['escalate_after_days=121', 'escalate_after_days'],
    ['escalate_after_days=never', 'escalate_after_days'],
    ['escalate_after_days=null', 'escalate_after_days'],
    ['grace=3', 'grace'],
  ])('answers 400 invalid_request naming the parameter for %s', async (q, name) => {
    const res = await v1(`/analytics/policy-impact?${q}`);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().code).toBe('invalid_request');
    expect(res.json().detail).toMatch(new RegExp(`^${name}: `));
  });
});
