import { randomBytes } from 'node:crypto';
import { createServer as createHttpServer } from 'node:http';
import type { Server, ServerResponse } from 'node:http';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { App } from '../../src/http/app.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { createDunwall } from '../../packages/node/src/index.js';
import { createDunwallWith } from '../../packages/node/src/follower.js';
import { DunwallReadyError } from '../../packages/node/src/index.js';
import type { DunwallFeedError, Internals } from '../../packages/node/src/follower.js';
import type { Dunwall, DunwallOptions } from '../../packages/node/src/index.js';
import { cuttableProxy } from '../helpers/cuttable-proxy.js';
import type { CuttableProxy } from '../helpers/cuttable-proxy.js';
import { ADMIN_TOKEN, FakeClock, adminRequest, buildAppWithModel } from '../helpers/harness.js';
import { portOf } from '../helpers/socket.js';
import { LEGACY_API, event, hostedInvoiceUrl, invoice, paymentIds, signed } from '../helpers/stripe-fixtures.js';

/**
 * `@dunwall/node`'s copy against a real Dunwall app on loopback (real sockets, the real
 * tenant API behind secret keys, the embedded store): list then follow, changes in order,
 * staleness on a fake clock given as `now`, a lockout that falls due, resuming after a cut
 * connection from the same cursor, relisting on 410 into a copy swapped in whole, refused
 * keys, tenant isolation, close. Nothing sleeps: the tests wait for what the copy shows.
 */
const SECRET = 'whsec_node_core_tests_0123456789abcdef';
const DAY_MS = 86_400_000;
const WAIT = { timeout: 10_000, interval: 20 };
/** Retries in tens of milliseconds, so that a test riding out a cut does not wait seconds. */
const QUICK: Internals = { backoff: { minMs: 20, maxMs: 100 } };

let store: Store;
let app: App;
let base = '';
const open: Dunwall[] = [];
const proxies: CuttableProxy[] = [];

beforeAll(async () => {
  store = await openStore({ engine: 'embedded', dataDir: null });
  app = await buildAppWithModel({ store, adminToken: ADMIN_TOKEN });
  base = `http://127.0.0.1:${await portOf(app)}`;
});
afterEach(async () => {
  await Promise.all(open.splice(0).map((d) => d.close()));
  await Promise.all(proxies.splice(0).map((p) => p.close()));
});
afterAll(async () => {
  await app?.close();
  await store?.close();
});

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function admin(method: string, url: string, body?: unknown): Promise<unknown> {
  const res = await adminRequest(app, method, url, body);
  if (res.statusCode >= 300) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`);
  return res.body === '' ? null : res.json();
}

async function tenant(slug: string, fields: Record<string, unknown> = {}): Promise<void> {
  await admin('POST', '/tenants', { slug, ...fields });
}

async function key(slug: string, scopes: string[] = ['status:read']): Promise<{ id: string; secret_key: string }> {
  return (await admin('POST', `/tenants/${slug}/keys`, { name: 'status copy', scopes })) as {
    id: string;
    secret_key: string;
  };
}

const put = (slug: string, customer: string, status: string) =>
  admin('PUT', `/tenants/${slug}/subscribers/${customer}`, { status });
const remove = (slug: string, customer: string) => admin('DELETE', `/tenants/${slug}/subscribers/${customer}`);

/** A signed invoice.payment_failed for `customer` (no retry left), as Stripe sends it, posted to the app. */
async function paymentFailed(slug: string, customer: string): Promise<{ payUrl: string; sentMs: number }> {
  const ids = paymentIds();
  const sentMs = Date.now();
  const created = Math.floor(sentMs / 1000);
  const { payload, signature } = signed(
    event('invoice.payment_failed', invoice(customer, { api: LEGACY_API, ids, next_payment_attempt: null }), {
      created,
      api: LEGACY_API,
    }),
    SECRET,
    created,
  );
  const res = await app.inject({
    method: 'POST',
    url: `/webhooks/stripe/${slug}`,
    headers: { 'content-type': 'application/json', 'stripe-signature': signature },
    payload,
  });
  if (res.statusCode !== 200) throw new Error(`webhook: ${res.statusCode} ${res.body}`);
  return { payUrl: hostedInvoiceUrl(ids.invoice), sentMs };
}

/** Every request the copy made, by path and query, and the signal each was given. */
function recording(): {
  calls: { path: string; query: URLSearchParams; signal: AbortSignal | null }[];
  fetch: typeof fetch;
  count(path: string): number;
} {
  const calls: { path: string; query: URLSearchParams; signal: AbortSignal | null }[] = [];
  return {
    calls,
    fetch: (input, init) => {
      const url = new URL(String(input));
      calls.push({ path: url.pathname, query: url.searchParams, signal: init?.signal ?? null });
      return fetch(input, init);
    },
    count: (path) => calls.filter((c) => c.path === path).length,
  };
}

function follow(
  options: Partial<DunwallOptions> & { secretKey: string },
  internals: Internals = QUICK,
): { dunwall: Dunwall; errors: DunwallFeedError[] } {
  const errors: DunwallFeedError[] = [];
  const dunwall = createDunwallWith(
    { baseUrl: base, onError: (err) => errors.push(err as DunwallFeedError), ...options },
    internals,
  );
  open.push(dunwall);
  return { dunwall, errors };
}

describe('@dunwall/node: the status copy against a running Dunwall', () => {
  it('is everyone active (starting) until the first list, then answers the list, paged, with the entitlements', async () => {
    await tenant('list-a', { tier: 'scale' });
    for (let i = 0; i < 5; i += 1) await put('list-a', `cus_l${i}`, i % 2 === 0 ? 'warning' : 'lockout');
    await put('list-a', 'cus_paid', 'active');
    const { secret_key } = await key('list-a');
    const rec = recording();
    const clock = new FakeClock();
    const { dunwall, errors } = follow(
      { secretKey: secret_key, now: clock.now },
      { ...QUICK, pageLimit: 2, fetch: rec.fetch },
    );
    // Synchronously, before any answer came back.
    const starting = dunwall.status('cus_l1');
    expect(starting).toEqual({
      status: 'active',
      lockout_at: null,
      pay_url: null,
      entitlements: {},
      source: 'starting',
    });
    expect(Object.isFrozen(starting)).toBe(true);
    await dunwall.ready(10_000);
    // Three pages of two, the next two following the first one's cursor.
    expect(
      rec.calls.filter((c) => c.path === '/v1/statuses').map((c) => [c.query.get('limit'), c.query.has('cursor')]),
    ).toEqual([
      ['2', false],
      ['2', true],
      ['2', true],
    ]);
    const entitlements = { powered_by_watermark: false, custom_domain: true, downstream_webhooks: true };
    expect(dunwall.status('cus_l0')).toEqual({
      status: 'warning',
      lockout_at: null,
      pay_url: null,
      entitlements,
      source: 'feed',
    });
    expect(dunwall.status('cus_l1')).toEqual({
      status: 'lockout',
      lockout_at: null,
      pay_url: null,
      entitlements,
      source: 'feed',
    });
    expect(dunwall.status('cus_l4').status).toBe('warning');
    // An unknown customer, and one who paid: one frozen answer, the same object every time.
    const unknown = dunwall.status('cus_nobody');
    expect(unknown).toEqual({ status: 'active', lockout_at: null, pay_url: null, entitlements, source: 'feed' });
    expect(dunwall.status('cus_paid')).toBe(unknown);
    expect(Object.isFrozen(unknown) && Object.isFrozen(unknown.entitlements)).toBe(true);
    expect(Object.keys(unknown)).toEqual(['status', 'lockout_at', 'pay_url', 'entitlements', 'source']);
    expect(JSON.parse(JSON.stringify(dunwall.status('cus_l1')))).toEqual({
      status: 'lockout',
      lockout_at: null,
      pay_url: null,
      entitlements,
      source: 'feed',
    });
    // Then it follows the feed from the list's position, as a long poll.
    await vi.waitFor(() => expect(rec.count('/v1/status-changes')).toBeGreaterThan(0), WAIT);
    const poll = rec.calls.find((c) => c.path === '/v1/status-changes');
    expect([poll?.query.get('wait'), poll?.query.get('limit')]).toEqual(['30', '2']);
    expect(errors).toEqual([]);
  });

  it('applies every change in order: a status set, changed, and forgotten when active', async () => {
    await tenant('order-a');
    const { secret_key } = await key('order-a');
    const { dunwall, errors } = follow({ secretKey: secret_key });
    await dunwall.ready();
    await put('order-a', 'cus_o1', 'warning');
    await vi.waitFor(() => expect(dunwall.status('cus_o1').status).toBe('warning'), WAIT);
    await put('order-a', 'cus_o1', 'lockout');
    await put('order-a', 'cus_o2', 'lockout');
    await put('order-a', 'cus_o1', 'warning');
    await remove('order-a', 'cus_o2');
    await put('order-a', 'cus_o3', 'warning');
    await vi.waitFor(() => expect(dunwall.status('cus_o3').status).toBe('warning'), WAIT);
    // Everything before the last change was applied, in the order made.
    expect(dunwall.status('cus_o1').status).toBe('warning');
    expect(dunwall.status('cus_o2')).toBe(dunwall.status('cus_nobody'));
    await put('order-a', 'cus_o1', 'active');
    await vi.waitFor(() => expect(dunwall.status('cus_o1')).toBe(dunwall.status('cus_nobody')), WAIT);
    expect(errors).toEqual([]);
  });

  it('carries a Stripe-made warning with its lockout_at and pay_url, answers lockout once it falls due by its clock, and never gates once stale', async () => {
    await tenant('due-a', { policy: { grace_days: 3 } });
    await admin('PATCH', '/tenants/due-a', { stripe_webhook_secret: SECRET });
    const { secret_key } = await key('due-a');
    const clock = new FakeClock(Date.now());
    const staleAfterMs = 10 * DAY_MS;
    const { dunwall } = follow({ secretKey: secret_key, now: clock.now, staleAfterMs });
    await dunwall.ready();
    const { payUrl, sentMs } = await paymentFailed('due-a', 'cus_due');
    await vi.waitFor(() => expect(dunwall.status('cus_due').status).toBe('warning'), WAIT);
    const warning = dunwall.status('cus_due');
    const lockoutAt = warning.lockout_at ?? '';
    expect(Date.parse(lockoutAt) - sentMs).toBeGreaterThan(3 * DAY_MS - 2_000);
    expect(warning).toEqual({
      status: 'warning',
      lockout_at: lockoutAt,
      pay_url: payUrl,
      entitlements: expect.any(Object),
      source: 'feed',
    });
    // The same object while nothing changes: precomputed when the change was applied.
    expect(dunwall.status('cus_due')).toBe(warning);
    clock.ms = Date.parse(lockoutAt) - 1;
    expect(dunwall.status('cus_due')).toBe(warning);
    // At that instant, as the service's lookup answers it, before any change says so.
    clock.ms = Date.parse(lockoutAt);
    expect(dunwall.status('cus_due')).toEqual({
      status: 'lockout',
      lockout_at: null,
      pay_url: payUrl,
      entitlements: warning.entitlements,
      source: 'feed',
    });
    // Stale: never a gate, the scheduled lockout and the pay link kept.
    clock.ms += staleAfterMs;
    expect(dunwall.status('cus_due')).toEqual({ ...warning, source: 'stale' });
  });

  it('goes stale after staleAfterMs without an answer: a lockout answered warning, everyone marked stale; fresh again at the next answer', async () => {
    await tenant('stale-a');
    await put('stale-a', 'cus_s1', 'lockout');
    await put('stale-a', 'cus_s2', 'warning');
    const { secret_key } = await key('stale-a');
    const clock = new FakeClock();
    const { dunwall } = follow({ secretKey: secret_key, now: clock.now, staleAfterMs: 60_000 });
    await dunwall.ready();
    const lockout = dunwall.status('cus_s1');
    const unknown = dunwall.status('cus_nobody');
    // At the bound, still fresh.
    clock.advance(60_000);
    expect(dunwall.status('cus_s1')).toBe(lockout);
    clock.advance(1);
    expect(dunwall.status('cus_s1')).toEqual({ ...lockout, status: 'warning', source: 'stale' });
    expect(dunwall.status('cus_s2')).toMatchObject({ status: 'warning', source: 'stale' });
    const staleUnknown = dunwall.status('cus_nobody');
    expect(staleUnknown).toEqual({ ...unknown, source: 'stale' });
    expect(dunwall.status('cus_other')).toBe(staleUnknown);
    // An answer of the service (here the long poll a change wakes) is a sign of life.
    await put('stale-a', 'cus_s3', 'lockout');
    await vi.waitFor(() => expect(dunwall.status('cus_s3').status).toBe('lockout'), WAIT);
    expect(dunwall.status('cus_s1')).toBe(lockout);
    expect(dunwall.status('cus_nobody')).toBe(unknown);
  });

  it('rides out a cut connection: retries, resumes from its cursor with nothing lost, without listing again', async () => {
    await tenant('cut-a');
    await put('cut-a', 'cus_c1', 'lockout');
    const { secret_key } = await key('cut-a');
    const proxy = await cuttableProxy({ host: '127.0.0.1', port: await portOf(app) });
    proxies.push(proxy);
    const rec = recording();
    const { dunwall, errors } = follow(
      { secretKey: secret_key, baseUrl: `http://127.0.0.1:${proxy.port}` },
      { ...QUICK, fetch: rec.fetch },
    );
    await dunwall.ready();
    await vi.waitFor(() => expect(rec.count('/v1/status-changes')).toBe(1), WAIT);
    proxy.cut();
    // The parked long poll is cut, and so is every retry.
    await vi.waitFor(() => expect(errors.length).toBeGreaterThanOrEqual(2), WAIT);
    expect(errors[0]?.message).toMatch(/^Dunwall: GET \/v1\/status-changes failed/);
    await put('cut-a', 'cus_c1', 'active');
    await put('cut-a', 'cus_c2', 'warning');
    expect(dunwall.status('cus_c1').status).toBe('lockout');
    proxy.restore();
    await vi.waitFor(() => expect(dunwall.status('cus_c2').status).toBe('warning'), WAIT);
    expect(dunwall.status('cus_c1').status).toBe('active');
    expect(rec.count('/v1/statuses')).toBe(1);
    // Every retry asked from the same cursor: the last one the service handed out.
    const afters = new Set(
      rec.calls
        .filter((c) => c.path === '/v1/status-changes')
        .slice(1, -1)
        .map((c) => c.query.get('after')),
    );
    expect(afters.size).toBe(1);
    expect(errors.every((e) => e.status === null)).toBe(true);
  });

  it('lists again on 410 cursor_expired into a new copy, swapped in whole: the old one answers until the new list is read', async () => {
    await tenant('expired-a');
    await put('expired-a', 'cus_e1', 'lockout');
    await put('expired-a', 'cus_e2', 'warning');
    const { secret_key } = await key('expired-a');
    const proxy = await cuttableProxy({ host: '127.0.0.1', port: await portOf(app) });
    proxies.push(proxy);
    const rec = recording();
    let release = () => {};
    let hold: Promise<void> | null = null;
    let holding = false;
    // The second list's second page waits until the test lets it go.
    const gated: typeof fetch = async (input, init) => {
      const url = new URL(String(input));
      if (hold !== null && url.pathname === '/v1/statuses' && url.searchParams.has('cursor')) {
        holding = true;
        await hold;
      }
      return rec.fetch(input, init);
    };
    const { dunwall, errors } = follow(
      { secretKey: secret_key, baseUrl: `http://127.0.0.1:${proxy.port}` },
      { ...QUICK, pageLimit: 1, fetch: gated },
    );
    await dunwall.ready();
    const firstList = rec.count('/v1/statuses');
    await vi.waitFor(() => expect(rec.count('/v1/status-changes')).toBe(1), WAIT);
    proxy.cut();
    await vi.waitFor(() => expect(errors.length).toBeGreaterThanOrEqual(1), WAIT);
    await put('expired-a', 'cus_e1', 'active');
    await put('expired-a', 'cus_e3', 'lockout');
    await put('expired-a', 'cus_e4', 'warning');
    // Retention prunes the changes the copy had not read: its cursor has expired.
    expect(await store.maintenance.pruneOld('status_changes', new Date(Date.now() + DAY_MS), 10_000)).toBeGreaterThan(
      0,
    );
    hold = new Promise((resolve) => (release = resolve));
    proxy.restore();
    await vi.waitFor(
      () => expect(errors.some((e) => e.status === 410 && e.code === 'cursor_expired')).toBe(true),
      WAIT,
    );
    try {
      await vi.waitFor(() => expect(holding).toBe(true), WAIT);
      // The new list's first page is read, not the rest: the old copy still answers, whole.
      expect(rec.count('/v1/statuses')).toBe(firstList + 1);
      expect([
        dunwall.status('cus_e1').status,
        dunwall.status('cus_e2').status,
        dunwall.status('cus_e3').status,
      ]).toEqual(['lockout', 'warning', 'active']);
    } finally {
      release();
    }
    await vi.waitFor(() => expect(dunwall.status('cus_e1').status).toBe('active'), WAIT);
    expect([dunwall.status('cus_e2').status, dunwall.status('cus_e3').status, dunwall.status('cus_e4').status]).toEqual(
      ['warning', 'lockout', 'warning'],
    );
    // And it follows again, from the new list's position.
    await put('expired-a', 'cus_e5', 'lockout');
    await vi.waitFor(() => expect(dunwall.status('cus_e5').status).toBe('lockout'), WAIT);
  });

  it("never sees another tenant's subscribers", async () => {
    await tenant('iso-a');
    await tenant('iso-b');
    await put('iso-a', 'cus_same', 'warning');
    await put('iso-b', 'cus_same', 'lockout');
    await put('iso-b', 'cus_only_b', 'lockout');
    const { secret_key } = await key('iso-a');
    const { dunwall } = follow({ secretKey: secret_key });
    await dunwall.ready();
    expect(dunwall.status('cus_same').status).toBe('warning');
    expect(dunwall.status('cus_only_b').status).toBe('active');
    await put('iso-b', 'cus_b2', 'lockout');
    await put('iso-b', 'cus_same', 'active');
    await put('iso-a', 'cus_marker', 'lockout');
    await vi.waitFor(() => expect(dunwall.status('cus_marker').status).toBe('lockout'), WAIT);
    expect([dunwall.status('cus_b2').status, dunwall.status('cus_same').status]).toEqual(['active', 'warning']);
  });

  it('reports a refused key through onError, never throws, and answers active (starting) meanwhile', async () => {
    await tenant('keys-a');
    const wrong = follow({ secretKey: `sk_test_${randomBytes(20).toString('hex')}` });
    await vi.waitFor(() => expect(wrong.errors.length).toBeGreaterThan(0), WAIT);
    expect([wrong.errors[0]?.status, wrong.errors[0]?.code]).toEqual([401, 'invalid_secret_key']);
    expect(wrong.errors[0]?.message).toContain('check the secret key');
    // A refused key is not retried for a minute: ready() gives up at once, long before its bound, saying why.
    const refused = await wrong.dunwall.ready(600_000).catch((err: unknown) => err as DunwallReadyError);
    expect(refused).toBeInstanceOf(DunwallReadyError);
    expect([refused?.reason, refused?.status, refused?.code]).toEqual(['refused_key', 401, 'invalid_secret_key']);
    expect(refused?.message).toMatch(/refused the secret key \(401 invalid_secret_key\)/);
    expect(wrong.dunwall.status('cus_x').source).toBe('starting');

    const { secret_key } = await key('keys-a', ['subscribers:read']);
    const scopeless = follow({ secretKey: secret_key });
    // Pending when the refusal comes: rejected by it, with Dunwall's problem code.
    await expect(scopeless.dunwall.ready(600_000)).rejects.toMatchObject({
      reason: 'refused_key',
      status: 403,
      code: 'insufficient_scope',
    });
    await vi.waitFor(
      () => expect(scopeless.errors.map((e) => [e.status, e.code])).toEqual([[403, 'insufficient_scope']]),
      WAIT,
    );
    expect(scopeless.errors[0]?.message).not.toContain(secret_key);
    expect(wrong.errors.map((e) => e.message).join()).not.toContain('sk_test_');
  });

  it('keeps what it holds when its key is revoked mid-follow, and reports the refusal', async () => {
    await tenant('revoke-a');
    await put('revoke-a', 'cus_r1', 'lockout');
    const created = await key('revoke-a');
    const clock = new FakeClock();
    const { dunwall, errors } = follow({ secretKey: created.secret_key, now: clock.now, staleAfterMs: 60_000 });
    await dunwall.ready();
    // The revocation wakes the parked long poll (a change of the tenant); the next one is refused.
    await admin('DELETE', `/tenants/revoke-a/keys/${created.id}`);
    await vi.waitFor(
      () => expect(errors.map((e) => [e.status, e.code])).toContainEqual([401, 'invalid_secret_key']),
      WAIT,
    );
    expect(dunwall.status('cus_r1')).toMatchObject({ status: 'lockout', source: 'feed' });
    clock.advance(60_001);
    expect(dunwall.status('cus_r1')).toMatchObject({ status: 'warning', source: 'stale' });
  });

  it('close() ends the long poll in flight and its timers; status() goes on answering from the copy, then stale', async () => {
    await tenant('close-a');
    await put('close-a', 'cus_k1', 'lockout');
    const { secret_key } = await key('close-a');
    const rec = recording();
    const clock = new FakeClock();
    const { dunwall, errors } = follow(
      { secretKey: secret_key, now: clock.now, staleAfterMs: 60_000 },
      { ...QUICK, fetch: rec.fetch },
    );
    await dunwall.ready();
    await vi.waitFor(() => expect(rec.count('/v1/status-changes')).toBe(1), WAIT);
    const parked = rec.calls.at(-1)?.signal;
    expect(parked?.aborted).toBe(false);
    await dunwall.close();
    expect(parked?.aborted).toBe(true);
    expect(errors).toEqual([]);
    const made = rec.calls.length;
    await put('close-a', 'cus_k2', 'lockout');
    expect(dunwall.status('cus_k1').status).toBe('lockout');
    clock.advance(60_001);
    expect(dunwall.status('cus_k1')).toMatchObject({ status: 'warning', source: 'stale' });
    await expect(dunwall.ready(10)).resolves.toBeUndefined();
    await dunwall.close();
    expect(rec.calls.length).toBe(made);
  });

  it('before its first list, close() rejects a pending ready() at once', async () => {
    const { dunwall } = follow({
      secretKey: 'sk_test_unreachable0123456789abcdef',
      baseUrl: `http://127.0.0.1:${await closedPort()}`,
    });
    const waiting = dunwall.ready(60_000);
    await dunwall.close();
    await expect(waiting).rejects.toThrow('closed before the first list completed');
    expect(dunwall.status('cus_x')).toMatchObject({ status: 'active', source: 'starting' });
  });
});

describe('@dunwall/node: what it takes and what it refuses', () => {
  const ok = { baseUrl: 'http://127.0.0.1:1', secretKey: 'sk_live_0123456789abcdefghijklmnopqrstuvwxyzABCD' };

  it('refuses bad options at once, never echoing the key', () => {
    expect(() => createDunwall({ ...ok, baseUrl: 'dunwall.example.com' })).toThrow(TypeError);
    expect(() => createDunwall({ ...ok, baseUrl: 'ftp://dunwall.example.com' })).toThrow(/http\(s\)/);
    expect(() => createDunwall({ ...ok, secretKey: 'pk_live_abcdef' })).toThrow(/publishable key/);
    expect(() => createDunwall({ ...ok, secretKey: 'pk_live_abcdef' })).not.toThrow(/pk_live_abcdef/);
    expect(() => createDunwall({ ...ok, staleAfterMs: 0 })).toThrow(/staleAfterMs/);
    expect(() => createDunwall({ ...ok, requestTimeoutMs: Number.NaN })).toThrow(/requestTimeoutMs/);
  });

  it("applies nothing of an answer that is not the contract's, and drops a pay link a page must not get", async () => {
    const pages: unknown[] = [
      { data: [{ processor_customer_id: 'cus_1', status: 'gated' }], entitlements: {}, next: null, feed_cursor: 'AQ' },
      {
        data: [
          { processor_customer_id: 'cus_1', status: 'lockout', pay_url: 'javascript:alert(1)' },
          {
            processor_customer_id: 'cus_2',
            status: 'warning',
            lockout_at: '2030-01-01T00:00:00Z',
            pay_url: 'https://invoice.stripe.com/i/acct_1/test_2?s=ap',
          },
        ],
        entitlements: { custom_domain: true },
        next: null,
        feed_cursor: 'AQ',
      },
    ];
    const served: typeof fetch = async (input) => {
      const path = new URL(String(input)).pathname;
      if (path === '/v1/statuses') return new Response(JSON.stringify(pages.shift()), { status: 200 });
      return new Response(JSON.stringify({ data: [{ processor_customer_id: 'cus_1', status: 'active' }], next: 7 }), {
        status: 200,
      });
    };
    const errors: Error[] = [];
    const dunwall = createDunwallWith({ ...ok, onError: (e) => errors.push(e) }, { ...QUICK, fetch: served });
    open.push(dunwall);
    await dunwall.ready();
    expect(errors[0]?.message).toBe('Dunwall: GET /v1/statuses answered a page that is not a status list');
    expect(dunwall.status('cus_1')).toEqual({
      status: 'lockout',
      lockout_at: null,
      pay_url: null,
      entitlements: { custom_domain: true },
      source: 'feed',
    });
    expect(dunwall.status('cus_2')).toMatchObject({
      lockout_at: '2030-01-01T00:00:00Z',
      pay_url: 'https://invoice.stripe.com/i/acct_1/test_2?s=ap',
    });
    // A page of changes with a bad `next` is applied not at all.
    await vi.waitFor(() => expect(errors.length).toBeGreaterThanOrEqual(2), WAIT);
    expect(errors[1]?.message).toBe('Dunwall: GET /v1/status-changes answered a page that is not a page of changes');
    expect(dunwall.status('cus_1').status).toBe('lockout');
  });

  it('survives an onError that throws', async () => {
    const dunwall = createDunwallWith(
      {
        ...ok,
        baseUrl: `http://127.0.0.1:${await closedPort()}`,
        onError: () => {
          throw new Error('a logger that fails');
        },
      },
      QUICK,
    );
    open.push(dunwall);
    const unreachable = dunwall.ready(300);
    await expect(unreachable).rejects.toThrow(/could not be reached within 300 ms \(.*ECONNREFUSED/);
    await expect(unreachable).rejects.toMatchObject({ name: 'DunwallReadyError', reason: 'unreachable' });
    expect(dunwall.status('cus_x').source).toBe('starting');
  });

  it('ready() says what it gave up on: a service answering 503, or a list that is only slow', async () => {
    let mode: 'unavailable' | 'slow' = 'unavailable';
    const held: ServerResponse[] = [];
    const { server, base: standInBase } = await standIn((_path, res) => {
      if (mode === 'slow') return void held.push(res);
      res
        .writeHead(503, { 'content-type': 'application/problem+json' })
        .end(JSON.stringify({ status: 503, code: 'store_unavailable', detail: 'starting' }));
    });
    try {
      const failing = createDunwallWith({ ...ok, baseUrl: standInBase }, QUICK);
      open.push(failing);
      await expect(failing.ready(300)).rejects.toMatchObject({
        reason: 'unavailable',
        status: 503,
        code: 'store_unavailable',
      });
      await failing.close();
      mode = 'slow';
      const slow = createDunwallWith({ ...ok, baseUrl: standInBase }, QUICK);
      open.push(slow);
      await expect(slow.ready(300)).rejects.toMatchObject({
        reason: 'timeout',
        message: expect.stringMatching(/first list did not complete within 300 ms/),
      });
      await expect(slow.ready(0)).rejects.toThrow(TypeError);
    } finally {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  /** A bare HTTP server standing in for Dunwall's transport, answering each feed request as `answer` says. */
  async function standIn(
    answer: (path: string, res: ServerResponse) => void,
  ): Promise<{ server: Server; base: string; polls: () => number }> {
    let polls = 0;
    const server = createHttpServer((req, res) => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      if (path === '/v1/status-changes') polls += 1;
      answer(path, res);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, polls: () => polls };
  }
  const json = (res: ServerResponse, body: unknown) =>
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));

  it("bounds each request by requestTimeoutMs plus the long poll's wait", async () => {
    const stand = await standIn((path, res) => {
      if (path === '/v1/statuses') json(res, { data: [], entitlements: {}, next: null, feed_cursor: 'AQ' });
      // The long poll is never answered.
    });
    try {
      const errors: Error[] = [];
      // staleAfterMs 2 s: a wait of 1 s, so each long poll is given 300 + 1,000 ms.
      const dunwall = createDunwallWith(
        { ...ok, baseUrl: stand.base, requestTimeoutMs: 300, staleAfterMs: 2_000, onError: (e) => errors.push(e) },
        QUICK,
      );
      open.push(dunwall);
      await dunwall.ready();
      await vi.waitFor(() => expect(errors.length).toBeGreaterThan(0), WAIT);
      expect(errors[0]?.message).toBe('Dunwall: GET /v1/status-changes failed: no answer within 1300 ms');
    } finally {
      stand.server.closeAllConnections();
      stand.server.close();
    }
  });

  it('paces a service that answers every long poll empty at once, instead of spinning on it', async () => {
    const stand = await standIn((path, res) =>
      path === '/v1/statuses'
        ? json(res, { data: [], entitlements: {}, next: null, feed_cursor: 'AQ' })
        : json(res, { data: [], next: 'AQ' }),
    );
    try {
      const dunwall = createDunwallWith({ ...ok, baseUrl: stand.base }, QUICK);
      open.push(dunwall);
      await dunwall.ready();
      const started = performance.now();
      await vi.waitFor(() => expect(stand.polls()).toBeGreaterThanOrEqual(8), WAIT);
      // Paced after the first: at least half of 20 + 40 + 80 + 100 + 100 + 100 ms between the eight.
      expect(performance.now() - started).toBeGreaterThanOrEqual(220);
      expect(dunwall.status('cus_1').source).toBe('feed');
    } finally {
      stand.server.closeAllConnections();
      stand.server.close();
    }
  });
});
