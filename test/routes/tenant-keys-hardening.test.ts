import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableEngines } from '../helpers/engines.js';
import { harness } from '../helpers/harness.js';
import type { Harness } from '../helpers/harness.js';
import { socketRequest } from '../helpers/socket.js';

/**
 * What the tenant API refuses or bounds so that a key, a replay or a name cannot reach further
 * than it should, through a real socket on both engines: a key made by an expiring key
 * expires with it, an expired key is not rotated, a replay needs subscribers:read, names
 * refuse bidirectional controls, and a receiver's redirect is answered escaped.
 */
const engines = await availableEngines();
const HOUR_MS = 3_600_000;

describe.each(engines)('Tenant keys and endpoints under attack ($name)', (engine) => {
  let h: Harness;

  beforeAll(async () => {
    h = await harness(engine);
    await h.createTenant('hard', { tier: 'scale' });
  });
  afterAll(() => h.close());

  async function operatorKey(
    body: Record<string, unknown>,
  ): Promise<{ id: string; secret_key: string; expires_at: string | null }> {
    const res = await h.admin('POST', '/tenants/hard/keys', body);
    expect(res.statusCode, res.body).toBe(201);
    await h.model.catchUp();
    return res.json() as { id: string; secret_key: string; expires_at: string | null };
  }

  const call = (key: string, method: string, path: string, body?: unknown) =>
    socketRequest(
      h.app,
      method,
      `/v1${path}`,
      { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body === undefined ? undefined : JSON.stringify(body),
    );

  it('a key created by an expiring key expires no later than its creator, and the answer says so', async () => {
    const creatorExpiry = new Date(h.clock.ms + HOUR_MS).toISOString();
    const creator = await operatorKey({
      name: 'minter',
      scopes: ['keys:write', 'status:read'],
      expires_at: creatorExpiry,
    });
    // No expiry asked: the creator's.
    const unbounded = await call(creator.secret_key, 'POST', '/keys', { name: 'child', scopes: ['status:read'] });
    expect(unbounded.statusCode, unbounded.body).toBe(201);
    expect(unbounded.json()).toMatchObject({ expires_at: creatorExpiry, expires_at_clamped_by: creator.id });
    // A later one: the creator's.
    const later = await call(creator.secret_key, 'POST', '/keys', {
      name: 'child later',
      scopes: ['status:read'],
      expires_at: new Date(h.clock.ms + 48 * HOUR_MS).toISOString(),
    });
    expect(later.statusCode, later.body).toBe(201);
    expect(later.json()).toMatchObject({ expires_at: creatorExpiry, expires_at_clamped_by: creator.id });
    // An earlier one: as asked, nothing said.
    const earlierAt = new Date(h.clock.ms + HOUR_MS / 2).toISOString();
    const earlier = await call(creator.secret_key, 'POST', '/keys', {
      name: 'child earlier',
      scopes: ['status:read'],
      expires_at: earlierAt,
    });
    expect(earlier.statusCode, earlier.body).toBe(201);
    expect(earlier.json()).toMatchObject({ expires_at: earlierAt });
    expect(earlier.json()).not.toHaveProperty('expires_at_clamped_by');
    // Past the creator's expiry, its child is refused as the creator is.
    await h.model.catchUp();
    const child = (unbounded.json() as { secret_key: string }).secret_key;
    expect((await call(child, 'GET', '/statuses')).statusCode).toBe(200);
    h.clock.ms += HOUR_MS + 1000;
    try {
      expect((await call(creator.secret_key, 'GET', '/statuses')).statusCode).toBe(401);
      expect((await call(child, 'GET', '/statuses')).statusCode).toBe(401);
    } finally {
      h.clock.ms -= HOUR_MS + 1000;
    }
    // A key with no expiry, or the operator, creates keys with none.
    const forever = await operatorKey({ name: 'forever', scopes: ['keys:write', 'status:read'] });
    const free = await call(forever.secret_key, 'POST', '/keys', { name: 'free', scopes: ['status:read'] });
    expect(free.json()).toMatchObject({ expires_at: null });
  });

  it('refuses to rotate an expired key with a clear 409, and rotates a live one', async () => {
    const short = await operatorKey({
      name: 'short',
      scopes: ['status:read'],
      expires_at: new Date(h.clock.ms + 60_000).toISOString(),
    });
    const live = await h.admin('POST', `/tenants/hard/keys/${short.id}/rotate`, {});
    expect(live.statusCode, live.body).toBe(200);
    h.clock.ms += 120_000;
    const expired = await h.admin('POST', `/tenants/hard/keys/${short.id}/rotate`, {});
    expect(expired.statusCode, expired.body).toBe(409);
    expect(expired.json()).toMatchObject({ code: 'secret_key_expired' });
    expect(expired.body).not.toContain('sk_');
    // The same through the tenant API.
    const admin = await operatorKey({ name: 'rotator', scopes: ['keys:write', 'status:read'] });
    const viaKey = await call(admin.secret_key, 'POST', `/keys/${short.id}/rotate`, {});
    expect(viaKey.statusCode, viaKey.body).toBe(409);
    expect(viaKey.json()).toMatchObject({ code: 'secret_key_expired' });
  });

  it('a replay needs subscribers:read besides webhooks:write', async () => {
    const created = await h.admin('POST', '/tenants/hard/webhook-endpoints', {
      url: 'https://hooks.example.com/replay',
    });
    expect(created.statusCode, created.body).toBe(201);
    const endpoint = (created.json() as { id: string }).id;
    const writer = await operatorKey({ name: 'hooks only', scopes: ['webhooks:write'] });
    const reader = await operatorKey({ name: 'hooks and reads', scopes: ['webhooks:write', 'subscribers:read'] });
    const body = { since: new Date(h.clock.ms - 7 * 24 * HOUR_MS).toISOString() };
    const refused = await call(writer.secret_key, 'POST', `/webhook-endpoints/${endpoint}/replay`, body);
    expect(refused.statusCode, refused.body).toBe(403);
    expect(refused.json()).toMatchObject({ code: 'insufficient_scope' });
    expect(refused.json().detail).toContain('subscribers:read');
    const allowed = await call(reader.secret_key, 'POST', `/webhook-endpoints/${endpoint}/replay`, body);
    expect(allowed.statusCode, allowed.body).toBe(202);
  });

  it.each([
    ['U+202E right-to-left override', 'billing\u202Etxt.exe'],
    ['U+202A left-to-right embedding', '\u202Aname'],
    ['U+2066 isolate', 'a\u2066b'],
    ['U+2069 pop isolate', 'a\u2069'],
    ['U+200E left-to-right mark', '\u200Ename'],
    ['U+200F right-to-left mark', 'name\u200F'],
    ['a C0 control (ESC)', 'name\u001b[31m'],
    ['a C1 control (CSI)', 'name\u009b31m'],
    ['a line break', 'line\nbreak'],
  ])('refuses a name with %s, for a key and an endpoint', async (_what, name) => {
    const key = await h.admin('POST', '/tenants/hard/keys', { name, scopes: ['status:read'] });
    expect(key.statusCode, key.body).toBe(400);
    expect(key.json()).toMatchObject({ code: 'invalid_request' });
    expect(key.json().detail).toContain('name');
    const endpoint = await h.admin('POST', '/tenants/hard/webhook-endpoints', {
      url: 'https://hooks.example.com/named',
      description: name,
    });
    expect(endpoint.statusCode, endpoint.body).toBe(400);
    expect(endpoint.json().detail).toContain('description');
  });

  it('accepts names in any script', async () => {
    for (const name of ['Facturation', 'الفوترة', 'חיוב', '請求 サーバー', 'ci — deploy']) {
      const res = await h.admin('POST', '/tenants/hard/keys', { name, scopes: ['status:read'] });
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json().name).toBe(name);
      await h.admin('DELETE', `/tenants/hard/keys/${(res.json() as { id: string }).id}`);
    }
  });

  it("answers a receiver's redirect target with its control bytes escaped", async () => {
    const created = await h.admin('POST', '/tenants/hard/webhook-endpoints', {
      url: 'https://hooks.example.com/redirects',
    });
    const endpoint = (created.json() as { id: string }).id;
    const { db } = h;
    const [ep] = await db.query<{ id: number; tenant_id: number }>(
      'SELECT id, tenant_id FROM webhook_endpoints WHERE uid = $1',
      [endpoint],
    );
    const [ev] = await db.query<{ id: number }>(
      `INSERT INTO webhook_events (uid, tenant_id, type, processor_customer_id, sequence, payload, created_at)
       VALUES ('msg_redirect_1', $1, 'subscriber.status_changed', 'cus_redirect', 1, '{}', now()) RETURNING id`,
      [ep?.tenant_id],
    );
    // What the deliverer records of a 302 (src/downstream/send.ts): the receiver's Location as it sent it.
    const error =
      'HTTP 302: redirects are not followed (to https://evil.example/\u001b]8;;https://x\u0007\u001b[2J\r\nX-Forged: 1\u202Egnp.exe)';
    await db.query(
      `INSERT INTO webhook_deliveries (endpoint_id, event_id, state, attempts, next_attempt_at, give_up_at, last_attempt_at, last_status, last_error, created_at)
       VALUES ($1, $2, 'failed', 1, now(), now(), now(), 302, $3, now())`,
      [ep?.id, ev?.id, error],
    );
    await db.query(
      `INSERT INTO webhook_attempts (endpoint_id, event_id, attempted_at, status_code, latency_ms, outcome, error) VALUES ($1, $2, now(), 302, 5, 'failed', $3)`,
      [ep?.id, ev?.id, error],
    );
    const reader = await operatorKey({ name: 'attempts', scopes: ['subscribers:read'] });
    for (const [path, field] of [
      [`/webhook-endpoints/${endpoint}/attempts`, 'error'],
      [`/webhook-endpoints/${endpoint}/messages`, 'last_error'],
    ] as const) {
      for (const res of [await call(reader.secret_key, 'GET', path), await h.admin('GET', `/tenants/hard${path}`)]) {
        expect(res.statusCode, res.body).toBe(200);
        const text = (res.json() as { data: Record<string, string>[] }).data[0]?.[field] ?? '';
        // eslint-disable-next-line no-control-regex
        expect(text).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e]/);
        expect(text).toBe(
          'HTTP 302: redirects are not followed (to https://evil.example/\\u001b]8;;https://x\\u0007\\u001b[2J\\u000d\\u000aX-Forged: 1\\u202egnp.exe)',
        );
      }
    }
  });
});
