import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableEngines } from '../helpers/engines.js';
import { harness } from '../helpers/harness.js';
import type { CreatedTenant, Harness } from '../helpers/harness.js';
import { BASIL_API, charge, event, invoice, paymentIds, paymentIntent, signed } from '../helpers/stripe-fixtures.js';
import type { StripeEventFixture } from '../helpers/stripe-fixtures.js';
import { deliver } from '../helpers/webhook.js';
import { Capture } from '../helpers/log-capture.js';
import { createLogger } from '../../src/runtime/logger.js';

const engines = await availableEngines();
const SECRET = 'whsec_test_primary_0123456789abcdef';
const SECRET_2 = 'whsec_test_rotated_0123456789abcdef';

describe.each(engines)('Stripe webhook ($name)', (engine) => {
  let h: Harness;
  let acme: CreatedTenant;
  let n = 0;
  const nextCustomer = () => `cus_hook${(n += 1)}`;
  const nowS = () => Math.floor(h.clock.ms / 1000);

  beforeAll(async () => {
    h = await harness(engine);
    acme = await h.createTenant('acme', { card_update_url: 'https://acme.test/card' });
    await h.admin('PATCH', '/tenants/acme', { stripe_webhook_secret: SECRET });
    await h.createTenant('no-secret');
  });
  afterAll(() => h.close());

  async function send(fixture: StripeEventFixture, secret = SECRET) {
    const res = await deliver(h, 'acme', fixture, secret);
    return { status: res.statusCode, body: res.json() as { outcome?: string; code?: string } };
  }
  async function statusOf(customerId: string): Promise<string | null> {
    const res = await h.lookup('acme', { key: acme.publishable_key, customerId });
    return res.body === '{"status":"active"}' ? null : (res.json().status as string);
  }

  it('acknowledges a redelivery and changes nothing', async () => {
    const c = nextCustomer();
    const failed = event('invoice.payment_failed', invoice(c, { next_payment_attempt: null }), { created: nowS() });
    expect((await send(failed)).body.outcome).toBe('applied');
    h.clock.advance(1_000);
    await h.setSubscriber('acme', c, 'active', 'manual');
    h.clock.advance(60_000);
    expect(await send(failed)).toEqual({ status: 200, body: { received: true, outcome: 'duplicate' } });
    expect(await statusOf(c)).toBe('active');
  });

  it('acknowledges and ignores irrelevant event types, and events without a customer', async () => {
    expect(await send(event('product.created', { id: 'prod_1', object: 'product' }, { created: nowS() }))).toEqual({
      status: 200,
      body: { received: true, outcome: 'irrelevant' },
    });
    const guest = await send(
      event('charge.failed', charge(null, { outcome_reason: 'stolen_card' }), { created: nowS() }),
    );
    expect(guest).toEqual({ status: 200, body: { received: true, outcome: 'ignored' } });
  });

  it('400 invalid_signature: a wrong secret, a tampered body, a missing header, a stale timestamp', async () => {
    const fixture = event('charge.failed', charge(nextCustomer(), { outcome_reason: 'stolen_card' }), {
      created: nowS(),
    });
    const wrong = await deliver(h, 'acme', fixture, 'whsec_not_the_secret_at_all_0000');
    expect(wrong.statusCode).toBe(400);
    expect(wrong.json().code).toBe('invalid_signature');

    const { signature } = signed(fixture, SECRET, nowS());
    const tampered = await h.app.inject({
      method: 'POST',
      url: '/webhooks/stripe/acme',
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      payload: JSON.stringify({ ...fixture, type: 'invoice.paid' }, null, 2),
    });
    expect(tampered.statusCode).toBe(400);

    const missing = await h.app.inject({
      method: 'POST',
      url: '/webhooks/stripe/acme',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify(fixture),
    });
    expect(missing.json().code).toBe('invalid_signature');

    const stale = await deliver(h, 'acme', fixture, SECRET, { timestampS: nowS() - 301 });
    expect(stale.statusCode).toBe(400);
    const justInTime = await deliver(h, 'acme', fixture, SECRET, { timestampS: nowS() - 299 });
    expect(justInTime.statusCode).toBe(200);
  });

  it('accepts a header with several v1 signatures, one of them valid', async () => {
    const fixture = event('charge.failed', charge(nextCustomer(), { outcome_reason: 'insufficient_funds' }), {
      created: nowS(),
    });
    const { signature } = signed(fixture, SECRET, nowS());
    const [t, v1] = signature.split(',');
    const res = await deliver(h, 'acme', fixture, SECRET, { signature: `${t},v1=${'0'.repeat(64)},${v1},v0=abc` });
    expect(res.statusCode).toBe(200);
  });

  it('verifies with both signing secrets during a rotation, only the new one after it', async () => {
    await h.admin('PATCH', '/tenants/acme', { stripe_webhook_secret: SECRET_2 });
    const a = event('charge.failed', charge(nextCustomer(), { outcome_reason: 'insufficient_funds' }), {
      created: nowS(),
    });
    expect((await send(a, SECRET)).status).toBe(200);
    const b = event('charge.failed', charge(nextCustomer(), { outcome_reason: 'insufficient_funds' }), {
      created: nowS(),
    });
    expect((await send(b, SECRET_2)).status).toBe(200);
    h.clock.advance(86_400_000 + 1_000);
    const c = event('charge.failed', charge(nextCustomer(), { outcome_reason: 'insufficient_funds' }), {
      created: nowS(),
    });
    expect((await send(c, SECRET)).status).toBe(400);
    expect((await send(c, SECRET_2)).status).toBe(200);
  });

  it('404 for an unknown tenant, 400 for a tenant with no signing secret, 413 over 1 MiB', async () => {
    const fixture = event('charge.failed', charge(nextCustomer(), { outcome_reason: 'stolen_card' }), {
      created: nowS(),
    });
    const unknown = await deliver(h, 'nobody', fixture, SECRET);
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json().code).toBe('tenant_not_found');
    const noSecret = await deliver(h, 'no-secret', fixture, SECRET);
    expect(noSecret.statusCode).toBe(400);
    expect(noSecret.json().code).toBe('invalid_signature');
    const big = event(
      'charge.failed',
      { ...charge(nextCustomer(), {}), metadata: { blob: 'x'.repeat(1024 * 1024) } },
      { created: nowS() },
    );
    const res = await deliver(h, 'acme', big, SECRET_2);
    expect(res.statusCode).toBe(413);
    expect(res.json().code).toBe('payload_too_large');
  });

  it('400 invalid_request for an event dated after its signature could have been made, which would pin a status', async () => {
    const ahead = event('invoice.payment_failed', invoice(nextCustomer(), { next_payment_attempt: null }), {
      created: nowS() + 301,
    });
    const res = await deliver(h, 'acme', ahead, SECRET_2);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'invalid_request', detail: 'created: more than 300 s in the future' });
    const clockSkew = event('invoice.payment_failed', invoice(nextCustomer(), { next_payment_attempt: null }), {
      created: nowS() + 300,
    });
    expect((await deliver(h, 'acme', clockSkew, SECRET_2)).statusCode).toBe(200);
  });

  it('one rule for "too far ahead": the replay refuses what the webhook refuses, and a signature dated ahead is refused too', async () => {
    const dated = (aheadS: number) =>
      event('invoice.payment_failed', invoice(nextCustomer(), { next_payment_attempt: null }), {
        created: nowS() + aheadS,
      });
    const [ahead, hourAhead, skewed] = [dated(301), dated(3600), dated(300)];
    const replay = await h.admin('POST', '/tenants/acme/stripe-events', { events: [ahead, hourAhead, skewed] });
    expect(replay.statusCode, replay.body).toBe(200);
    expect(replay.json()).toMatchObject({
      results: ['invalid', 'invalid', 'applied'],
      invalid: [
        { index: 0, detail: 'created: more than 300 s in the future' },
        { index: 1, detail: 'created: more than 300 s in the future' },
      ],
    });
    for (const e of [ahead, hourAhead]) {
      const res = await deliver(h, 'acme', e, SECRET_2);
      expect([res.statusCode, res.json().detail]).toEqual([400, 'created: more than 300 s in the future']);
    }
    // A delivery signed more than 300 s ahead of this clock is not Stripe's either.
    const now = event('invoice.payment_failed', invoice(nextCustomer(), { next_payment_attempt: null }), {
      created: nowS(),
    });
    expect((await deliver(h, 'acme', now, SECRET_2, { timestampS: nowS() + 301 })).json()).toMatchObject({
      code: 'invalid_signature',
    });
    expect((await deliver(h, 'acme', now, SECRET_2, { timestampS: nowS() + 300 })).json()).toMatchObject({
      outcome: 'applied',
    });
  });

  it('stores and applies an event holding U+0000 anywhere (the store cannot hold it): 200, and the decline code reads back as Stripe sent it', async () => {
    const N = '\u0000';
    const tenant = await h.createTenant('nul-co');
    await h.admin('PATCH', '/tenants/nul-co', { stripe_webhook_secret: SECRET });
    const c = nextCustomer();
    const ids = paymentIds();
    // An expanded payment whose decline code holds the character, a billing reason, metadata and a customer name.
    const declined = paymentIntent(c, { decline_code: `lost${N}card`, code: `card_${N}declined` }, BASIL_API, {
      id: ids.paymentIntent,
    });
    const failed = event(
      'invoice.payment_failed',
      {
        ...invoice(c, { ids, next_payment_attempt: nowS() + 86_400, expandedPaymentIntent: declined }),
        billing_reason: `subscription_cycle${N}`,
        customer_name: `Jenny${N}`,
        metadata: { [`note${N}`]: `a\\b${N}` },
      },
      { created: nowS() },
    );
    for (const outcome of ['applied', 'duplicate']) {
      const res = await deliver(h, 'nul-co', failed, SECRET);
      expect([res.statusCode, res.json()], 'stored once, then a duplicate: never a failure').toEqual([
        200,
        { received: true, outcome },
      ]);
    }
    // Soft: a code with the character in it is no hard decline code, as Stripe's original is not either.
    const answer = await h.lookup('nul-co', { key: tenant.publishable_key, customerId: c });
    expect(answer.json().status).toBe('warning');
    const record = (await h.admin('GET', `/tenants/nul-co/subscribers/${c}`)).json() as {
      history: { decline_code: string | null }[];
      episodes: { decline_code: string | null }[];
    };
    expect(record.history.at(-1)?.decline_code).toBe(`lost${N}card`);
    expect(record.episodes[0]?.decline_code).toBe(`lost${N}card`);

    // The same through the admin replay, where a backslash and the character sit side by side.
    const r = nextCustomer();
    const replayed = event('charge.failed', charge(r, { outcome_reason: `do_not\\u0000${N}try` }), { created: nowS() });
    const res = await h.admin('POST', '/tenants/nul-co/stripe-events', { events: [replayed] });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ results: ['pending'], invalid: [] });
    const history = (await h.admin('GET', `/tenants/nul-co/subscribers/${r}`)).json() as {
      history: { decline_code: string | null }[];
    };
    expect(history.history.at(-1)?.decline_code).toBe(`do_not\\u0000${N}try`);
  });

  it('400 invalid_request for a signed body that is not a Stripe event', async () => {
    const payload = JSON.stringify({ hello: 'world' });
    const { signature } = {
      signature: (await import('stripe')).default.webhooks.generateTestHeaderString({
        payload,
        secret: SECRET_2,
        timestamp: nowS(),
      }),
    };
    const res = await h.app.inject({
      method: 'POST',
      url: '/webhooks/stripe/acme',
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      payload,
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('invalid_request');
  });
});

describe.each(engines)('Stripe webhook, a refused signature in the log ($name)', (engine) => {
  let h: Harness;
  const logs = new Capture();
  const nowS = () => Math.floor(h.clock.ms / 1000);
  const WRONG = 'whsec_wrong_one_from_another_endpoint_00';

  beforeAll(async () => {
    h = await harness(engine, { logger: createLogger('info', logs) });
    await h.createTenant('acme');
    await h.admin('PATCH', '/tenants/acme', { stripe_webhook_secret: SECRET });
    await h.createTenant('no-secret');
  });
  afterAll(() => h.close());

  /** The warnings logged while `act` ran. */
  async function warningsOf(act: () => Promise<unknown>): Promise<Record<string, unknown>[]> {
    const from = logs.entries().length;
    await act();
    return logs
      .entries()
      .slice(from)
      .filter((e) => e.level === 40);
  }

  it('names the tenant and why, keeps the 400 as it is, and never logs a secret or the signature', async () => {
    const fixture = event('charge.failed', charge('cus_log1', { outcome_reason: 'stolen_card' }), { created: nowS() });
    const headers: string[] = [];
    const cases: {
      slug: string;
      secret: string;
      opts?: { timestampS?: number; signature?: string };
      reason: string;
      says: RegExp;
    }[] = [
      {
        slug: 'acme',
        secret: WRONG,
        reason: 'no_matching_secret',
        says: /tenant acme: the signature did not match any of the tenant's signing secrets/,
      },
      {
        slug: 'acme',
        secret: SECRET,
        opts: { timestampS: nowS() - 301 },
        reason: 'timestamp_outside_tolerance',
        says: /tenant acme: the signature's timestamp is more than 300 s old/,
      },
      {
        slug: 'acme',
        secret: SECRET,
        opts: { timestampS: nowS() + 301 },
        reason: 'timestamp_ahead',
        says: /tenant acme: the signature's timestamp is more than 300 s ahead of this clock/,
      },
      {
        slug: 'acme',
        secret: SECRET,
        opts: { signature: 'v1=abc' },
        reason: 'malformed_header',
        says: /tenant acme: .*no t= timestamp or no v1= signature/,
      },
      {
        slug: 'no-secret',
        secret: SECRET,
        reason: 'no_secret_configured',
        says: /tenant no-secret: the tenant has no Stripe signing secret configured/,
      },
    ];
    for (const c of cases) {
      let res: Awaited<ReturnType<typeof deliver>> | undefined;
      const warnings = await warningsOf(async () => {
        res = await deliver(h, c.slug, fixture, c.secret, c.opts);
      });
      expect(res?.statusCode, c.reason).toBe(400);
      expect(res?.json(), c.reason).toMatchObject({ code: 'invalid_signature' });
      expect(warnings, c.reason).toHaveLength(1);
      expect(warnings[0], c.reason).toMatchObject({ tenant: c.slug, reason: c.reason });
      expect(String(warnings[0]?.msg), c.reason).toMatch(c.says);
      headers.push(c.opts?.signature ?? signed(fixture, c.secret, c.opts?.timestampS ?? nowS()).signature);
    }
    const missing = await warningsOf(() =>
      h.app.inject({
        method: 'POST',
        url: '/webhooks/stripe/acme',
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify(fixture),
      }),
    );
    expect(missing).toMatchObject([{ tenant: 'acme', reason: 'missing_header' }]);

    for (const secret of [SECRET, WRONG]) expect(logs.text).not.toContain(secret);
    for (const header of headers) {
      for (const v1 of header.split(',').filter((p) => p.startsWith('v1=')))
        expect(logs.text).not.toContain(v1.slice(3));
    }
    // A delivery that verifies logs no warning.
    expect(await warningsOf(() => deliver(h, 'acme', fixture, SECRET))).toEqual([]);
  });
});
