import { Writable } from 'node:stream';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { buildApp } from '../../src/http/app.js';
import { sha256 } from '../../src/domain/keys.js';
import { STORE_UNAVAILABLE_RETRY_AFTER_S } from '../../src/http/problems.js';
import { createLogger } from '../../src/runtime/logger.js';
import { ReadModel } from '../../src/readmodel/index.js';
import type { Store } from '../../src/store/index.js';
import { timingSafeEqualSpy } from '../helpers/crypto-spy.js';
import { availableEngines } from '../helpers/engines.js';
import { ADMIN_TOKEN, computeHmac, harness } from '../helpers/harness.js';
import type { CreatedTenant, Harness } from '../helpers/harness.js';

// Every secret comparison must go through timingSafeEqual: the spy shows that it does.
vi.mock('node:crypto', async (orig) => (await import('../helpers/crypto-spy.js')).spiedCrypto(orig));
const spy = () => timingSafeEqualSpy.fn;

const engines = await availableEngines();

class Capture extends Writable {
  lines: string[] = [];
  override _write(chunk: Buffer, _enc: BufferEncoding, done: () => void): void {
    this.lines.push(chunk.toString('utf8'));
    done();
  }
}

describe.each(engines)('lookup, security ($name)', (engine) => {
  let h: Harness;
  let acme: CreatedTenant;
  let beta: CreatedTenant;
  const logs = new Capture();

  beforeAll(async () => {
    h = await harness(engine, { logger: createLogger('trace', logs), logLookups: true });
    acme = await h.createTenant('acme');
    beta = await h.createTenant('beta');
    await h.setSubscriber('acme', 'cus_shared', 'lockout');
    await h.setSubscriber('beta', 'cus_shared', 'warning');
    await h.setSubscriber('acme', 'cus_only_acme', 'lockout');
  });
  afterAll(() => h.close());
  beforeEach(() => {
    spy().mockClear();
  });

  it('compares the hmac through timingSafeEqual on 32-byte digests, whichever byte differs', async () => {
    const good = computeHmac(acme.hmac_secret, 'cus_shared');
    const firstByteWrong = `${good[0] === 'a' ? 'b' : 'a'}${good.slice(1)}`;
    const lastByteWrong = `${good.slice(0, 63)}${good[63] === 'a' ? 'b' : 'a'}`;
    const keyDigest = sha256(acme.publishable_key);
    for (const hmac of [firstByteWrong, lastByteWrong, good]) {
      spy().mockClear();
      const res = await h.lookup('acme', { key: acme.publishable_key, customerId: 'cus_shared', hmac });
      expect(res.statusCode).toBe(hmac === good ? 200 : 403);
      // One comparison per current HMAC secret, whichever byte differs (the publishable key's
      // own comparison, made once per tenant snapshot, aside).
      expect(spy().mock.calls.filter(([a]) => !(a as Buffer).equals(keyDigest))).toHaveLength(1);
      for (const [a, b] of spy().mock.calls) {
        expect((a as Buffer).length).toBe(32);
        expect((b as Buffer).length).toBe(32);
      }
    }
  });

  it('tries every HMAC secret during a rotation, with no early exit', async () => {
    const t = await h.createTenant('rot-sec');
    await h.admin('POST', '/tenants/rot-sec/rotate', { key: 'hmac' });
    spy().mockClear();
    const res = await h.lookup('rot-sec', {
      key: t.publishable_key,
      customerId: 'cus_1',
      hmac: computeHmac(t.hmac_secret, 'cus_1'),
    });
    expect(res.statusCode).toBe(200);
    // The publishable key's own comparison (made once per tenant snapshot) aside: one per secret.
    const keyDigest = sha256(t.publishable_key);
    const hmacCalls = spy().mock.calls.filter(([a]) => !(a as Buffer).equals(keyDigest));
    expect(hmacCalls).toHaveLength(2);
  });

  it('checks the publishable key by its SHA-256 digest, through timingSafeEqual', async () => {
    const wrong = `${acme.publishable_key.slice(0, -1)}${acme.publishable_key.endsWith('A') ? 'B' : 'A'}`;
    const res = await h.lookup('acme', { key: wrong, customerId: 'cus_shared' });
    expect(res.statusCode).toBe(401);
    // Once per key of the tenant's: its live key, and its test mode's.
    expect(spy()).toHaveBeenCalledTimes(2);
    const [presented, stored] = spy().mock.calls[0] as [Buffer, Buffer];
    expect(presented.length).toBe(32);
    expect(stored.length).toBe(32);
    expect(presented.toString('utf8')).not.toContain('pk_');
  });

  it("isolates tenants: a tenant's key never reads another tenant's subscribers", async () => {
    const cross = await h.lookup('beta', { key: acme.publishable_key, customerId: 'cus_shared' });
    expect(cross.statusCode).toBe(401);
    const own = await h.lookup('beta', { key: beta.publishable_key, customerId: 'cus_shared' });
    expect(own.json().status).toBe('warning');
    const mine = await h.lookup('acme', { key: acme.publishable_key, customerId: 'cus_shared' });
    expect(mine.json().status).toBe('lockout');
    // A customer only acme knows is unknown to beta, so active.
    const unknown = await h.lookup('beta', { key: beta.publishable_key, customerId: 'cus_only_acme' });
    expect(unknown.body).toBe('{"status":"active"}');
    // acme's hmac secret does not sign for beta.
    const hmac = computeHmac(acme.hmac_secret, 'cus_shared');
    expect((await h.lookup('beta', { key: beta.publishable_key, customerId: 'cus_shared', hmac })).statusCode).toBe(
      403,
    );
    // Path tricks do not reach another tenant.
    for (const url of [
      '/api/subscriber-status/beta/../acme',
      '/api/subscriber-status/acme%2F..%2Fbeta',
      '/api/subscriber-status/ACME',
    ]) {
      const res = await h.app.inject({
        method: 'GET',
        url: `${url}?processor_customer_id=cus_shared`,
        headers: { authorization: `Bearer ${beta.publishable_key}` },
      });
      expect(res.statusCode).not.toBe(200);
    }
  });

  it('never logs the Authorization header, the hmac value or a secret', async () => {
    const hmac = computeHmac(acme.hmac_secret, 'cus_shared');
    await h.lookup('acme', { key: acme.publishable_key, customerId: 'cus_shared', hmac });
    await h.lookup('acme', { key: acme.publishable_key, customerId: 'cus_shared', hmac: 'f'.repeat(64) });
    // The query parser decodes names, so an encoded name is the same parameter: still redacted.
    const encoded = await h.lookup('acme', {
      key: acme.publishable_key,
      customerId: 'cus_shared',
      query: `%68mac=${hmac}`,
    });
    expect(encoded.statusCode).toBe(200);
    // Separators the query parser does not split on: the hmac is then part of another value, never logged.
    const other = computeHmac(acme.hmac_secret, 'cus_only_acme');
    await h.lookup('acme', { key: acme.publishable_key, query: `processor_customer_id=cus_only_acme;hmac=${other}` });
    await h.lookup('acme', { key: acme.publishable_key, query: `processor_customer_id=cus_only_acme?hmac=${other}` });
    await h.lookup('acme', { key: acme.publishable_key, query: `processor_customer_id=cus_only_acme&${other}` });
    await h.admin('PATCH', '/tenants/acme', { stripe_webhook_secret: 'whsec_testsecretvalue1234567890' });
    const all = logs.lines.join('');
    expect(all).toContain('[redacted]');
    expect(all).toContain('/api/subscriber-status/acme');
    // Parameter names only: not even a customer id is logged.
    expect(all).toContain('processor_customer_id=[redacted]');
    expect(all).not.toMatch(/processor_customer_id=cus_/);
    for (const secret of [
      acme.publishable_key,
      acme.hmac_secret,
      beta.hmac_secret,
      hmac,
      other,
      'f'.repeat(64),
      ADMIN_TOKEN,
      'whsec_testsecretvalue1234567890',
    ]) {
      expect(all).not.toContain(secret);
    }
  });
});

describe('5xx answers', () => {
  /**
   * A store that works until `broken` is set, then fails every call with `err`: the read
   * model loads while it works, as it would have before an outage.
   */
  async function breakable(err: Error) {
    const engine = engines[0];
    if (!engine) throw new Error('no engine');
    const opened = await engine.open();
    const state = { broken: false };
    /** The role, failing every call once `broken` is set. */
    const breaking = <T extends object>(role: T): T =>
      new Proxy(role, {
        get: (target, prop) => {
          const value = Reflect.get(target, prop) as unknown;
          if (!state.broken || typeof value !== 'function')
            return typeof value === 'function' ? value.bind(target) : value;
          return () => Promise.reject(err);
        },
      });
    // The roles these answers read: the tenants (the admin API), the change log (the read model), health (/readyz).
    const store: Store = {
      ...opened.store,
      tenants: breaking(opened.store.tenants),
      changes: breaking(opened.store.changes),
      maintenance: breaking(opened.store.maintenance),
    };
    const model = await ReadModel.open(store.changes, { staleIfErrorMs: 0 });
    const app = await buildApp({ store, model, adminToken: ADMIN_TOKEN });
    return {
      app,
      model,
      state,
      async close() {
        await app.close();
        await model.close();
        await opened.cleanup();
      },
    };
  }

  it('never carry an internal message', async () => {
    const t = await breakable(new Error('relation "tenants" does not exist at line 1'));
    t.state.broken = true;
    const res = await t.app.inject({
      method: 'GET',
      url: '/admin/v1/tenants',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({
      type: 'about:blank',
      title: 'Internal Server Error',
      status: 500,
      code: 'internal_error',
      detail: 'An internal error occurred.',
    });
    expect(res.body).not.toContain('relation');
    await t.close();
  });

  it('answer 503 store_unavailable when the store cannot be reached and the read model may not answer, CORS headers included', async () => {
    const down = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    const t = await breakable(down);
    const { app } = t;
    t.state.broken = true;
    // The model finds the store gone; with DUNWALL_STALE_IF_ERROR_MS=0 it may not answer from memory.
    await t.model.catchUp();
    const res = await app.inject({
      method: 'GET',
      url: '/api/subscriber-status/acme?processor_customer_id=cus_1',
      headers: { authorization: 'Bearer pk_x' },
    });
    expect(res.statusCode).toBe(503);
    expect(res.json().code).toBe('store_unavailable');
    expect(res.headers['retry-after']).toBe(String(STORE_UNAVAILABLE_RETRY_AFTER_S));
    expect(res.body).not.toContain('5432');
    expect(res.headers['access-control-allow-origin']).toBe('*');
    // Check 1 needs no store: a request without a key is a 401 even while the store is down.
    const anonymous = await app.inject({
      method: 'GET',
      url: '/api/subscriber-status/acme?processor_customer_id=cus_1',
    });
    expect(anonymous.statusCode).toBe(401);
    expect(anonymous.json().code).toBe('missing_publishable_key');
    const ready = await app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(503);
    expect(ready.headers['retry-after']).toBe(String(STORE_UNAVAILABLE_RETRY_AFTER_S));
    const adminDown = await app.inject({
      method: 'GET',
      url: '/admin/v1/tenants',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect([adminDown.statusCode, adminDown.json().code, adminDown.headers['retry-after']]).toEqual([
      503,
      'store_unavailable',
      String(STORE_UNAVAILABLE_RETRY_AFTER_S),
    ]);
    expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    // The store back: the next catch-up puts the model in touch again.
    t.state.broken = false;
    await t.model.catchUp();
    const back = await app.inject({
      method: 'GET',
      url: '/api/subscriber-status/acme?processor_customer_id=cus_1',
      headers: { authorization: 'Bearer pk_x' },
    });
    expect([back.statusCode, back.json().code]).toEqual([404, 'tenant_not_found']);
    await t.close();
  });
});
