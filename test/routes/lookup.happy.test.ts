import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableEngines } from '../helpers/engines.js';
import { computeHmac, harness } from '../helpers/harness.js';
import type { CreatedTenant, Harness } from '../helpers/harness.js';

const engines = await availableEngines();

describe.each(engines)('lookup, happy path ($name)', (engine) => {
  let h: Harness;
  let acme: CreatedTenant;
  const CARD_URL = 'https://billing.acme.test/card';

  beforeAll(async () => {
    h = await harness(engine);
    acme = await h.createTenant('acme', { card_update_url: CARD_URL });
    await h.setSubscriber('acme', 'cus_active', 'active', 'paid');
    await h.setSubscriber('acme', 'cus_warning', 'warning', 'soft_decline');
    await h.setSubscriber('acme', 'cus_lockout', 'lockout', 'hard_decline');
  });
  afterAll(() => h.close());

  it('answers an unknown subscriber with exactly {"status":"active"}', async () => {
    const res = await h.lookup('acme', { key: acme.publishable_key, customerId: 'cus_nobody' });
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe('{"status":"active"}');
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.headers['cache-control']).toBe('no-store');
  });

  it('answers a warning with the card update URL, keys in the contract order', async () => {
    const res = await h.lookup('acme', { key: acme.publishable_key, customerId: 'cus_warning' });
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe(
      `{"status":"warning","card_update_url":"${CARD_URL}","entitlements":{"powered_by_watermark":true,"custom_domain":false,"downstream_webhooks":false}}`,
    );
  });

  it('answers lockout and a known active subscriber with card_update_url null', async () => {
    for (const [id, status] of [
      ['cus_lockout', 'lockout'],
      ['cus_active', 'active'],
    ]) {
      const res = await h.lookup('acme', { key: acme.publishable_key, customerId: id });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({
        status,
        card_update_url: null,
        entitlements: { powered_by_watermark: true, custom_domain: false, downstream_webhooks: false },
      });
      expect(Object.keys(res.json())).toEqual(['status', 'card_update_url', 'entitlements']);
    }
  });

  it('answers a warning with card_update_url null when the tenant has none', async () => {
    const bare = await h.createTenant('bare-co');
    await h.setSubscriber('bare-co', 'cus_w', 'warning');
    const res = await h.lookup('bare-co', { key: bare.publishable_key, customerId: 'cus_w' });
    expect(res.json()).toMatchObject({ status: 'warning', card_update_url: null });
  });

  it("carries every flag of the tenant's tier, named flags first", async () => {
    const put = await h.admin('PUT', '/tiers/enterprise', {
      entitlements: { sso: true, downstream_webhooks: true, custom_domain: true, powered_by_watermark: false },
    });
    expect(put.statusCode).toBe(200);
    const big = await h.createTenant('big-co', { tier: 'enterprise' });
    await h.setSubscriber('big-co', 'cus_1', 'active');
    const res = await h.lookup('big-co', { key: big.publishable_key, customerId: 'cus_1' });
    expect(res.body).toBe(
      '{"status":"active","card_update_url":null,"entitlements":{"powered_by_watermark":false,"custom_domain":true,"downstream_webhooks":true,"sso":true}}',
    );
  });

  it('accepts a valid hmac in lowercase and in uppercase hex', async () => {
    const hmac = computeHmac(acme.hmac_secret, 'cus_warning');
    expect(hmac).toMatch(/^[0-9a-f]{64}$/);
    for (const value of [hmac, hmac.toUpperCase()]) {
      const res = await h.lookup('acme', { key: acme.publishable_key, customerId: 'cus_warning', hmac: value });
      expect(res.statusCode).toBe(200);
      expect(res.json().status).toBe('warning');
    }
  });

  it('answers with a valid hmac when the tenant requires one', async () => {
    const strict = await h.createTenant('strict-co', { hmac_required: true });
    const res = await h.lookup('strict-co', {
      key: strict.publishable_key,
      customerId: 'cus_x',
      hmac: computeHmac(strict.hmac_secret, 'cus_x'),
    });
    expect(res.statusCode).toBe(200);
    expect(res.body).toBe('{"status":"active"}');
  });

  it('ignores unknown query parameters and accepts the Bearer scheme in any case', async () => {
    const res = await h.lookup('acme', {
      customerId: 'cus_lockout',
      query: 'utm_source=mail&x=1',
      headers: { authorization: `bEaReR ${acme.publishable_key}` },
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().status).toBe('lockout');
  });

  it('answers cross-origin calls with Access-Control-Allow-Origin: *', async () => {
    const res = await h.lookup('acme', {
      key: acme.publishable_key,
      customerId: 'cus_active',
      headers: { origin: 'https://anywhere.test' },
    });
    expect(res.headers['access-control-allow-origin']).toBe('*');
  });

  it('answers the CORS preflight', async () => {
    const res = await h.app.inject({
      method: 'OPTIONS',
      url: '/api/subscriber-status/acme',
      headers: {
        origin: 'https://app.acme.test',
        'access-control-request-method': 'GET',
        'access-control-request-headers': 'authorization',
      },
    });
    expect(res.statusCode).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(res.headers['access-control-allow-methods']).toBe('GET, OPTIONS');
    expect(res.headers['access-control-allow-headers']).toBe('Authorization');
    expect(res.headers['access-control-max-age']).toBe('7200');
  });

  it("echoes only a tenant's allowed origins, with Vary: Origin", async () => {
    const locked = await h.createTenant('locked-co', {
      allowed_origins: ['https://app.locked.test', 'http://localhost:5173'],
    });
    const allowed = await h.lookup('locked-co', {
      key: locked.publishable_key,
      customerId: 'cus_1',
      headers: { origin: 'https://app.locked.test' },
    });
    expect(allowed.headers['access-control-allow-origin']).toBe('https://app.locked.test');
    expect(allowed.headers.vary).toMatch(/Origin/);
    const other = await h.lookup('locked-co', {
      key: locked.publishable_key,
      customerId: 'cus_1',
      headers: { origin: 'https://evil.test' },
    });
    expect(other.headers['access-control-allow-origin']).toBeUndefined();
    expect(other.headers.vary).toMatch(/Origin/);
    const preflight = await h.app.inject({
      method: 'OPTIONS',
      url: '/api/subscriber-status/locked-co',
      headers: { origin: 'http://localhost:5173', 'access-control-request-method': 'GET' },
    });
    expect(preflight.headers['access-control-allow-origin']).toBe('http://localhost:5173');
  });

  it('verifies with both HMAC secrets during a rotation, and with the new one after it', async () => {
    const t = await h.createTenant('rot-co');
    const rotated = await h.admin('POST', '/tenants/rot-co/rotate', { key: 'hmac' });
    expect(rotated.statusCode).toBe(200);
    const fresh = rotated.json().hmac_secret as string;
    expect(fresh).not.toBe(t.hmac_secret);
    for (const secret of [t.hmac_secret, fresh]) {
      const res = await h.lookup('rot-co', {
        key: t.publishable_key,
        customerId: 'cus_r',
        hmac: computeHmac(secret, 'cus_r'),
      });
      expect(res.statusCode).toBe(200);
    }
    h.clock.advance(86_400_000 + 1);
    const old = await h.lookup('rot-co', {
      key: t.publishable_key,
      customerId: 'cus_r',
      hmac: computeHmac(t.hmac_secret, 'cus_r'),
    });
    expect(old.statusCode).toBe(403);
    const now = await h.lookup('rot-co', {
      key: t.publishable_key,
      customerId: 'cus_r',
      hmac: computeHmac(fresh, 'cus_r'),
    });
    expect(now.statusCode).toBe(200);
  });

  it('accepts both publishable keys during a rotation, only the new one after it', async () => {
    const t = await h.createTenant('pk-rot');
    const rotated = await h.admin('POST', '/tenants/pk-rot/rotate', { key: 'publishable' });
    const fresh = rotated.json().publishable_key as string;
    expect(fresh).toMatch(/^pk_live_[A-Za-z0-9]{24,}$/);
    expect(rotated.json().previous_expires_at).toBe(new Date(h.clock.ms + 86_400_000).toISOString());
    expect((await h.lookup('pk-rot', { key: t.publishable_key, customerId: 'cus_1' })).statusCode).toBe(200);
    expect((await h.lookup('pk-rot', { key: fresh, customerId: 'cus_1' })).statusCode).toBe(200);
    h.clock.advance(86_400_000 + 1);
    expect((await h.lookup('pk-rot', { key: t.publishable_key, customerId: 'cus_1' })).statusCode).toBe(401);
    expect((await h.lookup('pk-rot', { key: fresh, customerId: 'cus_1' })).statusCode).toBe(200);
  });
});
