import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORE_UNAVAILABLE_RETRY_AFTER_S } from '../../src/http/problems.js';
import type { Store } from '../../src/store/index.js';
import { availableEngines } from '../helpers/engines.js';
import type { Engine } from '../helpers/engines.js';
import { ADMIN_TOKEN, FakeClock, buildAppWithModel, harness } from '../helpers/harness.js';
import type { CreatedTenant, Harness } from '../helpers/harness.js';
import { charge, event, invoice } from '../helpers/stripe-fixtures.js';
import { deliver } from '../helpers/webhook.js';

const engines = await availableEngines();
const SECRET = 'whsec_failure_tests_0123456789abcdef';

describe.each(engines)('Stripe webhook when the store fails ($name)', (engine: Engine) => {
  let h: Harness;
  let acme: CreatedTenant;
  let db: Awaited<ReturnType<Engine['open']>>['db'];

  beforeAll(async () => {
    const opened = await engine.open();
    db = opened.db;
    // The harness opens its own store; this test needs the same database, so it reuses the engine's.
    h = await harness({ name: engine.name, open: async () => opened });
    acme = await h.createTenant('acme');
    await h.admin('PATCH', '/tenants/acme', { stripe_webhook_secret: SECRET });
    // A commit-time failure: a deferred constraint trigger refuses one event id at COMMIT.
    await db.exec(`
      CREATE FUNCTION refuse_marked_event() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.event_id LIKE 'evt_fail_commit%' THEN RAISE EXCEPTION 'commit refused'; END IF;
        RETURN NULL;
      END $$;
      CREATE CONSTRAINT TRIGGER refuse_marked_event AFTER INSERT ON stripe_events
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_marked_event();`);
  });
  afterAll(() => h.close());

  it('a failed commit answers non-2xx and changes nothing; the retry then applies', async () => {
    const failing = event('invoice.payment_failed', invoice('cus_commit', { next_payment_attempt: null }), {
      created: Math.floor(h.clock.ms / 1000),
      id: 'evt_fail_commit_1',
    });
    const res = await deliver(h, 'acme', failing, SECRET);
    expect(res.statusCode).toBe(503);
    expect(res.json().code).toBe('store_unavailable');
    expect(res.headers['retry-after']).toBe(String(STORE_UNAVAILABLE_RETRY_AFTER_S));
    expect(res.body).not.toContain('commit refused');
    const lookup = await h.lookup('acme', { key: acme.publishable_key, customerId: 'cus_commit' });
    expect(lookup.body).toBe('{"status":"active"}');
    expect((await h.admin('GET', '/tenants/acme/subscribers/cus_commit')).statusCode).toBe(404);

    // Stripe retries: once the store accepts it, the same event applies (it was never stored).
    await db.exec('DROP TRIGGER refuse_marked_event ON stripe_events');
    const retry = await deliver(h, 'acme', failing, SECRET);
    expect(retry.json()).toEqual({ received: true, outcome: 'applied' });
    const after = await h.lookup('acme', { key: acme.publishable_key, customerId: 'cus_commit' });
    expect(after.json().status).toBe('lockout');
  });

  it('an unreachable store answers 503, so that Stripe retries', async () => {
    const down = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    const stripe = new Proxy(h.store.stripe, {
      get: (target, prop) =>
        prop === 'recordStripeEvent' ? () => Promise.reject(down) : (Reflect.get(target, prop) as unknown),
    });
    const broken: Store = { ...h.store, stripe };
    const clock = new FakeClock(h.clock.ms);
    const app = await buildAppWithModel({ store: broken, adminToken: ADMIN_TOKEN, now: clock.now });
    const fixture = event('charge.failed', charge('cus_down', { outcome_reason: 'stolen_card' }), {
      created: Math.floor(clock.ms / 1000),
    });
    const res = await deliver({ ...h, app, clock }, 'acme', fixture, SECRET);
    expect(res.statusCode).toBe(503);
    await app.close();
    const lookup = await h.lookup('acme', { key: acme.publishable_key, customerId: 'cus_down' });
    expect(lookup.body).toBe('{"status":"active"}');
  });
});
