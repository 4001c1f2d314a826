import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { App } from '../../src/http/app.js';
import { createMetrics } from '../../src/metrics/index.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { ADMIN_TOKEN, buildAppWithModel, computeHmac, FakeClock } from '../helpers/harness.js';
import { socketRequest } from '../helpers/socket.js';

/** Headers that differ between two answers of one request by nature: the time, the connection, the id. */
const PER_ANSWER = new Set(['date', 'connection', 'keep-alive', 'x-request-id', 'transfer-encoding']);

function comparable(headers: IncomingHttpHeaders | OutgoingHttpHeaders): Record<string, unknown> {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !PER_ANSWER.has(name)));
}

describe('the lookup on the fast path, in front of Fastify', () => {
  let store: Store;
  let app: App;
  const clock = new FakeClock();
  const metrics = createMetrics();
  /** URLs Fastify's lifecycle saw, on the real socket and through inject alike. */
  const routed: string[] = [];
  const keys: Record<string, string> = {};
  const secrets: Record<string, string> = {};

  const admin = (method: string, url: string, body?: unknown) =>
    app.inject({
      method: method as 'POST',
      url: `/admin/v1${url}`,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    });

  beforeAll(async () => {
    store = await openStore({ engine: 'embedded', dataDir: null });
    app = await buildAppWithModel({ store, adminToken: ADMIN_TOKEN, now: clock.now, metrics });
    app.addHook('onRequest', async (req) => {
      routed.push(req.url);
    });
    for (const [slug, fields] of [
      ['acme', { card_update_url: 'https://billing.acme.test/card' }],
      ['strict-co', { hmac_required: true }],
      ['walled', { allowed_origins: ['https://app.walled.test'] }],
      ['paused', {}],
    ] as const) {
      const created = (await admin('POST', '/tenants', { slug, ...fields })).json() as {
        publishable_key: string;
        hmac_secret: string;
      };
      keys[slug] = created.publishable_key;
      secrets[slug] = created.hmac_secret;
    }
    await admin('PATCH', '/tenants/paused', { suspended: true });
    for (const [id, status] of [
      ['cus_w', 'warning'],
      ['cus_l', 'lockout'],
      ['cus_a', 'active'],
    ]) {
      await admin('PUT', `/tenants/acme/subscribers/${id}`, { status });
      await admin('PUT', `/tenants/strict-co/subscribers/${id}`, { status });
    }
  });
  afterAll(async () => {
    await app.close();
    await store.close();
  });

  const bearer = (slug: string) => ({ authorization: `Bearer ${keys[slug] ?? ''}` });
  const hmac = (slug: string, id: string) => computeHmac(secrets[slug] ?? '', id);

  const cases: [string, () => { path: string; headers: Record<string, string | string[]> }][] = [
    ['a warning', () => ({ path: '/api/subscriber-status/acme?processor_customer_id=cus_w', headers: bearer('acme') })],
    [
      'a lockout with its hmac',
      () => ({
        path: `/api/subscriber-status/strict-co?processor_customer_id=cus_l&hmac=${hmac('strict-co', 'cus_l')}`,
        headers: bearer('strict-co'),
      }),
    ],
    [
      'an uppercase hmac, parameters in another order',
      () => ({
        path: `/api/subscriber-status/strict-co?hmac=${hmac('strict-co', 'cus_a').toUpperCase()}&x=1&processor_customer_id=cus_a`,
        headers: bearer('strict-co'),
      }),
    ],
    [
      'an unknown subscriber',
      () => ({ path: '/api/subscriber-status/acme?processor_customer_id=cus_nobody', headers: bearer('acme') }),
    ],
    [
      'a percent-encoded parameter name and value',
      () => ({ path: '/api/subscriber-status/acme?processor%5Fcustomer_id=cus%5Fw', headers: bearer('acme') }),
    ],
    ['no Authorization', () => ({ path: '/api/subscriber-status/acme?processor_customer_id=cus_w', headers: {} })],
    [
      'a malformed Authorization',
      () => ({
        path: '/api/subscriber-status/acme?processor_customer_id=cus_w',
        headers: { authorization: 'Basic abc' },
      }),
    ],
    [
      'two Authorization headers',
      () => ({
        path: '/api/subscriber-status/acme?processor_customer_id=cus_w',
        headers: { authorization: [bearer('acme').authorization, bearer('acme').authorization] },
      }),
    ],
    [
      'an unknown tenant',
      () => ({ path: '/api/subscriber-status/nobody-co?processor_customer_id=cus_w', headers: bearer('acme') }),
    ],
    [
      "another tenant's key",
      () => ({ path: '/api/subscriber-status/strict-co?processor_customer_id=cus_w', headers: bearer('acme') }),
    ],
    [
      'a suspended tenant',
      () => ({ path: '/api/subscriber-status/paused?processor_customer_id=cus_w', headers: bearer('paused') }),
    ],
    ['no customer id', () => ({ path: '/api/subscriber-status/acme', headers: bearer('acme') })],
    [
      'a repeated customer id',
      () => ({
        path: '/api/subscriber-status/acme?processor_customer_id=cus_w&processor_customer_id=cus_l',
        headers: bearer('acme'),
      }),
    ],
    [
      'a customer id that is not one',
      () => ({ path: '/api/subscriber-status/acme?processor_customer_id=cus_%20x', headers: bearer('acme') }),
    ],
    [
      'a wrong hmac',
      () => ({
        path: `/api/subscriber-status/strict-co?processor_customer_id=cus_l&hmac=${'0'.repeat(64)}`,
        headers: bearer('strict-co'),
      }),
    ],
    [
      'a repeated hmac',
      () => ({
        path: `/api/subscriber-status/strict-co?processor_customer_id=cus_l&hmac=${hmac('strict-co', 'cus_l')}&hmac=${hmac('strict-co', 'cus_l')}`,
        headers: bearer('strict-co'),
      }),
    ],
    [
      'a missing required hmac',
      () => ({ path: '/api/subscriber-status/strict-co?processor_customer_id=cus_l', headers: bearer('strict-co') }),
    ],
    [
      'an allowed origin',
      () => ({
        path: '/api/subscriber-status/walled?processor_customer_id=cus_w',
        headers: { ...bearer('walled'), origin: 'https://app.walled.test' },
      }),
    ],
    [
      'an origin not allowed',
      () => ({
        path: '/api/subscriber-status/walled?processor_customer_id=cus_w',
        headers: { ...bearer('walled'), origin: 'https://evil.test' },
      }),
    ],
    [
      'a failure with an origin not allowed',
      () => ({
        path: '/api/subscriber-status/walled?processor_customer_id=nope',
        headers: { ...bearer('walled'), origin: 'https://evil.test' },
      }),
    ],
  ];

  it.each(cases)(
    '%s: the same answer on the fast path as through Fastify, and Fastify never saw the socket request',
    async (_name, make) => {
      const { path, headers } = make();
      routed.length = 0;
      const fast = await socketRequest(app, 'GET', path, headers);
      expect(routed, 'Fastify routed a lookup the fast path should have answered').toEqual([]);
      const slow = await app.inject({ method: 'GET', url: path, headers });
      expect(routed).toEqual([path]);
      expect(fast.statusCode).toBe(slow.statusCode);
      expect(fast.body).toBe(slow.body);
      expect(comparable(fast.headers)).toEqual(comparable(slow.headers));
      expect(fast.headers['x-request-id']).toMatch(/^[0-9a-f]{8}-[0-9a-z]+$/);
    },
  );

  it('answers generated lookups exactly as the Fastify route does', async () => {
    const name = fc.constantFrom(
      'processor_customer_id',
      'hmac',
      'processor%5Fcustomer_id',
      '%68mac',
      'HMAC',
      'processor_customer_id+',
      'x',
      '',
      '%zz',
    );
    const value = fc.oneof(
      fc.constantFrom(
        'cus_w',
        'cus_l',
        'cus_a',
        'cus_nobody',
        'cus%5Fw',
        'cus_w+',
        'cus_%zz',
        '',
        'nope',
        '0'.repeat(64),
      ),
      fc.constantFrom('cus_w', 'cus_l', 'cus_a').map((id) => hmac('strict-co', id)),
      fc.constantFrom('cus_w', 'cus_l').map((id) => hmac('strict-co', id).toUpperCase()),
    );
    const pair = fc.oneof(
      fc.tuple(name, value).map(([n, v]) => `${n}=${v}`),
      name,
      fc.constantFrom('=', '&', ';hmac=1', '?'),
    );
    const query = fc.array(pair, { maxLength: 5 }).map((pairs) => pairs.join('&'));
    const slug = fc.constantFrom('acme', 'strict-co', 'walled', 'paused', 'nobody-co', '%61cme', 'ACME', 'a', 'acme/');
    const auth = fc.constantFrom<'acme' | 'strict-co' | 'walled' | 'paused' | 'none' | 'malformed' | 'two' | 'lower'>(
      'acme',
      'strict-co',
      'walled',
      'paused',
      'none',
      'malformed',
      'two',
      'lower',
    );
    const origin = fc.constantFrom(undefined, 'https://app.walled.test', 'https://evil.test');
    let compared = 0;
    await fc.assert(
      fc.asyncProperty(slug, query, auth, origin, async (s, q, a, o) => {
        const headers: Record<string, string | string[]> = {};
        if (a === 'malformed') headers.authorization = 'Bearer';
        else if (a === 'two') headers.authorization = [bearer('acme').authorization, bearer('strict-co').authorization];
        else if (a === 'lower') headers.authorization = `bearer   ${keys.acme ?? ''}`;
        else if (a !== 'none') headers.authorization = bearer(a).authorization;
        if (o !== undefined) headers.origin = o;
        const path = `/api/subscriber-status/${s}${q === '' ? '' : `?${q}`}`;
        const fast = await socketRequest(app, 'GET', path, headers);
        const slow = await app.inject({ method: 'GET', url: path, headers });
        const where = `GET ${path} ${JSON.stringify(headers)}`;
        expect(fast.statusCode, where).toBe(slow.statusCode);
        expect(fast.body, where).toBe(slow.body);
        expect(comparable(fast.headers), where).toEqual(comparable(slow.headers));
        compared += 1;
      }),
      { numRuns: 300, seed: 12 },
    );
    expect(compared).toBe(300);
  });

  it('gives the answer of the Fastify route on a real socket to malformed shapes: repeated, empty and odd parameters, fragments, slashes, case', async () => {
    // inject rewrites a target as a URL parser does (drops a fragment, encodes quotes and
    // spaces, resolves dot segments): the route is reached here as a client reaches it, on a
    // socket, every lookup of this app going through Fastify (DUNWALL_LOG_LOOKUPS=1).
    const viaFastify = await buildAppWithModel({ store, adminToken: ADMIN_TOKEN, now: clock.now, logLookups: true });
    const seen: string[] = [];
    viaFastify.addHook('onRequest', async (req) => {
      seen.push(req.url);
    });
    try {
      const created = (await admin('POST', '/tenants', { slug: 'preview-co', livemode: false })).json() as {
        publishable_key: string;
      };
      keys['preview-co'] = created.publishable_key;
      await admin('PUT', '/tenants/preview-co/subscribers/cus_w', { status: 'warning' });
      const good = hmac('strict-co', 'cus_l');
      const shapes: [string, string][] = [
        ['acme', 'processor_customer_id=cus_w&processor_customer_id=cus_w'],
        ['strict-co', `processor_customer_id=cus_l&hmac=${good}&hmac=${good}`],
        ['preview-co', 'processor_customer_id=cus_w&preview=warning&preview=lockout'],
        ['preview-co', 'processor_customer_id=cus_w&preview=lockout&preview=lockout'],
        ['acme', 'processor_customer_id='],
        ['strict-co', 'processor_customer_id=cus_l&hmac='],
        ['preview-co', 'processor_customer_id=cus_w&preview='],
        ['preview-co', 'processor_customer_id=cus_w&preview'],
        ['preview-co', 'processor_customer_id=cus_w&preview=WARNING'],
        ['preview-co', 'processor_customer_id=cus_w&preview=%6Cockout'],
        ['acme', 'processor%5Fcustomer%5Fid=cus%5Fw'],
        ['acme', 'processor_customer_id=cus_w%zz'],
        ['acme', 'processor_customer_id=cus_w&x=%zz'],
        ['acme', 'processor_customer_id=cus_w%00'],
        ['acme', 'processor_customer_id=+cus_w'],
        ['acme', 'processor_customer_id=cus_w#fragment'],
        ['acme', 'processor_customer_id=cus_w;x=1'],
        ['acme', 'processor_customer_id=cus_w?x=1'],
        ['acme', '&&processor_customer_id=cus_w&&'],
        ['acme', 'PROCESSOR_CUSTOMER_ID=cus_w'],
        ['strict-co', `processor_customer_id=cus_l&HMAC=${good}`],
        ['acme/', 'processor_customer_id=cus_w'],
        ['ACME', 'processor_customer_id=cus_w'],
        ['acme/.', 'processor_customer_id=cus_w'],
      ];
      for (const [slug, query] of shapes) {
        const path = `/api/subscriber-status/${slug}?${query}`;
        const headers = bearer(slug.toLowerCase().replace(/\/.*$/, ''));
        routed.length = 0;
        seen.length = 0;
        const fast = await socketRequest(app, 'GET', path, headers);
        const slow = await socketRequest(viaFastify, 'GET', path, headers);
        expect(seen, `${path}: the Fastify route answered it`).toEqual([path]);
        expect([fast.statusCode, fast.body], path).toEqual([slow.statusCode, slow.body]);
        expect(comparable(fast.headers), path).toEqual(comparable(slow.headers));
      }
    } finally {
      await viaFastify.close();
    }
  });

  it('leaves to Fastify what it must decode or refuse, with the same answer', async () => {
    routed.length = 0;
    const encoded = await socketRequest(
      app,
      'GET',
      '/api/subscriber-status/%61cme?processor_customer_id=cus_w',
      bearer('acme'),
    );
    expect(routed).toEqual(['/api/subscriber-status/%61cme?processor_customer_id=cus_w']);
    const plain = await socketRequest(
      app,
      'GET',
      '/api/subscriber-status/acme?processor_customer_id=cus_w',
      bearer('acme'),
    );
    expect(encoded.statusCode).toBe(200);
    expect(encoded.body).toBe(plain.body);
    for (const path of [
      '/api/subscriber-status/acme/extra',
      '/api/subscriber-status/ACME?processor_customer_id=cus_w',
      '/api/subscriber-status/',
    ]) {
      const res = await socketRequest(app, 'GET', path, bearer('acme'));
      expect(res.statusCode, path).toBe(404);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    }
    // Other methods and routes are Fastify's.
    routed.length = 0;
    expect(
      (await socketRequest(app, 'HEAD', '/api/subscriber-status/acme?processor_customer_id=cus_w', bearer('acme')))
        .statusCode,
    ).toBe(200);
    expect((await socketRequest(app, 'GET', '/healthz')).statusCode).toBe(200);
    expect(routed).toHaveLength(2);
  });

  it("echoes a valid presented request id, and numbers the others from this process's prefix", async () => {
    const path = '/api/subscriber-status/acme?processor_customer_id=cus_w';
    expect(
      (await socketRequest(app, 'GET', path, { ...bearer('acme'), 'x-request-id': 'edge-7f3a.1:2' })).headers[
        'x-request-id'
      ],
    ).toBe('edge-7f3a.1:2');
    const ids = [];
    for (const presented of ['has space', 'x'.repeat(129), undefined]) {
      const res = await socketRequest(app, 'GET', path, {
        ...bearer('acme'),
        ...(presented === undefined ? {} : { 'x-request-id': presented }),
      });
      ids.push(String(res.headers['x-request-id']));
    }
    const [prefix] = ids.map((id) => id.split('-')[0]);
    expect(ids.every((id) => id.startsWith(`${prefix}-`))).toBe(true);
    const counters = ids.map((id) => parseInt(id.split('-')[1] ?? '', 36));
    expect(counters).toEqual([...counters].sort((a, b) => a - b));
    expect(new Set(counters).size).toBe(3);
    // Fastify's routes number their requests from the same counter.
    const health = await socketRequest(app, 'GET', '/healthz');
    expect(String(health.headers['x-request-id']).startsWith(`${prefix}-`)).toBe(true);
  });

  it('counts the lookups it answers in /metrics, by route template and status', async () => {
    const scrape = async () => (await app.inject({ method: 'GET', url: '/metrics' })).body;
    const series = (text: string, status: number) =>
      Number(
        new RegExp(
          `^dunwall_http_requests_total\\{route="/api/subscriber-status/:tenantSlug",method="GET",status_code="${status}"\\} (\\d+)$`,
          'm',
        ).exec(text)?.[1] ?? 0,
      );
    const before = await scrape();
    for (let i = 0; i < 3; i += 1)
      await socketRequest(app, 'GET', '/api/subscriber-status/acme?processor_customer_id=cus_w', bearer('acme'));
    await socketRequest(app, 'GET', '/api/subscriber-status/acme?processor_customer_id=cus_w');
    const after = await scrape();
    expect(series(after, 200) - series(before, 200)).toBe(3);
    expect(series(after, 401) - series(before, 401)).toBe(1);
    const count = (text: string) =>
      Number(
        /^dunwall_http_request_duration_seconds_count\{route="\/api\/subscriber-status\/:tenantSlug",method="GET",status_code="200"\} (\d+)$/m.exec(
          text,
        )?.[1] ?? 0,
      );
    expect(count(after) - count(before)).toBe(3);
    expect(after).toMatch(
      /^dunwall_http_request_duration_seconds_bucket\{route="\/api\/subscriber-status\/:tenantSlug",method="GET",status_code="200",le="\+Inf"\} \d+$/m,
    );
    expect(after).not.toContain('cus_w');
  });
});
