import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { brandingProblem } from '../../src/domain/branding.js';
import { availableEngines } from '../helpers/engines.js';
import { harness } from '../helpers/harness.js';
import type { Harness } from '../helpers/harness.js';
import { socketRequest } from '../helpers/socket.js';

const engines = await availableEngines();

const BRANDING = {
  payment_url: 'https://billing.acme.test/pay',
  support_url: 'https://acme.test/help',
  logo_url: 'https://acme.test/logo.svg',
  colors: { accent: '#0a7cff', background: '#ffffff', text: '#111111' },
  texts: {
    default: {
      gate_title: 'Your subscription is paused',
      gate_action: 'Pay now',
      member_body: 'Ask Dana, your billing admin, to update the card.',
    },
    fr: { gate_title: 'Votre abonnement est suspendu', gate_action: 'Payer', member_gate_body: 'Demandez à Dana.' },
    'fr-CA': { gate_action: 'Payer maintenant' },
  },
};

describe.each(engines)("a tenant's branding, set once and served to pages ($name)", (engine) => {
  let h: Harness;
  beforeAll(async () => {
    h = await harness(engine);
    await h.createTenant('acme');
  });
  afterAll(() => h.close());

  const served = (slug: string, headers: Record<string, string> = {}) =>
    socketRequest(h.app, 'GET', `/api/branding/${slug}`, headers);

  it('is set through the admin API, shown with the tenant, and served publicly, cacheable, from memory', async () => {
    expect((await served('acme')).body).toBe('{}');
    const patched = await h.admin('PATCH', '/tenants/acme', { branding: BRANDING });
    expect(patched.statusCode, patched.body).toBe(200);
    expect((patched.json() as { branding: unknown }).branding).toEqual(BRANDING);
    const res = await served('acme', { origin: 'https://shop.example' });
    expect(res.statusCode).toBe(200);
    expect(JSON.parse(res.body)).toEqual(BRANDING);
    expect(res.headers['cache-control']).toBe('public, max-age=300');
    expect(res.headers['access-control-allow-origin']).toBe('*');
    const etag = String(res.headers.etag);
    expect(etag).toMatch(/^"[A-Za-z0-9_-]{22}"$/);
    const again = await served('acme', { 'if-none-match': etag });
    expect([again.statusCode, again.body]).toEqual([304, '']);
    // A change gives a new tag.
    await h.admin('PATCH', '/tenants/acme', { branding: { ...BRANDING, colors: { accent: '#ff0000' } } });
    const changed = await served('acme', { 'if-none-match': etag });
    expect(changed.statusCode).toBe(200);
    expect(JSON.parse(changed.body)).toMatchObject({ colors: { accent: '#ff0000' } });
  });

  it('answers 304 to a weak tag, a list naming the tag, and *, as RFC 9110 compares If-None-Match; 200 to other tags', async () => {
    await h.createTenant('cached-co');
    await h.admin('PATCH', '/tenants/cached-co', { branding: { payment_url: 'https://pay.cached.test/' } });
    const first = await served('cached-co');
    const etag = String(first.headers.etag);
    const opaque = etag.slice(1, -1);
    for (const presented of [`W/${etag}`, `"other", ${etag}`, `W/"x,y" ,W/${etag}`, '*', ` ${etag} `]) {
      const res = await served('cached-co', { 'if-none-match': presented });
      expect([res.statusCode, res.body, res.headers.etag], presented).toEqual([304, '', etag]);
    }
    for (const presented of ['"other"', `W/"${opaque}x"`, opaque, `"${opaque}`, `"a", ${opaque}`, '']) {
      const res = await served('cached-co', { 'if-none-match': presented });
      expect(res.statusCode, presented).toBe(200);
    }
  });

  it('tells nobody which tenants exist: any other slug gets the empty branding, as a tenant with none', async () => {
    await h.createTenant('plain-co');
    const plain = await served('plain-co');
    for (const slug of ['nobody-co', 'NOT A SLUG', 'a']) {
      const res = await served(encodeURIComponent(slug));
      expect([res.statusCode, res.body, res.headers.etag], slug).toEqual([200, '{}', plain.headers.etag]);
    }
  });

  it('refuses a branding that is not one, naming the field', async () => {
    for (const [branding, field] of [
      [{ payment_url: 'http://billing.acme.test/pay' }, 'branding.payment_url'],
      [{ logo_url: 'https://u:p@acme.test/logo.svg' }, 'branding.logo_url'],
      [{ colors: { accent: 'blue' } }, 'colors'],
      [{ texts: { 'Not A Locale': { gate_title: 'x' } } }, 'texts'],
      [{ texts: { fr: { gate_title: '' } } }, 'gate_title'],
      [{ texts: { fr: { member_body: ' ' } } }, 'member_body'],
      [{ texts: { fr: { member_gate_body: 'x'.repeat(301) } } }, 'member_gate_body'],
      [{ texts: { fr: { headline: 'x' } } }, 'headline'],
      [
        { texts: { fr: { banner_countdown: "L'accès sera suspendu bientôt." } } },
        'banner_countdown: must hold {time} exactly once',
      ],
      [{ sparkles: true }, 'sparkles'],
    ] as const) {
      const res = await h.admin('PATCH', '/tenants/acme', { branding });
      expect(res.statusCode, JSON.stringify(branding)).toBe(400);
      expect((res.json() as { detail: string }).detail, JSON.stringify(branding)).toContain(field);
    }
  });
});

describe('the countdown and pay texts', () => {
  const countdown = (text: unknown) => brandingProblem({ texts: { fr: { banner_countdown: text } } });

  it('takes a sentence with {time} once and {date} at most once, and a pay action', () => {
    expect(countdown("L'accès sera suspendu {time}.")).toBeNull();
    expect(countdown('Access will be paused {time} ({date}).')).toBeNull();
    expect(countdown('{date}: {time}')).toBeNull();
    expect(
      brandingProblem({ texts: { default: { pay_action: 'Pay the invoice' }, fr: { pay_action: 'Payer' } } }),
    ).toBeNull();
  });

  it.each([
    ['Access will be paused soon.', 'must hold {time} exactly once'],
    ['{time} and again {time}', 'must hold {time} exactly once'],
    ['{time} on {date}, {date}', 'may hold {date} at most once'],
    ['{time} for {name}', 'has an unknown placeholder {name} (only {time} and {date})'],
    ['{time} <b>{html}</b>', 'has an unknown placeholder {html} (only {time} and {date})'],
    ['{TIME}', 'has an unknown placeholder {TIME} (only {time} and {date})'],
    ['{ time }', 'has an unknown placeholder { time } (only {time} and {date})'],
    ['{}{time}', 'has an unknown placeholder {} (only {time} and {date})'],
  ])('refuses %j: %s', (text, why) => {
    expect(countdown(text)).toBe(`branding.texts.fr.banner_countdown: ${why}`);
  });

  it('holds the countdown to the length and emptiness rules of every text', () => {
    expect(countdown('')).toContain('must be 1 to 300 characters');
    expect(countdown(`{time}${'x'.repeat(300)}`)).toContain('must be 1 to 300 characters');
    expect(countdown(42)).toContain('must be 1 to 300 characters');
    expect(brandingProblem({ texts: { fr: { pay_action: ' ' } } })).toContain(
      'pay_action: must be 1 to 300 characters',
    );
  });
});
