import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openDb, storeOver } from '../../src/store/index.js';
import { KeyUsage } from '../../src/http/key-usage.js';
import { availableEngines } from '../helpers/engines.js';
import { ADMIN_TOKEN, buildAppWithModel, harness, T0 } from '../helpers/harness.js';
import type { Harness } from '../helpers/harness.js';

const engines = await availableEngines();
const ALL = ['status:read', 'subscribers:read', 'subscribers:write', 'settings:write', 'webhooks:write', 'keys:write'];

describe.each(engines)('tenant secret keys and the tenant API ($name)', (engine) => {
  let h: Harness;
  const keyUsage = new KeyUsage();

  async function createKey(slug: string, scopes: string[], extra: Record<string, unknown> = {}) {
    const res = await h.admin('POST', `/tenants/${slug}/keys`, {
      name: `backend ${scopes.join(' ')}`,
      scopes,
      ...extra,
    });
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as { id: string; secret_key: string; prefix: string; scopes: string[] };
  }

  function v1(key: string, method: string, url: string, body?: unknown, headers: Record<string, string> = {}) {
    return h.app.inject({
      method: method as 'GET',
      url: `/v1${url}`,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    });
  }

  beforeAll(async () => {
    h = await harness(engine, { keyUsage });
    await h.createTenant('acme', { hmac_required: true, tier: 'scale' });
    await h.createTenant('other');
    await h.createTenant('sandbox', { livemode: false });
    await h.setSubscriber('acme', 'cus_late', 'warning', 'payment_failed');
    await h.setSubscriber('other', 'cus_theirs', 'lockout', 'retries_exhausted');
  });
  afterAll(() => h.close());

  it('creates a key shown once: sk_live_ in live mode, sk_test_ in test mode (?mode=test); lists never show it', async () => {
    const key = await createKey('acme', ['status:read']);
    expect(key.secret_key).toMatch(/^sk_live_[A-Za-z0-9]{40}$/);
    expect(key.prefix).toBe(key.secret_key.slice(0, 12));
    expect(key).toMatchObject({
      id: expect.stringMatching(/^key_/),
      scopes: ['status:read'],
      expires_at: null,
      last_used_at: null,
      created_at: new Date(T0).toISOString(),
    });
    const test = (
      await h.admin('POST', '/tenants/acme/keys?mode=test', { name: 'test server', scopes: ['status:read'] })
    ).json() as { secret_key: string; id: string };
    expect(test.secret_key).toMatch(/^sk_test_/);
    // Each mode lists its own keys.
    const testList = await h.admin('GET', '/tenants/acme/keys?mode=test');
    expect(testList.json().data.map((k: { id: string }) => k.id)).toEqual([test.id]);
    const list = await h.admin('GET', '/tenants/acme/keys');
    expect(list.statusCode).toBe(200);
    expect(list.body).not.toContain(key.secret_key);
    expect(list.body).not.toContain(key.secret_key.slice(12));
    expect(list.json().data.map((k: { id: string }) => k.id)).toContain(key.id);
  });

  it('answers the status with a secret key, without an hmac, with the tenant entitlements; the lookup route takes the key too', async () => {
    const key = await createKey('acme', ['status:read']);
    const res = await v1(key.secret_key, 'GET', '/subscribers/cus_late/status');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ status: 'warning', entitlements: { powered_by_watermark: false } });
    expect((await v1(key.secret_key, 'GET', '/subscribers/cus_unknown/status')).json()).toEqual({ status: 'active' });
    // hmac_required: a publishable key without hmac is refused, a secret key is not.
    const pk = await h.lookup('acme', { customerId: 'cus_late' });
    expect(pk.statusCode).toBe(401);
    const sk = await h.lookup('acme', { key: key.secret_key, customerId: 'cus_late' });
    expect(sk.statusCode, sk.body).toBe(200);
    expect(JSON.parse(sk.body)).toEqual(res.json());
  });

  it('refuses a secret key from a browser, an unknown key, a key of another tenant on the lookup, and a call without its scope', async () => {
    const key = await createKey('acme', ['status:read']);
    const browser = await v1(key.secret_key, 'GET', '/subscribers/cus_late/status', undefined, {
      origin: 'https://app.acme.test',
    });
    expect(browser.statusCode).toBe(401);
    expect(browser.json().code).toBe('secret_key_in_browser');
    const lookupBrowser = await h.lookup('acme', {
      key: key.secret_key,
      customerId: 'cus_late',
      headers: { origin: 'https://app.acme.test' },
    });
    expect(JSON.parse(lookupBrowser.body).code).toBe('secret_key_in_browser');
    const unknown = await v1(`sk_live_${'x'.repeat(40)}`, 'GET', '/subscribers/cus_late/status');
    expect(unknown.statusCode).toBe(401);
    expect(unknown.headers['www-authenticate']).toBe('Bearer');
    expect(unknown.json().code).toBe('invalid_secret_key');
    const wrongTenant = await h.lookup('other', { key: key.secret_key, customerId: 'cus_theirs' });
    expect(JSON.parse(wrongTenant.body).code).toBe('invalid_secret_key');
    const scope = await v1(key.secret_key, 'GET', '/subscribers');
    expect(scope.statusCode).toBe(403);
    expect(scope.json().code).toBe('insufficient_scope');
    expect((await v1(key.secret_key, 'GET', '/settings')).statusCode).toBe(403);
    expect((await v1(key.secret_key, 'PUT', '/subscribers/cus_late/override', { status: 'active' })).statusCode).toBe(
      403,
    );
    // A publishable key or the admin token is no secret key.
    const admin = await h.app.inject({
      method: 'GET',
      url: '/v1/subscribers',
      headers: { authorization: 'Bearer test-admin-token-0123456789abcdefghijklmnopqrstuv' },
    });
    expect(admin.json().code).toBe('invalid_secret_key');
  });

  it('keeps tenants apart: a key sees only its own tenant', async () => {
    const key = await createKey('acme', ALL);
    expect((await v1(key.secret_key, 'GET', '/subscribers/cus_theirs')).statusCode).toBe(404);
    expect((await v1(key.secret_key, 'GET', '/subscribers/cus_theirs/status')).json()).toEqual({ status: 'active' });
    const list = await v1(key.secret_key, 'GET', '/subscribers');
    expect(list.json().data.map((s: { processor_customer_id: string }) => s.processor_customer_id)).toEqual([
      'cus_late',
    ]);
    const settings = await v1(key.secret_key, 'GET', '/settings');
    expect(settings.json().slug).toBe('acme');
  });

  it('lists by answered and derived status, sets and clears an override with the key named in the history', async () => {
    const key = await createKey('acme', ['subscribers:read', 'subscribers:write']);
    const set = await v1(key.secret_key, 'PUT', '/subscribers/cus_gated/override', {
      status: 'lockout',
      reason: 'manual',
    });
    expect(set.statusCode, set.body).toBe(200);
    const page = await v1(key.secret_key, 'GET', '/subscribers?status=warning,lockout&limit=10');
    expect(
      page
        .json()
        .data.map((s: { processor_customer_id: string; derived_status: string }) => [
          s.processor_customer_id,
          s.derived_status,
        ]),
    ).toEqual([
      ['cus_gated', 'lockout'],
      ['cus_late', 'warning'],
    ]);
    expect((await v1(key.secret_key, 'GET', '/subscribers?derived_status=lockout')).json().data).toHaveLength(1);
    const shown = (await v1(key.secret_key, 'GET', '/subscribers/cus_gated')).json();
    expect(shown.history.at(-1) ?? shown.history[0]).toMatchObject({
      source: 'admin',
      secret_key_id: key.id,
      admin_action: 'set_status',
    });
    const cleared = await v1(key.secret_key, 'DELETE', '/subscribers/cus_gated/override');
    expect(cleared.statusCode).toBe(204);
    // No episode behind the override: the customer is unknown again, so active.
    expect(
      (await h.lookup('acme', { key: key.secret_key.replace(/.*/, 'x'), customerId: 'cus_gated' })).statusCode,
    ).toBe(401);
    const status = await h.admin('GET', '/tenants/acme/subscribers/cus_gated');
    expect(status.json().status).toBeNull();
    // The history tells a clear from a set, and names the key of each.
    expect(status.json().history.at(-1)).toMatchObject({
      source: 'admin',
      secret_key_id: key.id,
      admin_action: 'clear_override',
      effect: 'removed',
    });
  });

  it('changes its own settings with settings:write, never its tier, suspension or Stripe signing secret', async () => {
    const key = await createKey('acme', ['settings:write']);
    const patched = await v1(key.secret_key, 'PATCH', '/settings', {
      card_update_url: 'https://acme.test/card',
      policy: { grace_days: 3 },
    });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json()).toMatchObject({
      card_update_url: 'https://acme.test/card',
      policy: { enforcement: 'gate', grace_days: 3 },
      stripe_webhook_secret_set: false,
    });
    expect(patched.body).not.toContain('whsec_');
    for (const field of [{ tier: 'starter' }, { suspended: true }, { slug: 'x' }, { lookups_per_minute: 5 }]) {
      const refused = await v1(key.secret_key, 'PATCH', '/settings', field);
      expect(refused.statusCode).toBe(400);
      expect(refused.json().detail).toContain('is not a known field');
    }
    // The Stripe signing secret decides statuses: settings:write alone does not reach it.
    const refused = await v1(key.secret_key, 'PATCH', '/settings', { stripe_webhook_secret: 'whsec_abcdefghijklmnop' });
    expect([refused.statusCode, refused.json().code]).toEqual([403, 'insufficient_scope']);
    const both = await createKey('acme', ['settings:write', 'stripe:write']);
    const secret = await v1(both.secret_key, 'PATCH', '/settings', { stripe_webhook_secret: 'whsec_abcdefghijklmnop' });
    expect(secret.json().stripe_webhook_secret_set).toBe(true);
    expect(secret.body).not.toContain('whsec_abcdefghijklmnop');
  });

  it('never grants, rotates or revokes a key with a scope the caller lacks', async () => {
    const manager = await createKey('acme', ['keys:write', 'status:read']);
    const more = await v1(manager.secret_key, 'POST', '/keys', { name: 'too much', scopes: ['subscribers:write'] });
    expect(more.statusCode).toBe(403);
    expect(more.json().code).toBe('insufficient_scope');
    const fewer = await v1(manager.secret_key, 'POST', '/keys', { name: 'reader', scopes: ['status:read'] });
    expect(fewer.statusCode, fewer.body).toBe(201);
    const powerful = await createKey('acme', ALL);
    expect((await v1(manager.secret_key, 'DELETE', `/keys/${powerful.id}`)).statusCode).toBe(403);
    expect((await v1(manager.secret_key, 'POST', `/keys/${powerful.id}/rotate`, {})).statusCode).toBe(403);
    expect((await v1(manager.secret_key, 'DELETE', `/keys/${fewer.json().id}`)).statusCode).toBe(204);
    expect((await v1(fewer.json().secret_key, 'GET', '/subscribers/cus_late/status')).statusCode).toBe(401);
    // Another tenant's key id is no key of this one.
    const theirs = await createKey('other', ['status:read']);
    expect((await v1(manager.secret_key, 'DELETE', `/keys/${theirs.id}`)).statusCode).toBe(404);
  });

  it('revokes at once, rotates with an overlap, and expires', async () => {
    const key = await createKey('acme', ['status:read'], { expires_at: new Date(T0 + 3_600_000).toISOString() });
    expect((await v1(key.secret_key, 'GET', '/subscribers/cus_late/status')).statusCode).toBe(200);
    const rotated = await h.admin('POST', `/tenants/acme/keys/${key.id}/rotate`, { overlap_seconds: 60 });
    expect(rotated.statusCode, rotated.body).toBe(200);
    const next = rotated.json().secret_key as string;
    expect(next).not.toBe(key.secret_key);
    expect(rotated.json().previous_expires_at).toBe(new Date(h.clock.ms + 60_000).toISOString());
    expect((await v1(key.secret_key, 'GET', '/subscribers/cus_late/status')).statusCode).toBe(200);
    expect((await v1(next, 'GET', '/subscribers/cus_late/status')).statusCode).toBe(200);
    h.clock.advance(61_000);
    expect((await v1(key.secret_key, 'GET', '/subscribers/cus_late/status')).statusCode).toBe(401);
    expect((await v1(next, 'GET', '/subscribers/cus_late/status')).statusCode).toBe(200);
    h.clock.advance(3_600_000);
    expect((await v1(next, 'GET', '/subscribers/cus_late/status')).statusCode).toBe(401);
    const other = await createKey('acme', ['status:read']);
    expect((await h.admin('DELETE', `/tenants/acme/keys/${other.id}`)).statusCode).toBe(204);
    expect((await v1(other.secret_key, 'GET', '/subscribers/cus_late/status')).statusCode).toBe(401);
    expect((await h.admin('DELETE', `/tenants/acme/keys/${other.id}`)).statusCode).toBe(404);
  });

  it('records the last use coarsely, not per request', async () => {
    const key = await createKey('acme', ['status:read']);
    await v1(key.secret_key, 'GET', '/subscribers/cus_late/status');
    const before = (await h.admin('GET', '/tenants/acme/keys'))
      .json()
      .data.find((k: { id: string }) => k.id === key.id);
    expect(before.last_used_at).toBeNull();
    await keyUsage.flush((uses) => h.store.keys.touchSecretKeys(uses));
    const after = (await h.admin('GET', '/tenants/acme/keys')).json().data.find((k: { id: string }) => k.id === key.id);
    expect(after.last_used_at).toBe(new Date(h.clock.ms).toISOString());
  });

  it('lets the operator reach the same resources by slug, and a missing tenant is 404', async () => {
    expect((await h.admin('GET', '/tenants/acme/settings')).json().slug).toBe('acme');
    expect((await h.admin('GET', '/tenants/acme/subscribers/cus_late/status')).json().status).toBe('warning');
    const missing = await h.admin('GET', '/tenants/nobody/keys');
    expect(missing.statusCode).toBe(404);
    expect(missing.json().code).toBe('tenant_not_found');
  });

  it('counts a secret key against the key, not its address: earlier failures of the address do not refuse it', async () => {
    const limited = await harness(engine, {
      rateLimits: { lookupPerIp: 5, lookupPerTenant: 0, failuresPerIp: 3, adminPerIp: 0, perSecretKey: 8 },
    });
    await limited.createTenant('acme');
    await limited.setSubscriber('acme', 'cus_late', 'warning');
    const created = await limited.admin('POST', '/tenants/acme/keys', { name: 'backend', scopes: ['status:read'] });
    const key = created.json() as { secret_key: string };
    // The address fails with a wrong publishable key until it is refused.
    let refused = 0;
    for (let i = 0; i < 6; i += 1)
      if (
        (await limited.lookup('acme', { key: 'pk_wrongwrongwrongwrongwrong', customerId: 'cus_late' })).statusCode ===
        429
      )
        refused += 1;
    expect(refused).toBeGreaterThan(0);
    // The same address with a valid secret key: more lookups than the address quota (5), up to the key's (8).
    const statuses: number[] = [];
    for (let i = 0; i < 9; i += 1)
      statuses.push((await limited.lookup('acme', { key: key.secret_key, customerId: 'cus_late' })).statusCode);
    expect(statuses.slice(0, 8)).toEqual(Array(8).fill(200));
    expect(statuses[8]).toBe(429);
    await limited.close();
  });
});

const postgresEngine = engines.find((e) => e.name === 'postgres');

describe.runIf(postgresEngine !== undefined)('secret keys across instances (postgres)', () => {
  it('a key created through one instance works on the other, and its revocation reaches the other through the change stream', async () => {
    const engine = postgresEngine as NonNullable<typeof postgresEngine>;
    const a = await harness(engine);
    // A second instance on the same database: its own store, read model and app.
    const db = await openDb(a.target);
    const storeB = storeOver(db);
    const b = await buildAppWithModel({ store: storeB, adminToken: ADMIN_TOKEN, now: a.clock.now });
    try {
      await a.createTenant('acme');
      await a.setSubscriber('acme', 'cus_late', 'warning');
      const created = (
        await a.admin('POST', '/tenants/acme/keys', { name: 'backend', scopes: ['status:read'] })
      ).json() as { id: string; secret_key: string };
      const onB = () =>
        b.inject({
          method: 'GET',
          url: '/v1/subscribers/cus_late/status',
          headers: { authorization: `Bearer ${created.secret_key}` },
        });
      // B hears of it by its listener (no catch-up is asked for here).
      await vi.waitFor(async () => expect((await onB()).statusCode).toBe(200), { timeout: 5_000, interval: 20 });
      expect((await a.admin('DELETE', `/tenants/acme/keys/${created.id}`)).statusCode).toBe(204);
      await vi.waitFor(async () => expect((await onB()).statusCode).toBe(401), { timeout: 5_000, interval: 20 });
    } finally {
      await b.close();
      await storeB.close();
      await a.close();
    }
  });
});
