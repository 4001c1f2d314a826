import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableEngines } from '../helpers/engines.js';
import { ADMIN_TOKEN, harness } from '../helpers/harness.js';
import type { Harness } from '../helpers/harness.js';

/**
 * Console sessions through the app on both engines, on a fake clock: a session lasts its
 * time to live and no longer, ends with its key's expiry or revocation and with its
 * tenant, holds the key's scopes as they are, names the key in the history of what it
 * changed, and guesses at the credential count against the address like admin token guesses.
 */
const engines = await availableEngines();
const HOUR_MS = 3_600_000;
const TTL_MS = 2 * HOUR_MS;

describe.each(engines)('console sessions ($name)', (engine) => {
  let h: Harness;

  const signIn = async (credential: string, headers: Record<string, string> = {}) => {
    const res = await h.app.inject({
      method: 'POST',
      url: '/console/api/session',
      headers: { 'content-type': 'application/json', ...headers },
      payload: { credential },
    });
    return {
      res,
      cookie: String(res.headers['set-cookie'] ?? '').split(';')[0] as string,
      csrf: res.statusCode === 201 ? String(res.json().csrf_token) : '',
    };
  };
  const as = (cookie: string, method: string, url: string, extra: { csrf?: string; body?: unknown } = {}) =>
    h.app.inject({
      method: method as 'GET',
      url,
      headers: {
        cookie,
        ...(extra.csrf ? { 'x-csrf-token': extra.csrf } : {}),
        ...(extra.body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(extra.body === undefined ? {} : { payload: JSON.stringify(extra.body) }),
    });
  const key = async (slug: string, scopes: string[], expiresAt?: string) => {
    const res = await h.admin('POST', `/tenants/${slug}/keys`, {
      name: 'console',
      scopes,
      ...(expiresAt ? { expires_at: expiresAt } : {}),
    });
    expect(res.statusCode, res.body).toBe(201);
    return res.json() as { id: string; secret_key: string };
  };

  beforeAll(async () => {
    h = await harness(engine, {
      console: { assets: null, sessionTtlMs: TTL_MS },
      rateLimits: { lookupPerIp: 1_000, lookupPerTenant: 1_000, failuresPerIp: 1_000, adminPerIp: 1_000 },
    });
    await h.createTenant('acme');
    await h.createTenant('globex');
  });
  afterAll(() => h.close());

  it('lasts its time to live, then the cookie is refused', async () => {
    const k = await key('acme', ['subscribers:read']);
    const s = await signIn(k.secret_key);
    expect(s.res.statusCode, s.res.body).toBe(201);
    expect(s.res.json()).toMatchObject({
      kind: 'tenant',
      tenant: { slug: 'acme', mode: 'live' },
      scopes: ['subscribers:read'],
      expires_at: new Date(h.clock.ms + TTL_MS).toISOString(),
    });
    expect(String(s.res.headers['set-cookie'])).toContain(`Max-Age=${TTL_MS / 1000}`);
    expect((await as(s.cookie, 'GET', '/v1/subscribers')).statusCode).toBe(200);
    h.clock.advance(TTL_MS - 1000);
    expect((await as(s.cookie, 'GET', '/console/api/session')).statusCode).toBe(200);
    h.clock.advance(1000);
    const ended = await as(s.cookie, 'GET', '/v1/subscribers');
    expect(ended.statusCode).toBe(401);
    expect(ended.json().code).toBe('invalid_session');
    expect((await as(s.cookie, 'GET', '/console/api/session')).statusCode).toBe(401);
  });

  it('ends when its key expires, though the session itself has time left', async () => {
    const k = await key('acme', ['subscribers:read'], new Date(h.clock.ms + HOUR_MS).toISOString());
    const s = await signIn(k.secret_key);
    expect(s.res.statusCode).toBe(201);
    expect((await as(s.cookie, 'GET', '/v1/subscribers')).statusCode).toBe(200);
    h.clock.advance(HOUR_MS);
    expect((await as(s.cookie, 'GET', '/v1/subscribers')).statusCode).toBe(401);
  });

  it('acts for its tenant only, with its key scopes, and names the key in what it changes', async () => {
    const k = await key('acme', ['subscribers:read', 'subscribers:write']);
    const s = await signIn(k.secret_key);
    await h.setSubscriber('acme', 'cus_1', 'warning');
    await h.setSubscriber('globex', 'cus_g', 'warning');
    expect((await as(s.cookie, 'GET', '/v1/subscribers/cus_g')).statusCode).toBe(404);
    const set = await as(s.cookie, 'PUT', '/v1/subscribers/cus_1/override', {
      csrf: s.csrf,
      body: { status: 'lockout', reason: 'manual' },
    });
    expect(set.statusCode, set.body).toBe(200);
    const shown = (await as(s.cookie, 'GET', '/v1/subscribers/cus_1')).json() as {
      status: string;
      history: { secret_key_id: string | null }[];
    };
    expect(shown.status).toBe('lockout');
    expect(shown.history.at(-1)?.secret_key_id).toBe(k.id);
    // The key holds no settings:write: nor does its session.
    const settings = await as(s.cookie, 'PATCH', '/v1/settings', { csrf: s.csrf, body: { hmac_required: true } });
    expect(settings.statusCode).toBe(403);
    expect(settings.json().code).toBe('insufficient_scope');
  });

  it("names its key's mode, the one its calls reach, in the sign-in's answer and the page's", async () => {
    const made = await h.admin('POST', '/tenants/acme/keys?mode=test', {
      name: 'console',
      scopes: ['subscribers:read'],
    });
    expect(made.statusCode, made.body).toBe(201);
    const secret = (made.json() as { secret_key: string }).secret_key;
    expect(secret).toMatch(/^sk_test_/);
    await h.setSubscriber('acme', 'cus_live_only', 'warning');
    const s = await signIn(secret);
    expect(s.res.statusCode, s.res.body).toBe(201);
    expect(s.res.json()).toMatchObject({ kind: 'tenant', tenant: { slug: 'acme', mode: 'test' } });
    const again = await as(s.cookie, 'GET', '/console/api/session');
    expect(again.json()).toMatchObject({ tenant: { slug: 'acme', mode: 'test' } });
    // Its calls are the test mode's: the live mode's customer is not there.
    expect((await as(s.cookie, 'GET', '/v1/subscribers/cus_live_only')).statusCode).toBe(404);
  });

  it("the operator's session reaches every tenant, and the bearer still wins over a cookie", async () => {
    const s = await signIn(ADMIN_TOKEN);
    expect(s.res.json()).toMatchObject({ kind: 'operator', tenant: null });
    expect((await as(s.cookie, 'GET', '/admin/v1/tenants/globex/subscribers')).statusCode).toBe(200);
    expect((await as(s.cookie, 'GET', '/v1/subscribers')).json().code).toBe('invalid_session');
    // A request with a bearer is the bearer's, whatever cookie it carries.
    const both = await h.app.inject({
      method: 'GET',
      url: '/admin/v1/tenants',
      headers: { cookie: s.cookie, authorization: 'Bearer wrong-token' },
    });
    expect(both.statusCode).toBe(401);
    expect(both.json().code).toBe('invalid_admin_token');
  });

  it('ends with its tenant, and a malformed or twice-given cookie is no session', async () => {
    await h.createTenant('doomed');
    const k = await key('doomed', ['subscribers:read']);
    const s = await signIn(k.secret_key);
    expect((await h.admin('DELETE', '/tenants/doomed')).statusCode).toBe(204);
    expect((await as(s.cookie, 'GET', '/console/api/session')).statusCode).toBe(401);
    const value = s.cookie.split('=')[1] as string;
    expect(
      (await as(`dunwall_session=${value}; dunwall_session=${value}`, 'GET', '/console/api/session')).statusCode,
    ).toBe(401);
    expect((await as('dunwall_session=../../etc', 'GET', '/console/api/session')).statusCode).toBe(401);
  });

  it('counts wrong credentials against the address, and refuses the next guess with 429', async () => {
    const tight = await harness(engine, {
      rateLimits: { lookupPerIp: 1_000, lookupPerTenant: 1_000, failuresPerIp: 3, adminPerIp: 1_000 },
    });
    try {
      const answers: number[] = [];
      for (let i = 0; i < 5; i++) {
        const res = await tight.app.inject({
          method: 'POST',
          url: '/console/api/session',
          headers: { 'content-type': 'application/json' },
          payload: { credential: `sk_test_${'x'.repeat(40)}` },
        });
        answers.push(res.statusCode);
      }
      expect(answers).toEqual([401, 401, 401, 429, 429]);
      // Even the right token is refused while the address is over its failures: the guesser cannot tell.
      const right = await tight.app.inject({
        method: 'POST',
        url: '/console/api/session',
        headers: { 'content-type': 'application/json' },
        payload: { credential: ADMIN_TOKEN },
      });
      expect(right.statusCode).toBe(429);
    } finally {
      await tight.close();
    }
  });

  it('previews a draft branding for a signed-in page only, answering the snippet from the address', async () => {
    const draft = Buffer.from(
      JSON.stringify({ colors: { accent: '#ff0000' }, texts: { default: { gate_title: 'Pay up' } } }),
    ).toString('base64url');
    const refused = await h.app.inject({ method: 'GET', url: `/console/preview?state=lockout&draft=${draft}` });
    expect(refused.statusCode).toBe(401);
    const s = await signIn(ADMIN_TOKEN);
    const page = await as(s.cookie, 'GET', `/console/preview?state=lockout&draft=${draft}`);
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-security-policy']).toContain("frame-ancestors 'self'");
    expect(page.body).toContain(`data-base-url="/console/preview/api/lockout/${draft}"`);
    expect(page.body).toContain('src="/snippet.js"');
    expect(page.body).not.toContain('data-role');
    // As a member reads it: the snippet's role; any other value is the billing admin's view.
    const member = await as(s.cookie, 'GET', `/console/preview?state=lockout&draft=${draft}&role=member`);
    expect(member.body).toContain(' data-role="member" ');
    const other = await as(s.cookie, 'GET', `/console/preview?state=lockout&draft=${draft}&role=%22%3E%3Cscript%3E`);
    expect(other.body).not.toContain('data-role');
    const status = await h.app.inject({
      method: 'GET',
      url: `/console/preview/api/warning/${draft}/api/subscriber-status/preview?processor_customer_id=cus_preview`,
    });
    expect(status.json()).toEqual({
      status: 'warning',
      entitlements: {},
      card_update_url: null,
      lockout_at: new Date(h.clock.ms + 3 * 86_400_000).toISOString().replace('.000Z', 'Z'),
    });
    const branding = await h.app.inject({
      method: 'GET',
      url: `/console/preview/api/lockout/${draft}/api/branding/preview`,
    });
    expect(branding.json()).toEqual({ colors: { accent: '#ff0000' }, texts: { default: { gate_title: 'Pay up' } } });
    // A draft that is no valid branding (an http link) previews the defaults, never the link.
    const bad = Buffer.from(JSON.stringify({ payment_url: 'http://evil.example/pay' })).toString('base64url');
    expect(
      (await h.app.inject({ method: 'GET', url: `/console/preview/api/lockout/${bad}/api/branding/preview` })).json(),
    ).toEqual({});
    expect(
      (await h.app.inject({ method: 'GET', url: `/console/preview/api/paid/${draft}/api/branding/preview` }))
        .statusCode,
    ).toBe(404);
  });

  it('refuses bad input with a problem naming the field', async () => {
    const empty = await h.app.inject({
      method: 'POST',
      url: '/console/api/session',
      headers: { 'content-type': 'application/json' },
      payload: { credential: '' },
    });
    expect(empty.statusCode).toBe(400);
    const extra = await h.app.inject({
      method: 'POST',
      url: '/console/api/session',
      headers: { 'content-type': 'application/json' },
      payload: { credential: 'x', remember: true },
    });
    expect(extra.statusCode).toBe(400);
    expect((await h.app.inject({ method: 'GET', url: '/console/api/nothing' })).statusCode).toBe(404);
    expect((await h.app.inject({ method: 'GET', url: '/console' })).statusCode).toBe(404);
  });
});
