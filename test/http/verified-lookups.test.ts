import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableEngines } from '../helpers/engines.js';
import { computeHmac, harness } from '../helpers/harness.js';
import type { CreatedTenant, Harness } from '../helpers/harness.js';

/**
 * The lookup remembers a query whose checks passed, with its Authorization header, for the
 * tenant as it was prepared: each test asks once (remembered), changes one thing, and asks
 * again through a real socket. The answer must be what the checks say now.
 */
const [engine] = await availableEngines();
if (engine === undefined) throw new Error('no engine');

describe(`remembered lookups (${engine.name})`, () => {
  let h: Harness;
  let n = 0;
  const DAY_MS = 86_400_000;

  beforeAll(async () => {
    h = await harness(engine);
  });
  afterAll(() => h.close());

  async function tenant(fields: Record<string, unknown> = {}): Promise<CreatedTenant & { slug: string }> {
    const slug = `memo-${(n += 1)}`;
    const t = await h.createTenant(slug, fields);
    await h.setSubscriber(slug, 'cus_m', 'lockout');
    return { ...t, slug };
  }
  const signedLookup = (t: CreatedTenant & { slug: string }, extra: { key?: string; hmac?: string } = {}) =>
    h.lookup(t.slug, {
      key: extra.key ?? t.publishable_key,
      customerId: 'cus_m',
      hmac: extra.hmac ?? computeHmac(t.hmac_secret, 'cus_m'),
    });

  it('answers the same lookup the same way, and follows the status', async () => {
    const t = await tenant();
    expect(JSON.parse((await signedLookup(t)).body)).toMatchObject({ status: 'lockout' });
    expect(JSON.parse((await signedLookup(t)).body)).toMatchObject({ status: 'lockout' });
    await h.setSubscriber(t.slug, 'cus_m', 'active');
    expect(JSON.parse((await signedLookup(t)).body)).toMatchObject({ status: 'active' });
  });

  it('checks again once the tenant is suspended, requires an hmac, or is gone', async () => {
    const t = await tenant();
    const unsigned = () => h.lookup(t.slug, { key: t.publishable_key, customerId: 'cus_m' });
    expect((await unsigned()).statusCode).toBe(200);
    expect((await signedLookup(t)).statusCode).toBe(200);

    expect((await h.admin('PATCH', `/tenants/${t.slug}`, { hmac_required: true })).statusCode).toBe(200);
    expect(JSON.parse((await unsigned()).body)).toMatchObject({ code: 'hmac_required' });
    expect((await signedLookup(t)).statusCode).toBe(200);

    expect((await h.admin('PATCH', `/tenants/${t.slug}`, { suspended: true })).statusCode).toBe(200);
    expect((await signedLookup(t)).statusCode).toBe(402);
    expect((await h.admin('PATCH', `/tenants/${t.slug}`, { suspended: false })).statusCode).toBe(200);
    expect((await signedLookup(t)).statusCode).toBe(200);

    expect((await h.admin('DELETE', `/tenants/${t.slug}`)).statusCode).toBe(204);
    expect((await signedLookup(t)).statusCode).toBe(404);
  });

  it('never takes another header or another hmac for the one that passed', async () => {
    const t = await tenant();
    const other = await tenant();
    expect((await signedLookup(t)).statusCode).toBe(200);
    // The same query with another tenant's key, a key that is not one, the header padded.
    expect((await signedLookup(t, { key: other.publishable_key })).statusCode).toBe(401);
    expect((await signedLookup(t, { key: `${t.publishable_key}x` })).statusCode).toBe(401);
    const padded = await h.lookup(t.slug, {
      customerId: 'cus_m',
      hmac: computeHmac(t.hmac_secret, 'cus_m'),
      headers: { authorization: `Bearer   ${t.publishable_key}` },
    });
    expect(padded.statusCode).toBe(200);
    const wrong = computeHmac(other.hmac_secret, 'cus_m');
    expect(JSON.parse((await signedLookup(t, { hmac: wrong })).body)).toMatchObject({ code: 'hmac_mismatch' });
    expect((await h.lookup(t.slug, { customerId: 'cus_m' })).statusCode).toBe(401);
    expect((await signedLookup(t)).statusCode).toBe(200);
  });

  it("checks again when a rotated key's or secret's overlap ends", async () => {
    const t = await tenant();
    expect((await signedLookup(t)).statusCode).toBe(200);
    const pk = (await h.admin('POST', `/tenants/${t.slug}/rotate`, { key: 'publishable' })).json() as {
      publishable_key: string;
    };
    const secret = (await h.admin('POST', `/tenants/${t.slug}/rotate`, { key: 'hmac' })).json() as {
      hmac_secret: string;
    };
    // Both old ones still hold: remembered again for the rotated tenant.
    expect((await signedLookup(t)).statusCode).toBe(200);
    expect((await signedLookup(t)).statusCode).toBe(200);
    h.clock.advance(DAY_MS + 1);
    expect((await signedLookup(t)).statusCode).toBe(401);
    const withNewKey = { key: pk.publishable_key };
    expect(JSON.parse((await signedLookup(t, withNewKey)).body)).toMatchObject({ code: 'hmac_mismatch' });
    const fresh = { ...withNewKey, hmac: computeHmac(secret.hmac_secret, 'cus_m') };
    expect((await signedLookup(t, fresh)).statusCode).toBe(200);
    expect((await signedLookup(t, fresh)).statusCode).toBe(200);
  });

  it('answers a long query, which it does not remember, like any other', async () => {
    const t = await tenant();
    const pad = `pad=${'x'.repeat(600)}`;
    for (let i = 0; i < 2; i += 1) {
      const res = await h.lookup(t.slug, {
        key: t.publishable_key,
        customerId: 'cus_m',
        hmac: computeHmac(t.hmac_secret, 'cus_m'),
        query: pad,
      });
      expect(JSON.parse(res.body)).toMatchObject({ status: 'lockout' });
    }
  });
});
