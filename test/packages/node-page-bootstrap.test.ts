import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { computeHmac } from '../../src/domain/hmac.js';
import { createDunwallWith } from '../../packages/node/src/follower.js';
import type { Internals } from '../../packages/node/src/follower.js';
import type { DunwallCopy, DunwallOptions } from '../../packages/node/src/index.js';
import { ADMIN_TOKEN, FakeClock } from '../helpers/harness.js';
import { startService } from '../helpers/dunwall-service.js';
import type { Service } from '../helpers/dunwall-service.js';

/**
 * `dunwall.identity()` and `dunwall.pageBootstrap()` against a real Dunwall on loopback: a
 * signed-out visitor asks nothing; a customer the fresh copy vouches is active is answered
 * from memory; any other is asked of Dunwall (the lookup's answer to a secret key: pay link,
 * scheduled lockout, the tenant's card update link); the hmac is the tenant's; and every
 * failure (Dunwall away, silent, refusing the key) gives a page without a bootstrap, or the
 * copy's answer while it is fresh, never a throw, and within the bound given.
 */
const CARD_URL = 'https://billing.acme.test/card';

let service: Service;
let hmacSecret = '';
const open: DunwallCopy[] = [];

beforeAll(async () => {
  service = await startService();
  const admin = async (method: 'POST' | 'PATCH', url: string, body: unknown) => {
    const res = await service.app.inject({
      method,
      url: `/admin/v1${url}`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      payload: JSON.stringify(body),
    });
    if (res.statusCode !== 200) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`);
    return res.json() as Record<string, unknown>;
  };
  hmacSecret = String((await admin('POST', '/tenants/acme/rotate', { key: 'hmac' })).hmac_secret);
  await admin('PATCH', '/tenants/acme', { card_update_url: CARD_URL });
});
afterEach(async () => {
  await Promise.all(open.splice(0).map((d) => d.close()));
});
afterAll(async () => {
  await service?.close();
});

/** A copy of the test tenant, recording the paths it asked. */
function copyOf(
  options: Partial<DunwallOptions> = {},
  internals: Internals = {},
): { dunwall: DunwallCopy; asked: string[] } {
  const asked: string[] = [];
  const dunwall = createDunwallWith(
    { baseUrl: service.baseUrl, secretKey: service.secretKey, hmacSecret, ...options },
    {
      ...internals,
      fetch: (input, init) => {
        asked.push(new URL(String(input)).pathname);
        return (internals.fetch ?? fetch)(input, init);
      },
    },
  );
  open.push(dunwall);
  return { dunwall, asked };
}

const lookups = (asked: string[]) => asked.filter((p) => p.startsWith('/v1/subscribers/'));

describe('identity()', () => {
  it("signs the customer id with the tenant's HMAC secret; nobody for a signed-out visitor or a value that is not an id", () => {
    const { dunwall } = copyOf();
    expect(dunwall.identity('cus_1')).toEqual({ customer: 'cus_1', hmac: computeHmac(hmacSecret, 'cus_1') });
    for (const nobody of [null, undefined, '', 'x'.repeat(256), 42 as unknown as string])
      expect(dunwall.identity(nobody)).toEqual({ customer: null, hmac: null });
    const unsigned = copyOf({ hmacSecret: undefined }).dunwall;
    expect(unsigned.identity('cus_1')).toEqual({ customer: 'cus_1', hmac: null });
    expect(() => copyOf({ hmacSecret: 42 as unknown as string })).toThrow(TypeError);
  });
});

describe('pageBootstrap()', () => {
  it('asks nothing for a signed-out visitor', async () => {
    const { dunwall, asked } = copyOf();
    await dunwall.ready();
    expect(await dunwall.pageBootstrap(null)).toEqual({ customer: null, hmac: null, bootstrap: null });
    expect(lookups(asked)).toEqual([]);
  });

  it('answers a customer the fresh copy vouches is active from memory, and asks Dunwall for the others: the lookup’s answer, card update link included', async () => {
    const clock = new FakeClock(Date.now());
    const { dunwall, asked } = copyOf({ now: clock.now });
    await dunwall.ready();
    const s = service.subscribers;

    const active = await dunwall.pageBootstrap(s.active);
    expect(active).toEqual({
      customer: s.active,
      hmac: computeHmac(hmacSecret, s.active),
      bootstrap: {
        status: 'active',
        lockout_at: null,
        pay_url: null,
        card_update_url: null,
        entitlements: expect.any(Object),
        at: clock.ms,
      },
    });
    expect(active.bootstrap?.entitlements).toMatchObject({
      powered_by_watermark: expect.any(Boolean),
      custom_domain: expect.any(Boolean),
    });
    expect(lookups(asked)).toEqual([]);

    const dunning = await dunwall.pageBootstrap(s.dunning);
    expect(dunning.bootstrap).toEqual({
      status: 'warning',
      lockout_at: service.lockoutAt,
      pay_url: service.payUrls.dunning,
      card_update_url: CARD_URL,
      entitlements: active.bootstrap?.entitlements,
      at: clock.ms,
    });
    const locked = await dunwall.pageBootstrap(s.lockout);
    expect(locked.bootstrap).toMatchObject({ status: 'lockout', pay_url: service.payUrls.lockout, lockout_at: null });
    expect(locked.hmac).toBe(computeHmac(hmacSecret, s.lockout));
    expect(lookups(asked)).toEqual([`/v1/subscribers/${s.dunning}/status`, `/v1/subscribers/${s.lockout}/status`]);

    // Stale, the copy vouches for no one: even an active customer is asked.
    clock.advance(60_001);
    expect((await dunwall.pageBootstrap(s.active)).bootstrap).toMatchObject({ status: 'active' });
    expect(lookups(asked)).toHaveLength(3);
  });

  it('falls back to the fresh copy’s answer when asking fails, and to no bootstrap without one; never throws', async () => {
    const failing: Internals = {
      fetch: (input, init) =>
        new URL(String(input)).pathname.startsWith('/v1/subscribers/')
          ? Promise.reject(new TypeError('fetch failed'))
          : fetch(input, init),
    };
    const { dunwall, asked } = copyOf({}, failing);
    await dunwall.ready();
    const locked = await dunwall.pageBootstrap(service.subscribers.lockout);
    expect(locked.bootstrap).toMatchObject({
      status: 'lockout',
      pay_url: service.payUrls.lockout,
      card_update_url: null,
    });
    expect(lookups(asked)).toHaveLength(1);
  });

  it('gives a page no bootstrap, with its identity, when Dunwall is away, silent, or refuses the key', async () => {
    // Away: nothing listens.
    const gone = createServer();
    await new Promise<void>((done) => gone.listen(0, '127.0.0.1', done));
    const closedPort = (gone.address() as AddressInfo).port;
    await new Promise((done) => gone.close(done));
    const away = copyOf({ baseUrl: `http://127.0.0.1:${closedPort}` }).dunwall;
    expect(await away.pageBootstrap('cus_1')).toEqual({
      customer: 'cus_1',
      hmac: computeHmac(hmacSecret, 'cus_1'),
      bootstrap: null,
    });

    // Silent: it takes the connection and never answers; the page waits its bound, then renders without.
    const held: Server = createServer(() => {});
    await new Promise<void>((done) => held.listen(0, '127.0.0.1', done));
    try {
      const silent = copyOf({ baseUrl: `http://127.0.0.1:${(held.address() as AddressInfo).port}` }).dunwall;
      expect((await silent.pageBootstrap('cus_1', 200)).bootstrap).toBeNull();
    } finally {
      held.closeAllConnections();
      await new Promise((done) => held.close(done));
    }

    // A refused key.
    const refused = copyOf({ secretKey: `sk_test_${randomBytes(20).toString('hex')}` }).dunwall;
    expect(await refused.pageBootstrap(service.subscribers.lockout)).toMatchObject({
      customer: service.subscribers.lockout,
      bootstrap: null,
    });
  });
});
