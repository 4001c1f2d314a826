import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableEngines } from '../helpers/engines.js';
import { ADMIN_TOKEN, harness } from '../helpers/harness.js';
import type { Harness } from '../helpers/harness.js';

const engines = await availableEngines();

describe.each(engines)('admin API, errors ($name)', (engine) => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness(engine);
    await h.createTenant('acme');
  });
  afterAll(() => h.close());

  async function expect400(method: string, url: string, body: unknown, field: string) {
    const res = await h.admin(method, url, body);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.json().code).toBe('invalid_request');
    expect(res.json().detail).toMatch(new RegExp(`^${field.replace(/[[\].]/g, '\\$&')}: `));
  }

  it('409 tenant_exists for a taken slug', async () => {
    const res = await h.admin('POST', '/tenants', { slug: 'acme' });
    expect(res.statusCode).toBe(409);
    expect(res.json().code).toBe('tenant_exists');
  });

  it('400 invalid_request naming the field, for every bad tenant input', async () => {
    await expect400('POST', '/tenants', {}, 'slug');
    for (const slug of ['A', 'a', '-abc', 'ab_c', 'a'.repeat(64), 'acme!', 7])
      await expect400('POST', '/tenants', { slug }, 'slug');
    await expect400('POST', '/tenants', { slug: 'ok-co', tier: 'platinum' }, 'tier');
    await expect400('POST', '/tenants', { slug: 'ok-co', tier: 'Bad Tier' }, 'tier');
    for (const url of [
      'http://billing.test/card',
      'not a url',
      'javascript:alert(1)',
      'https://user:pw@billing.test/',
      `https://x.test/${'a'.repeat(2048)}`,
    ]) {
      await expect400('POST', '/tenants', { slug: 'ok-co', card_update_url: url }, 'card_update_url');
    }
    await expect400('POST', '/tenants', { slug: 'ok-co', hmac_required: 'yes' }, 'hmac_required');
    await expect400(
      'POST',
      '/tenants',
      { slug: 'ok-co', allowed_origins: ['https://app.test/path'] },
      'allowed_origins[0]',
    );
    await expect400(
      'POST',
      '/tenants',
      { slug: 'ok-co', allowed_origins: ['https://ok.test', 'ftp://x.test'] },
      'allowed_origins[1]',
    );
    await expect400('POST', '/tenants', { slug: 'ok-co', allowed_origins: [] }, 'allowed_origins');
    await expect400('POST', '/tenants', { slug: 'ok-co', secret: 'x' }, 'secret');
    expect((await h.admin('GET', '/tenants/ok-co')).statusCode).toBe(404);
  });

  it('400 for bad updates, 404 for an unknown tenant', async () => {
    await expect400('PATCH', '/tenants/acme', {}, 'body');
    await expect400('PATCH', '/tenants/acme', { suspended: 'true' }, 'suspended');
    await expect400('PATCH', '/tenants/acme', { tier: 'nope' }, 'tier');
    await expect400('PATCH', '/tenants/acme', { stripe_webhook_secret: 'sk_live_123' }, 'stripe_webhook_secret');
    await expect400('PATCH', '/tenants/acme', { slug: 'renamed' }, 'slug');
    const res = await h.admin('PATCH', '/tenants/nobody', { suspended: true });
    expect(res.statusCode).toBe(404);
    expect(res.json().code).toBe('tenant_not_found');
    expect((await h.admin('GET', '/tenants/nobody')).json().code).toBe('tenant_not_found');
    expect((await h.admin('POST', '/tenants/nobody/rotate', { key: 'hmac' })).statusCode).toBe(404);
  });

  it('400 for a bad rotation request', async () => {
    await expect400('POST', '/tenants/acme/rotate', { key: 'admin' }, 'key');
    await expect400('POST', '/tenants/acme/rotate', {}, 'key');
  });

  it('400 for bad subscriber input, 404 for unknown ones', async () => {
    await expect400('PUT', '/tenants/acme/subscribers/cus_1', { status: 'blocked' }, 'status');
    await expect400('PUT', '/tenants/acme/subscribers/cus_1', {}, 'status');
    await expect400('PUT', '/tenants/acme/subscribers/cus_1', { status: 'warning', reason: 'Not A Reason!' }, 'reason');
    await expect400('PUT', '/tenants/acme/subscribers/user_1', { status: 'warning' }, 'processor_customer_id');
    const unknownSub = await h.admin('GET', '/tenants/acme/subscribers/cus_nobody');
    expect(unknownSub.statusCode).toBe(404);
    expect(unknownSub.json().code).toBe('subscriber_not_found');
    const unknownTenant = await h.admin('PUT', '/tenants/nobody/subscribers/cus_1', { status: 'warning' });
    expect(unknownTenant.json().code).toBe('tenant_not_found');
  });

  it('400 for bad tiers', async () => {
    await expect400(
      'PUT',
      '/tiers/gold',
      { entitlements: { powered_by_watermark: true, custom_domain: true } },
      'entitlements.downstream_webhooks',
    );
    await expect400(
      'PUT',
      '/tiers/gold',
      { entitlements: { powered_by_watermark: 'yes' } },
      'entitlements.powered_by_watermark',
    );
    await expect400('PUT', '/tiers/gold', { entitlements: { 'Bad-Flag': true } }, 'entitlements.Bad-Flag');
    await expect400('PUT', '/tiers/Gold!', { entitlements: {} }, 'tier name');
  });

  it('400 naming the flag for a flag named as every object is (constructor), which was accepted and dropped', async () => {
    const named = { powered_by_watermark: false, custom_domain: true, downstream_webhooks: false };
    await expect400(
      'PUT',
      '/tiers/gold',
      { entitlements: { ...named, constructor: true } },
      'entitlements.constructor',
    );
    expect((await h.admin('GET', '/tiers')).json().data.map((t: { name: string }) => t.name)).not.toContain('gold');
    for (const flag of ['toString', 'hasOwnProperty', 'valueOf'])
      await expect400('PUT', '/tiers/gold', { entitlements: { ...named, [flag]: true } }, `entitlements.${flag}`);
    // `__proto__` never reaches the schemas: the JSON parser refuses it (prototype poisoning).
    const proto = await h.app.inject({
      method: 'PUT',
      url: '/admin/v1/tiers/gold',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      payload:
        '{"entitlements":{"powered_by_watermark":false,"custom_domain":true,"downstream_webhooks":false,"__proto__":true}}',
    });
    expect([proto.statusCode, proto.json().code]).toEqual([400, 'invalid_request']);
    expect((await h.admin('GET', '/tiers')).json().data.map((t: { name: string }) => t.name)).not.toContain('gold');
    // A flag whose name only begins like one is a flag like any other, and kept.
    const kept = await h.admin('PUT', '/tiers/gold', {
      entitlements: { ...named, constructor_beta: true, to_string: false },
    });
    expect(kept.statusCode, kept.body).toBe(200);
    expect(kept.json().entitlements).toEqual({ ...named, constructor_beta: true, to_string: false });
    expect((await h.admin('DELETE', '/tiers/gold')).statusCode).toBe(204);
  });

  it('400 naming the field for a U+0000 in any free string, which the store cannot hold', async () => {
    const N = '\u0000';
    await h.createTenant('nul-hooks', { tier: 'scale' });
    const cases: [string, string, unknown, string][] = [
      ['POST', '/tenants', { slug: 'nul-co', card_update_url: `https://billing.test/${N}` }, 'card_update_url'],
      ['PATCH', '/tenants/acme', { card_update_url: `https://billing.test/card${N}` }, 'card_update_url'],
      ['PATCH', '/tenants/acme', { branding: { payment_url: `https://pay.test/${N}` } }, 'branding.payment_url'],
      ['PATCH', '/tenants/acme', { branding: { support_url: `https://help.test/${N}` } }, 'branding.support_url'],
      ['PATCH', '/tenants/acme', { branding: { logo_url: `https://cdn.test/logo${N}.png` } }, 'branding.logo_url'],
      [
        'PATCH',
        '/tenants/acme',
        { branding: { texts: { default: { banner_title: `Card ${N}declined` } } } },
        'branding.texts.default.banner_title',
      ],
      ['POST', '/tenants', { slug: 'nul-co', allowed_origins: [`https://app${N}.test`] }, 'allowed_origins[0]'],
      ['POST', '/tenants/nul-hooks/webhook-endpoints', { url: `https://hooks.test/${N}` }, 'url'],
      [
        'POST',
        '/tenants/nul-hooks/webhook-endpoints',
        { url: 'https://hooks.test/a', description: `billing${N}` },
        'description',
      ],
    ];
    for (const [method, url, body, field] of cases) {
      await expect400(method, url, body, field);
      // A name or description the console shows refuses every control; a free text, U+0000 (and the bidirectional controls).
      const detail =
        field === 'description'
          ? `${field}: must be printable text:`
          : `${field}: must not contain the character U+0000`;
      expect((await h.admin(method, url, body)).json().detail).toContain(detail);
    }
    const [endpoint] = (await h.admin('GET', '/tenants/nul-hooks/webhook-endpoints')).json().data as { id: string }[];
    expect(endpoint).toBeUndefined();
    const created = await h.admin('POST', '/tenants/nul-hooks/webhook-endpoints', { url: 'https://hooks.test/a' });
    const id = (created.json() as { id: string }).id;
    await expect400('PATCH', `/tenants/nul-hooks/webhook-endpoints/${id}`, { url: `https://hooks.test/${N}` }, 'url');
    await expect400('PATCH', `/tenants/nul-hooks/webhook-endpoints/${id}`, { description: N }, 'description');
    // Nothing was written: the tenant and the endpoint are as they were.
    expect((await h.admin('GET', '/tenants/nul-co')).statusCode).toBe(404);
    const acme = (await h.admin('GET', '/tenants/acme')).json() as {
      card_update_url: string | null;
      branding: unknown;
    };
    expect(acme.card_update_url).toBeNull();
    expect(acme.branding).toEqual({});
  });

  it('holds a tenant to 20 webhook endpoints when 100 are created at once, the rest refused with 409 webhook_endpoint_limit', async () => {
    await h.createTenant('many-hooks', { tier: 'scale' });
    const answers = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        h.admin('POST', '/tenants/many-hooks/webhook-endpoints', { url: `https://hooks.example.com/${i}` }),
      ),
    );
    const statuses = answers.map((res) => res.statusCode);
    expect(statuses.filter((s) => s === 201)).toHaveLength(20);
    const refused = answers.filter((res) => res.statusCode !== 201);
    expect(refused).toHaveLength(80);
    for (const res of refused) {
      expect(res.statusCode, res.body).toBe(409);
      expect(res.json().code).toBe('webhook_endpoint_limit');
    }
    const listed = await h.admin('GET', '/tenants/many-hooks/webhook-endpoints');
    expect((listed.json() as { data: unknown[] }).data).toHaveLength(20);
  });

  it('400 for a body that is not JSON, 415 for another media type, 413 for a huge one', async () => {
    const broken = await h.app.inject({
      method: 'POST',
      url: '/admin/v1/tenants',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      payload: '{"slug":',
    });
    expect(broken.statusCode).toBe(400);
    expect(broken.json().code).toBe('invalid_request');
    const text = await h.app.inject({
      method: 'POST',
      url: '/admin/v1/tenants',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'text/plain' },
      payload: 'slug=x',
    });
    expect(text.statusCode).toBe(415);
    expect(text.json().code).toBe('unsupported_media_type');
    const huge = await h.app.inject({
      method: 'POST',
      url: '/admin/v1/tenants',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ slug: 'x'.repeat(2 * 1024 * 1024) }),
    });
    expect(huge.statusCode).toBe(413);
    expect(huge.json().code).toBe('payload_too_large');
  });
});
