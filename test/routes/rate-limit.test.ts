import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { parseTrustedProxies } from '../../src/http/client-address.js';
import type { ForwardingHeader, TrustedProxies } from '../../src/http/client-address.js';
import type { RateLimits } from '../../src/runtime/config.js';
import { createLogger } from '../../src/runtime/logger.js';
import { REDIS_RETRY_INTERVAL_MS } from '../../src/http/rate-limit.js';
import { availableEngines } from '../helpers/engines.js';
import { Capture } from '../helpers/log-capture.js';
import { redisAvailable, TEST_REDIS_URL } from '../helpers/redis.js';
import { ADMIN_TOKEN, harness } from '../helpers/harness.js';
import type { CreatedTenant, Harness } from '../helpers/harness.js';

const engines = await availableEngines();

const TIGHT: RateLimits = { lookupPerIp: 5, lookupPerTenant: 1_000, failuresPerIp: 3, adminPerIp: 8 };
const MINUTE_MS = 60_000;

function trusted(value: string, header?: ForwardingHeader): TrustedProxies {
  const parsed = parseTrustedProxies(value, header);
  if (typeof parsed === 'string') throw new Error(parsed);
  return parsed;
}

/** A distinct address per call site, so that tests do not share counters by accident. */
let nextHost = 10;
function freshAddress(): string {
  nextHost += 1;
  return `198.51.100.${nextHost}`;
}

interface Call {
  slug?: string;
  key?: string;
  customerId?: string;
  from?: string;
  headers?: Record<string, string>;
}

function lookupFrom(h: Harness, call: Call): Promise<LightMyRequestResponse> {
  return h.app.inject({
    method: 'GET',
    url: `/api/subscriber-status/${call.slug ?? 'acme'}?processor_customer_id=${call.customerId ?? 'cus_1'}`,
    headers: { ...(call.key ? { authorization: `Bearer ${call.key}` } : {}), ...call.headers },
    remoteAddress: call.from ?? '127.0.0.1',
  });
}

function adminFrom(h: Harness, from: string, token = ADMIN_TOKEN): Promise<LightMyRequestResponse> {
  return h.app.inject({
    method: 'GET',
    url: '/admin/v1/tiers',
    headers: { authorization: `Bearer ${token}` },
    remoteAddress: from,
  });
}

function expectRateLimited(res: LightMyRequestResponse, policy: string): void {
  expect(res.statusCode).toBe(429);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  expect(res.json()).toMatchObject({
    type: 'about:blank',
    title: 'Too Many Requests',
    status: 429,
    code: 'rate_limited',
  });
  const retryAfter = Number(res.headers['retry-after']);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);
  expect(String(res.headers.ratelimit)).toBe(`"${policy}";r=0;t=${retryAfter}`);
  expect(String(res.headers['ratelimit-policy'])).toContain(`"${policy}";q=`);
}

describe.each(engines)('rate limits ($name)', (engine) => {
  let h: Harness;
  let acme: CreatedTenant;
  let other: CreatedTenant;

  beforeAll(async () => {
    h = await harness(engine, { rateLimits: TIGHT });
    acme = await h.createTenant('acme');
    other = await h.createTenant('other-co');
  });
  afterAll(() => h.close());

  it('lookups: per address, with the RateLimit fields on every answer, then 429 with Retry-After until the window ends', async () => {
    const from = freshAddress();
    for (let i = 1; i <= TIGHT.lookupPerIp; i += 1) {
      const res = await lookupFrom(h, { key: acme.publishable_key, from });
      expect(res.statusCode).toBe(200);
      expect(res.headers['ratelimit-policy']).toBe(`"ip";q=5;w=60, "tenant";q=1000;w=60`);
      expect(res.headers.ratelimit).toBe(`"ip";r=${TIGHT.lookupPerIp - i};t=60`);
    }
    const refused = await lookupFrom(h, {
      key: acme.publishable_key,
      from,
      headers: { origin: 'https://shop.example' },
    });
    expectRateLimited(refused, 'ip');
    expect(refused.headers['retry-after']).toBe('60');
    // The snippet must be able to read the refusal to fail open on it.
    expect(refused.headers['access-control-allow-origin']).toBe('*');

    // Another address is not affected.
    expect((await lookupFrom(h, { key: acme.publishable_key, from: freshAddress() })).statusCode).toBe(200);

    h.clock.advance(30_000);
    expect((await lookupFrom(h, { key: acme.publishable_key, from })).headers['retry-after']).toBe('30');
    h.clock.advance(30_000);
    expect((await lookupFrom(h, { key: acme.publishable_key, from })).statusCode).toBe(200);
  });

  it('lookups: per tenant across addresses, with the limit each tenant is given through the admin API', async () => {
    const patched = await h.admin('PATCH', '/tenants/acme', { lookups_per_minute: 3 });
    expect(patched.statusCode).toBe(200);
    expect(patched.json()).toMatchObject({ lookups_per_minute: 3 });
    h.clock.advance(MINUTE_MS);
    for (let i = 0; i < 3; i += 1)
      expect((await lookupFrom(h, { key: acme.publishable_key, from: freshAddress() })).statusCode).toBe(200);
    expectRateLimited(await lookupFrom(h, { key: acme.publishable_key, from: freshAddress() }), 'tenant');
    // Other tenants keep the default.
    const res = await lookupFrom(h, { slug: 'other-co', key: other.publishable_key, from: freshAddress() });
    expect(res.statusCode).toBe(200);
    expect(res.headers['ratelimit-policy']).toContain('"tenant";q=1000;w=60');

    expect((await h.admin('PATCH', '/tenants/acme', { lookups_per_minute: null })).json()).toMatchObject({
      lookups_per_minute: null,
    });
    expect((await lookupFrom(h, { key: acme.publishable_key, from: freshAddress() })).statusCode).toBe(200);
    expect((await h.admin('PATCH', '/tenants/acme', { lookups_per_minute: 0 })).statusCode).toBe(400);
    expect((await h.admin('POST', '/tenants', { slug: 'capped', lookups_per_minute: 7 })).json()).toMatchObject({
      lookups_per_minute: 7,
    });
  });

  it("only lookups that pass every check count against the tenant's quota; a failure counts against its sender", async () => {
    await h.admin('PATCH', '/tenants/other-co', { lookups_per_minute: 3 });
    h.clock.advance(MINUTE_MS);
    // Strangers, some with the tenant's key (it is in its pages' source): wrong key, no key,
    // a customer id that is not one, an hmac that does not match. None uses the tenant's quota.
    for (let i = 0; i < 10; i += 1) {
      expect(
        (await lookupFrom(h, { slug: 'other-co', key: acme.publishable_key, from: freshAddress() })).statusCode,
      ).toBe(401);
      expect((await lookupFrom(h, { slug: 'other-co', from: freshAddress() })).statusCode).toBe(401);
      const bad = await lookupFrom(h, {
        slug: 'other-co',
        key: other.publishable_key,
        customerId: 'nope',
        from: freshAddress(),
      });
      expect(bad.statusCode).toBe(400);
      expect(bad.headers['ratelimit-policy']).toBe('"ip";q=5;w=60');
      const forged = await lookupFrom(h, {
        slug: 'other-co',
        key: other.publishable_key,
        customerId: 'cus_1&hmac=00',
        from: freshAddress(),
      });
      expect(forged.statusCode).toBe(403);
    }
    const res = await lookupFrom(h, { slug: 'other-co', key: other.publishable_key, from: freshAddress() });
    expect(res.statusCode).toBe(200);
    expect(res.headers.ratelimit).toBe('"tenant";r=2;t=60');
    // Each failure counts against its sender's address: past the failure quota it is refused.
    const careless = freshAddress();
    for (let i = 0; i < TIGHT.failuresPerIp; i += 1) {
      expect(
        (await lookupFrom(h, { slug: 'other-co', key: other.publishable_key, customerId: 'nope', from: careless }))
          .statusCode,
      ).toBe(400);
    }
    expectRateLimited(
      await lookupFrom(h, { slug: 'other-co', key: other.publishable_key, from: careless }),
      'failures',
    );
    for (let i = 0; i < 2; i += 1)
      expect(
        (await lookupFrom(h, { slug: 'other-co', key: other.publishable_key, from: freshAddress() })).statusCode,
      ).toBe(200);
    expectRateLimited(
      await lookupFrom(h, { slug: 'other-co', key: other.publishable_key, from: freshAddress() }),
      'tenant',
    );
    h.clock.advance(MINUTE_MS);
    // A preflight is counted against its address only.
    for (let i = 0; i < 5; i += 1) {
      const preflight = await h.app.inject({
        method: 'OPTIONS',
        url: '/api/subscriber-status/other-co',
        remoteAddress: freshAddress(),
      });
      expect(preflight.statusCode).toBe(204);
    }
    expect(
      (await lookupFrom(h, { slug: 'other-co', key: other.publishable_key, from: freshAddress() })).headers.ratelimit,
    ).toBe('"tenant";r=2;t=60');
    await h.admin('PATCH', '/tenants/other-co', { lookups_per_minute: null });
  });

  it("an address refused for its own quota does not use up its tenant's", async () => {
    await h.admin('PATCH', '/tenants/other-co', { lookups_per_minute: 8 });
    h.clock.advance(MINUTE_MS);
    const noisy = freshAddress();
    for (let i = 0; i < 40; i += 1) await lookupFrom(h, { slug: 'other-co', key: other.publishable_key, from: noisy });
    const res = await lookupFrom(h, { slug: 'other-co', key: other.publishable_key, from: freshAddress() });
    expect(res.statusCode).toBe(200);
    expect(res.headers.ratelimit).toBe('"tenant";r=2;t=60');
    await h.admin('PATCH', '/tenants/other-co', { lookups_per_minute: null });
  });

  it('failures: every failed check counts against the address; past the quota it gets 429 everywhere, even with the right key', async () => {
    h.clock.advance(MINUTE_MS);
    const from = freshAddress();
    expect((await lookupFrom(h, { key: 'pk_wrongwrongwrongwrongwrongwrong', from })).statusCode).toBe(401);
    // Once the address has failed, its answers name the failure policy too.
    const named = await lookupFrom(h, { key: acme.publishable_key, from });
    expect(named.headers['ratelimit-policy']).toBe('"ip";q=5;w=60, "failures";q=3;w=60, "tenant";q=1000;w=60');
    expect(named.headers.ratelimit).toBe('"failures";r=2;t=60');
    expect((await lookupFrom(h, { from })).statusCode).toBe(401);
    expect((await lookupFrom(h, { slug: 'no-such-tenant', key: acme.publishable_key, from })).statusCode).toBe(404);
    expectRateLimited(await lookupFrom(h, { key: acme.publishable_key, from }), 'failures');
    // Everywhere a secret does not vouch for the request: a wrong admin token is refused too.
    expectRateLimited(await adminFrom(h, from, `${ADMIN_TOKEN}x`), 'failures');
    // A 400 or a 403 counts too: everything that fails counts against its sender.
    const careless = freshAddress();
    for (let i = 0; i < TIGHT.failuresPerIp; i += 1)
      expect((await lookupFrom(h, { key: acme.publishable_key, customerId: 'bad', from: careless })).statusCode).toBe(
        400,
      );
    expectRateLimited(await lookupFrom(h, { key: acme.publishable_key, from: careless }), 'failures');

    h.clock.advance(MINUTE_MS);
    expect((await lookupFrom(h, { key: acme.publishable_key, from })).statusCode).toBe(200);
  });

  it('failures sent all at once get the failure quota and not one more', async () => {
    h.clock.advance(MINUTE_MS);
    const from = freshAddress();
    const burst = await Promise.all(
      Array.from({ length: 4 }, (_, i) =>
        lookupFrom(h, { slug: i % 2 ? 'acme' : 'nope-co', key: 'pk_wrongwrongwrongwrongwrongwrong', from }),
      ),
    );
    // Which of the four is the one too many depends on the order they finish in.
    const statuses = burst.map((r) => r.statusCode);
    expect(statuses.filter((s) => s === 429)).toHaveLength(1);
    expect(statuses.filter((s) => s === 401 || s === 404)).toHaveLength(TIGHT.failuresPerIp);
    const refused = burst.find((r) => r.statusCode === 429);
    if (!refused) throw new Error('no refusal');
    expectRateLimited(refused, 'failures');
    expect(refused.headers['www-authenticate']).toBeUndefined();
  });

  it('admin API: its own per-address limit, and wrong tokens count as failures', async () => {
    h.clock.advance(MINUTE_MS);
    const from = freshAddress();
    for (let i = 0; i < TIGHT.adminPerIp; i += 1) expect((await adminFrom(h, from)).statusCode).toBe(200);
    expectRateLimited(await adminFrom(h, from), 'admin');

    const guesser = freshAddress();
    for (let i = 0; i < TIGHT.failuresPerIp; i += 1)
      expect((await adminFrom(h, guesser, `${ADMIN_TOKEN}x`)).statusCode).toBe(401);
    expectRateLimited(await adminFrom(h, guesser, `${ADMIN_TOKEN}y`), 'failures');

    // An operator's 404 (a subscriber not on record) is no guess: it never counts.
    h.clock.advance(MINUTE_MS);
    const operator = freshAddress();
    for (let i = 0; i < TIGHT.failuresPerIp + 2; i += 1) {
      const res = await h.app.inject({
        method: 'GET',
        url: `/admin/v1/tenants/acme/subscribers/cus_missing${i}`,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        remoteAddress: operator,
      });
      expect(res.statusCode).toBe(404);
    }
    expect((await adminFrom(h, operator)).statusCode).toBe(200);
  });

  it("a valid admin token is not held to its address's failures (its own typos, its lookups'); a wrong one is, and still counts", async () => {
    h.clock.advance(MINUTE_MS);
    const developer = freshAddress();
    // Failed lookups and one mistyped token: the address is past its failure quota.
    for (let i = 0; i < TIGHT.failuresPerIp - 1; i += 1)
      expect((await lookupFrom(h, { key: 'pk_wrongwrongwrongwrongwrongwrong', from: developer })).statusCode).toBe(401);
    expect((await adminFrom(h, developer, `${ADMIN_TOKEN}x`)).statusCode).toBe(401);
    expectRateLimited(await lookupFrom(h, { key: acme.publishable_key, from: developer }), 'failures');
    // The token itself still works, every call of the admin API, and its answer names its own quota only.
    const ok = await adminFrom(h, developer);
    expect(ok.statusCode).toBe(200);
    expect(ok.headers['ratelimit-policy']).toBe('"admin";q=8;w=60');
    expect(
      (
        await h.app.inject({
          method: 'PATCH',
          url: '/admin/v1/tenants/acme',
          headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
          payload: { card_update_url: null },
          remoteAddress: developer,
        })
      ).statusCode,
    ).toBe(200);
    // A wrong token, a missing one and a malformed one are still refused as guesses.
    expectRateLimited(await adminFrom(h, developer, `${ADMIN_TOKEN}y`), 'failures');
    expectRateLimited(
      await h.app.inject({ method: 'GET', url: '/admin/v1/tiers', remoteAddress: developer }),
      'failures',
    );
    expectRateLimited(await adminFrom(h, developer, 'a b'), 'failures');

    // Under the quota, a wrong token counts as a failure, as before: the fourth is refused.
    const other = freshAddress();
    for (let i = 0; i < TIGHT.failuresPerIp; i += 1)
      expect((await adminFrom(h, other, `${ADMIN_TOKEN}${i}`)).statusCode).toBe(401);
    expectRateLimited(await adminFrom(h, other, `${ADMIN_TOKEN}z`), 'failures');
    expect((await adminFrom(h, other)).statusCode).toBe(200);
    // The token does not lift the admin API's own quota (8 a minute).
    const busy = freshAddress();
    for (let i = 0; i < TIGHT.adminPerIp; i += 1) expect((await adminFrom(h, busy)).statusCode).toBe(200);
    expectRateLimited(await adminFrom(h, busy), 'admin');
  });

  it('without trusted proxies, X-Forwarded-For and Forwarded are ignored: a client cannot pick a fresh address', async () => {
    h.clock.advance(MINUTE_MS);
    const from = freshAddress();
    for (let i = 0; i < TIGHT.lookupPerIp; i += 1) {
      const spoofed = { 'x-forwarded-for': `203.0.113.${i}`, forwarded: `for=203.0.113.${i}` };
      expect((await lookupFrom(h, { key: acme.publishable_key, from, headers: spoofed })).statusCode).toBe(200);
    }
    expect(
      (await lookupFrom(h, { key: acme.publishable_key, from, headers: { 'x-forwarded-for': '203.0.113.99' } }))
        .statusCode,
    ).toBe(429);
  });
});

describe('rate limits behind a trusted proxy', () => {
  let h: Harness;
  let acme: CreatedTenant;
  const proxy = '10.0.0.7';

  beforeAll(async () => {
    const [embedded] = engines;
    if (!embedded) throw new Error('no engine');
    h = await harness(embedded, { rateLimits: TIGHT, trustedProxies: trusted('10.0.0.0/8') });
    acme = await h.createTenant('acme');
  });
  afterAll(() => h.close());

  async function exhaust(headers: Record<string, string>, from = proxy): Promise<LightMyRequestResponse> {
    for (let i = 0; i < TIGHT.lookupPerIp; i += 1)
      expect((await lookupFrom(h, { key: acme.publishable_key, from, headers })).statusCode).toBe(200);
    return lookupFrom(h, { key: acme.publishable_key, from, headers });
  }

  it('counts each client named in X-Forwarded-For on its own, and ignores a Forwarded header the client wrote', async () => {
    expect((await exhaust({ 'x-forwarded-for': '203.0.113.1' })).statusCode).toBe(429);
    expect(
      (await lookupFrom(h, { key: acme.publishable_key, from: proxy, headers: { 'x-forwarded-for': '203.0.113.2' } }))
        .statusCode,
    ).toBe(200);
    const spoof = { 'x-forwarded-for': '203.0.113.1', forwarded: 'for=198.51.100.250' };
    expect((await lookupFrom(h, { key: acme.publishable_key, from: proxy, headers: spoof })).statusCode).toBe(429);
    // IPv6 clients are counted per /64.
    expect((await exhaust({ 'x-forwarded-for': '2001:db8:cafe::17' })).statusCode).toBe(429);
    expect(
      (
        await lookupFrom(h, {
          key: acme.publishable_key,
          from: proxy,
          headers: { 'x-forwarded-for': '2001:db8:cafe::99' },
        })
      ).statusCode,
    ).toBe(429);
  });

  it('behind proxies that write RFC 7239 Forwarded, that header names the client', async () => {
    const [embedded] = engines;
    if (!embedded) throw new Error('no engine');
    const f = await harness(embedded, { rateLimits: TIGHT, trustedProxies: trusted('10.0.0.0/8', 'forwarded') });
    try {
      const t = await f.createTenant('acme');
      const call = (forwarded: string) =>
        lookupFrom(f, {
          key: t.publishable_key,
          from: proxy,
          headers: { forwarded, 'x-forwarded-for': '198.51.100.250' },
        });
      for (let i = 0; i < TIGHT.lookupPerIp; i += 1)
        expect((await call('for="203.0.113.1:4711";proto=https')).statusCode).toBe(200);
      expect((await call('for=203.0.113.1')).statusCode).toBe(429);
      expect((await call('for=203.0.113.2')).statusCode).toBe(200);
    } finally {
      await f.close();
    }
  });

  it('trusts only what its proxies wrote: a hop the client prepends changes nothing, and a request not from a proxy is its own peer', async () => {
    h.clock.advance(MINUTE_MS);
    // The client sent "X-Forwarded-For: <anything>"; the proxy appended the real peer.
    expect((await exhaust({ 'x-forwarded-for': '192.0.2.1, 203.0.113.50' })).statusCode).toBe(429);
    const spoof = await lookupFrom(h, {
      key: acme.publishable_key,
      from: proxy,
      headers: { 'x-forwarded-for': '192.0.2.2, 203.0.113.50' },
    });
    expect(spoof.statusCode).toBe(429);
    // Two trusted hops: the first untrusted address from the right is the client.
    const chained = await lookupFrom(h, {
      key: acme.publishable_key,
      from: proxy,
      headers: { 'x-forwarded-for': '203.0.113.50, 10.1.1.1' },
    });
    expect(chained.statusCode).toBe(429);
    // Headers from a peer that is not a proxy prove nothing.
    expect((await exhaust({ 'x-forwarded-for': '203.0.113.77' }, '198.51.100.200')).statusCode).toBe(429);
    expect(
      (
        await lookupFrom(h, {
          key: acme.publishable_key,
          from: '198.51.100.200',
          headers: { 'x-forwarded-for': '203.0.113.78' },
        })
      ).statusCode,
    ).toBe(429);
  });
});

const redisUp = await redisAvailable('the shared rate limit tests are');

describe.skipIf(!redisUp)('rate limits shared through Redis', () => {
  const prefix = `dunwall-test:${randomBytes(6).toString('hex')}:`;
  const clients: Redis[] = [];
  const harnesses: Harness[] = [];

  beforeAll(async () => {
    const [embedded] = engines;
    if (!embedded) throw new Error('no engine');
    // Two instances on one store, as behind a load balancer.
    for (let i = 0; i < 2; i += 1) {
      const redis = new Redis(TEST_REDIS_URL, { enableOfflineQueue: true, maxRetriesPerRequest: 1 });
      clients.push(redis);
      harnesses.push(await harness(embedded, { rateLimits: TIGHT, redis, redisPrefix: prefix }));
    }
    for (const h of harnesses) await h.createTenant('acme');
  });
  afterAll(async () => {
    for (const h of harnesses) await h.close();
    const [first] = clients;
    if (first) {
      const keys = await first.keys(`${prefix}*`);
      if (keys.length > 0) await first.del(...keys);
    }
    for (const c of clients) c.disconnect();
  });

  it('one address gets one quota across instances', async () => {
    const [a, b] = harnesses;
    if (!a || !b) throw new Error('two instances expected');
    // Each instance has its own embedded store, so each has its own 'acme' and key; the
    // per-address counter is what they share.
    const keyA = (await a.admin('POST', '/tenants/acme/rotate', { key: 'publishable' })).json() as {
      publishable_key: string;
    };
    const keyB = (await b.admin('POST', '/tenants/acme/rotate', { key: 'publishable' })).json() as {
      publishable_key: string;
    };
    const from = freshAddress();
    const answers: number[] = [];
    for (let i = 0; i < TIGHT.lookupPerIp + 2; i += 1) {
      const [h, k] = i % 2 === 0 ? [a, keyA.publishable_key] : [b, keyB.publishable_key];
      answers.push((await lookupFrom(h, { key: k, from })).statusCode);
    }
    expect(answers).toEqual([200, 200, 200, 200, 200, 429, 429]);
  });

  it('failures counted on one instance refuse the address on the other', async () => {
    const [a, b] = harnesses;
    if (!a || !b) throw new Error('two instances expected');
    const from = freshAddress();
    for (let i = 0; i < TIGHT.failuresPerIp; i += 1)
      expect((await lookupFrom(a, { key: 'pk_nopenopenopenopenopenopenope', from })).statusCode).toBe(401);
    expectRateLimited(await lookupFrom(b, { key: 'pk_nopenopenopenopenopenopenope', from }), 'failures');
    expectRateLimited(await adminFrom(b, from, `${ADMIN_TOKEN}x`), 'failures');
  });

  it('a Redis that does not answer lets requests through uncounted (fail open), never a 5xx', async () => {
    const dead = new Redis('redis://127.0.0.1:1', {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      lazyConnect: true,
      retryStrategy: () => null,
    });
    dead.on('error', () => {});
    const [embedded] = engines;
    if (!embedded) throw new Error('no engine');
    const h = await harness(embedded, { rateLimits: TIGHT, redis: dead, redisPrefix: prefix });
    try {
      const t = await h.createTenant('acme');
      const from = freshAddress();
      for (let i = 0; i < TIGHT.lookupPerIp * 2; i += 1)
        expect((await lookupFrom(h, { key: t.publishable_key, from })).statusCode).toBe(200);
    } finally {
      await h.close();
      dead.disconnect();
    }
  });
});

describe('a Redis that stops answering', () => {
  it('costs one command timeout, then lookups go uncounted for a second, and the log says so once', async () => {
    // Accepts connections and never answers: every command waits out its timeout.
    let commands = 0;
    const sockets = new Set<Socket>();
    const silent = createServer((socket) => {
      sockets.add(socket);
      socket.on('data', (chunk: Buffer) => {
        commands += (chunk.toString('latin1').match(/evalsha/gi) ?? []).length;
      });
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as AddressInfo;
    const redis = new Redis({
      host: '127.0.0.1',
      port,
      enableReadyCheck: false,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: 100,
      lazyConnect: true,
    });
    redis.on('error', () => {});
    await redis.connect();
    const [embedded] = engines;
    if (!embedded) throw new Error('no engine');
    const logs = new Capture();
    const h = await harness(embedded, {
      rateLimits: TIGHT,
      redis,
      redisPrefix: 'silent:',
      logger: createLogger('info', logs),
    });
    try {
      const t = await h.createTenant('acme');
      h.clock.advance(REDIS_RETRY_INTERVAL_MS);
      const before = commands;
      const from = freshAddress();
      const answers: number[] = [];
      for (let i = 0; i < TIGHT.lookupPerIp * 3; i += 1)
        answers.push((await lookupFrom(h, { key: t.publishable_key, from })).statusCode);
      expect(answers.every((s) => s === 200)).toBe(true);
      // The first lookup asked (its address and failure counts, at once); the others did not wait.
      expect(commands - before).toBe(2);
      h.clock.advance(REDIS_RETRY_INTERVAL_MS);
      expect((await lookupFrom(h, { key: t.publishable_key, from })).statusCode).toBe(200);
      expect(commands - before).toBe(4);
      expect(
        logs.entries().filter((e) => e.msg === 'rate limit store unavailable: requests go uncounted until it is back'),
      ).toHaveLength(1);
    } finally {
      await h.close();
      redis.disconnect();
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });
});
