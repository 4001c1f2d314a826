import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { timingSafeEqualSpy } from '../helpers/crypto-spy.js';
import { availableEngines } from '../helpers/engines.js';
import { ADMIN_TOKEN, harness } from '../helpers/harness.js';
import type { CreatedTenant, Harness } from '../helpers/harness.js';

// Every secret comparison must go through timingSafeEqual: the spy shows that it does.
vi.mock('node:crypto', async (orig) => (await import('../helpers/crypto-spy.js')).spiedCrypto(orig));
const spy = () => timingSafeEqualSpy.fn;

const engines = await availableEngines();

const ROUTES: [string, string, unknown?][] = [
  ['GET', '/admin/v1/tenants'],
  ['POST', '/admin/v1/tenants', { slug: 'evil' }],
  ['GET', '/admin/v1/tenants/acme'],
  ['PATCH', '/admin/v1/tenants/acme', { suspended: true }],
  ['POST', '/admin/v1/tenants/acme/rotate', { key: 'hmac' }],
  ['PUT', '/admin/v1/tenants/acme/subscribers/cus_1', { status: 'lockout' }],
  ['GET', '/admin/v1/tenants/acme/subscribers/cus_1'],
  ['DELETE', '/admin/v1/tenants/acme/subscribers/cus_1'],
  ['GET', '/admin/v1/tiers'],
  ['PUT', '/admin/v1/tiers/x', { entitlements: {} }],
];

describe.each(engines)('admin API, security ($name)', (engine) => {
  let h: Harness;
  let acme: CreatedTenant;
  beforeAll(async () => {
    h = await harness(engine);
    acme = await h.createTenant('acme');
  });
  afterAll(() => h.close());

  function call(method: string, url: string, body: unknown, authorization?: string) {
    return h.app.inject({
      method: method as 'GET',
      url,
      headers: {
        ...(authorization === undefined ? {} : { authorization }),
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      ...(body ? { payload: JSON.stringify(body) } : {}),
    });
  }

  it('refuses every route without the admin token, or with a wrong one, before anything else', async () => {
    for (const [method, url, body] of ROUTES) {
      const missing = await call(method, url, body);
      expect(missing.statusCode, `${method} ${url}`).toBe(401);
      expect(missing.json().code).toBe('missing_admin_token');
      expect(missing.headers['www-authenticate']).toBe('Bearer');
      for (const authorization of [
        `Bearer ${ADMIN_TOKEN}x`,
        `Bearer ${acme.publishable_key}`,
        `Basic ${ADMIN_TOKEN}`,
        ADMIN_TOKEN,
      ]) {
        const wrong = await call(method, url, body, authorization);
        expect(wrong.statusCode, `${method} ${url} ${authorization.slice(0, 6)}`).toBe(401);
        expect(wrong.json().code).toBe('invalid_admin_token');
      }
    }
    const tenant = await h.admin('GET', '/tenants/acme');
    expect(tenant.json().suspended).toBe(false);
    expect((await h.admin('GET', '/tenants/evil')).statusCode).toBe(404);
  });

  it('compares the admin token through timingSafeEqual on SHA-256 digests', async () => {
    spy().mockClear();
    const res = await call('GET', '/admin/v1/tenants', undefined, `Bearer ${'x'.repeat(40)}`);
    expect(res.statusCode).toBe(401);
    expect(spy()).toHaveBeenCalledTimes(1);
    const [a, b] = spy().mock.calls[0] as [Buffer, Buffer];
    expect([a.length, b.length]).toEqual([32, 32]);
  });

  it('never returns a secret after creation', async () => {
    await h.admin('PATCH', '/tenants/acme', { stripe_webhook_secret: 'whsec_neverreturned0123456789' });
    await h.admin('PUT', '/tenants/acme/subscribers/cus_1', { status: 'warning' });
    const bodies = await Promise.all([
      h.admin('GET', '/tenants'),
      h.admin('GET', '/tenants/acme'),
      h.admin('PATCH', '/tenants/acme', { hmac_required: false }),
      h.admin('GET', '/tenants/acme/subscribers/cus_1'),
    ]);
    for (const res of bodies) {
      expect(res.statusCode).toBe(200);
      for (const secret of [
        acme.publishable_key,
        acme.hmac_secret,
        'whsec_neverreturned0123456789',
        '"hmac_secret":',
        '"publishable_key":',
      ]) {
        expect(res.body).not.toContain(secret);
      }
    }
  });

  it('sends no CORS headers on the admin API', async () => {
    const res = await call('GET', '/admin/v1/tenants', undefined, `Bearer ${ADMIN_TOKEN}`);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });
});

describe.each(engines)('admin API, disabled ($name)', (engine) => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness(engine, { adminToken: null });
  });
  afterAll(() => h.close());

  it('answers 404 admin_disabled on every admin route, whatever the token', async () => {
    for (const [method, url, body] of ROUTES) {
      const res = await h.app.inject({
        method: method as 'GET',
        url,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        ...(body ? { payload: JSON.stringify(body) } : {}),
      });
      expect(res.statusCode).toBe(404);
      expect(res.json().code).toBe('admin_disabled');
    }
  });
});
