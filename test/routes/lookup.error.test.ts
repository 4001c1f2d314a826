import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableEngines } from '../helpers/engines.js';
import { computeHmac, harness } from '../helpers/harness.js';
import type { CreatedTenant, Harness } from '../helpers/harness.js';

const engines = await availableEngines();

function expectProblem(
  res: { statusCode: number; headers: Record<string, unknown>; json(): unknown },
  status: number,
  code: string,
) {
  expect(res.statusCode).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  const body = res.json() as Record<string, unknown>;
  expect(Object.keys(body)).toEqual(['type', 'title', 'status', 'code', 'detail']);
  expect(body).toMatchObject({ type: 'about:blank', status, code });
  expect(typeof body.detail).toBe('string');
  if (status === 401) expect(res.headers['www-authenticate']).toBe('Bearer');
}

describe.each(engines)('lookup, errors ($name)', (engine) => {
  let h: Harness;
  let acme: CreatedTenant;
  let other: CreatedTenant;

  beforeAll(async () => {
    h = await harness(engine);
    acme = await h.createTenant('acme');
    other = await h.createTenant('other-co');
    await h.createTenant('strict-co', { hmac_required: true });
  });
  afterAll(() => h.close());

  it('1: 401 missing_publishable_key without an Authorization header, or an empty one', async () => {
    expectProblem(await h.lookup('acme', { customerId: 'cus_1' }), 401, 'missing_publishable_key');
    expectProblem(
      await h.lookup('acme', { customerId: 'cus_1', headers: { authorization: '' } }),
      401,
      'missing_publishable_key',
    );
  });

  it('1: 401 invalid_publishable_key for a malformed header', async () => {
    for (const authorization of ['Basic abc', 'Bearer', 'Bearer a b', `Token ${acme.publishable_key}`, 'Bearer ä']) {
      expectProblem(
        await h.lookup('acme', { customerId: 'cus_1', headers: { authorization } }),
        401,
        'invalid_publishable_key',
      );
    }
  });

  it('2: 404 tenant_not_found for an unknown or impossible slug', async () => {
    expectProblem(
      await h.lookup('nobody', { key: acme.publishable_key, customerId: 'cus_1' }),
      404,
      'tenant_not_found',
    );
    expectProblem(await h.lookup('UPPER', { key: acme.publishable_key, customerId: 'cus_1' }), 404, 'tenant_not_found');
    expectProblem(await h.lookup('a', { key: acme.publishable_key, customerId: 'cus_1' }), 404, 'tenant_not_found');
  });

  it("3: 401 invalid_publishable_key for a wrong key or another tenant's key", async () => {
    expectProblem(
      await h.lookup('acme', { key: 'pk_notarealkeynotarealkey1234', customerId: 'cus_1' }),
      401,
      'invalid_publishable_key',
    );
    expectProblem(
      await h.lookup('acme', { key: other.publishable_key, customerId: 'cus_1' }),
      401,
      'invalid_publishable_key',
    );
  });

  it('4: 402 tenant_suspended, and back to 200 when resumed', async () => {
    await h.admin('PATCH', '/tenants/other-co', { suspended: true });
    expectProblem(
      await h.lookup('other-co', { key: other.publishable_key, customerId: 'cus_1' }),
      402,
      'tenant_suspended',
    );
    await h.admin('PATCH', '/tenants/other-co', { suspended: false });
    expect((await h.lookup('other-co', { key: other.publishable_key, customerId: 'cus_1' })).statusCode).toBe(200);
  });

  it('5: 400 missing_processor_customer_id', async () => {
    expectProblem(await h.lookup('acme', { key: acme.publishable_key }), 400, 'missing_processor_customer_id');
  });

  it('5: 400 invalid_processor_customer_id for a bad, empty, too long or repeated value', async () => {
    const bad = ['cust_1', 'cus_', 'cus_a-b', 'cus_a b', '', `cus_${'a'.repeat(252)}`, 'CUS_abc'];
    for (const id of bad) {
      expectProblem(
        await h.lookup('acme', { key: acme.publishable_key, customerId: id }),
        400,
        'invalid_processor_customer_id',
      );
    }
    expect(
      (await h.lookup('acme', { key: acme.publishable_key, customerId: `cus_${'a'.repeat(251)}` })).statusCode,
    ).toBe(200);
    const repeated = await h.lookup('acme', {
      key: acme.publishable_key,
      query: 'processor_customer_id=cus_1&processor_customer_id=cus_2',
    });
    expectProblem(repeated, 400, 'invalid_processor_customer_id');
  });

  it('6: 403 hmac_mismatch for a wrong, malformed, other-secret or repeated hmac', async () => {
    const good = computeHmac(acme.hmac_secret, 'cus_1');
    const wrong = [
      computeHmac(acme.hmac_secret, 'cus_2'),
      computeHmac(other.hmac_secret, 'cus_1'),
      good.slice(0, 63),
      `${good}0`,
      Buffer.from(good, 'hex').toString('base64'),
      'zz'.repeat(32),
      '',
    ];
    for (const hmac of wrong) {
      expectProblem(
        await h.lookup('acme', { key: acme.publishable_key, customerId: 'cus_1', hmac }),
        403,
        'hmac_mismatch',
      );
    }
    const repeated = await h.lookup('acme', {
      key: acme.publishable_key,
      customerId: 'cus_1',
      query: `hmac=${good}&hmac=${good}`,
    });
    expectProblem(repeated, 403, 'hmac_mismatch');
  });

  it('6: 403 hmac_required when the tenant requires it and none is given', async () => {
    const strict = await h.admin('GET', '/tenants/strict-co');
    expect(strict.json().hmac_required).toBe(true);
    const rotated = await h.admin('POST', '/tenants/strict-co/rotate', { key: 'publishable' });
    const key = rotated.json().publishable_key as string;
    expectProblem(await h.lookup('strict-co', { key, customerId: 'cus_1' }), 403, 'hmac_required');
  });

  it('runs the checks in the contract order: the first failure answers', async () => {
    // No header and an unknown tenant: check 1 answers.
    expectProblem(await h.lookup('nobody', {}), 401, 'missing_publishable_key');
    // Malformed header, unknown tenant, no customer id: check 1.
    expectProblem(await h.lookup('nobody', { headers: { authorization: 'Basic x' } }), 401, 'invalid_publishable_key');
    // Wrong key and unknown tenant: check 2 before check 3.
    expectProblem(await h.lookup('nobody', { key: 'pk_wrongwrongwrongwrongwrong1' }), 404, 'tenant_not_found');
    // Wrong key, suspended tenant: check 3 before check 4.
    await h.admin('PATCH', '/tenants/other-co', { suspended: true });
    expectProblem(await h.lookup('other-co', { key: acme.publishable_key }), 401, 'invalid_publishable_key');
    // Suspended, no customer id: check 4 before check 5.
    expectProblem(await h.lookup('other-co', { key: other.publishable_key }), 402, 'tenant_suspended');
    await h.admin('PATCH', '/tenants/other-co', { suspended: false });
    // Bad customer id and bad hmac: check 5 before check 6.
    expectProblem(
      await h.lookup('acme', { key: acme.publishable_key, customerId: 'bad', hmac: 'x' }),
      400,
      'invalid_processor_customer_id',
    );
  });

  it('carries CORS headers on errors, so the snippet can read them', async () => {
    const res = await h.lookup('nobody', {
      key: acme.publishable_key,
      customerId: 'cus_1',
      headers: { origin: 'https://x.test' },
    });
    expect(res.statusCode).toBe(404);
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(res.headers['cache-control']).toBe('no-store');
  });

  it('answers malformed and oversized URLs as problems, in the contract order, with the lookup headers', async () => {
    const long = `/api/subscriber-status/${'a'.repeat(400)}?processor_customer_id=cus_1`;
    const badEncoding = '/api/subscriber-status/%ZZ?processor_customer_id=cus_1';
    for (const url of [long, badEncoding]) {
      const anonymous = await h.app.inject({ method: 'GET', url });
      expectProblem(anonymous, 401, 'missing_publishable_key');
      expect(anonymous.headers['access-control-allow-origin']).toBe('*');
      expect(anonymous.headers['cache-control']).toBe('no-store');
      expect(anonymous.headers['x-request-id']).toBeDefined();
      expectProblem(
        await h.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${acme.publishable_key}` } }),
        404,
        'tenant_not_found',
      );
    }
    expectProblem(await h.app.inject({ method: 'GET', url: `/admin/v1/tenants/%ZZ` }), 404, 'not_found');
  });

  it('answers unknown routes with 404 not_found as a problem', async () => {
    expectProblem(await h.app.inject({ method: 'GET', url: '/nope' }), 404, 'not_found');
    expectProblem(await h.app.inject({ method: 'GET', url: '/api/subscriber-status' }), 404, 'not_found');
  });
});
