import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/runtime/config.js';
import { createLogger } from '../../src/runtime/logger.js';
import { start } from '../../src/runtime/server.js';
import type { Running } from '../../src/runtime/server.js';
import { proxiedSchema } from '../helpers/cuttable-proxy.js';
import type { CuttableProxy } from '../helpers/cuttable-proxy.js';
import { availableEngines } from '../helpers/engines.js';
import { event, invoice, signed } from '../helpers/stripe-fixtures.js';

/**
 * PostgreSQL frozen rather than stopped (SIGSTOP: no reset, the packets just stop): no
 * error ever comes back, so only the client's own bounds end a wait. The proxy freezes
 * between the service and a server other test files share, which must not be stopped.
 */
const engines = await availableEngines();
const TOKEN = 'frozen-test-admin-token-0123456789abcdefghij';
const SECRET = 'whsec_frozen_test_0123456789abcdefghijklmnop';
/**
 * The bounds under test. A request waits on the store for DUNWALL_STORE_REQUEST_TIMEOUT_MS
 * in all, far less than the store's own bounds (DUNWALL_DB_QUERY_TIMEOUT_MS, plus the
 * client's margin, and DUNWALL_DB_CONNECT_TIMEOUT_MS), which still end the read model's
 * waits: a request that answered by those instead of its own is seen.
 */
const STORE_REQUEST_TIMEOUT_MS = 800;
const QUERY_TIMEOUT_MS = 4_000;
const CONNECT_TIMEOUT_MS = 3_000;
/** The client gives up this long after the server would have (a frozen server enforces nothing). */
const CLIENT_MARGIN_MS = 1_000;
/** How late past its bound an answer may leave on a loaded machine (timers, the event loop). */
const LATE_MS = 1_200;
/** A request still waiting this long after the bound has hung on the frozen server. */
const HANG_MS = 8_000;

describe.skipIf(!engines.some((e) => e.name === 'postgres'))('PostgreSQL frozen', () => {
  let db: Awaited<ReturnType<typeof proxiedSchema>>;
  let proxy: CuttableProxy;
  let running: Running;

  beforeAll(async () => {
    db = await proxiedSchema('dunwall_frozen');
    proxy = db.proxy;
    running = await start(
      loadConfig({
        DATABASE_URL: db.url,
        PORT: '0',
        DUNWALL_ADMIN_TOKEN: TOKEN,
        DUNWALL_DEMO: '0',
        DUNWALL_DB_QUERY_TIMEOUT_MS: String(QUERY_TIMEOUT_MS),
        DUNWALL_DB_CONNECT_TIMEOUT_MS: String(CONNECT_TIMEOUT_MS),
        DUNWALL_STORE_REQUEST_TIMEOUT_MS: String(STORE_REQUEST_TIMEOUT_MS),
        DUNWALL_RATE_LIMIT_LOOKUP_PER_IP: '0',
        DUNWALL_RATE_LIMIT_LOOKUP_PER_TENANT: '0',
        DUNWALL_RATE_LIMIT_FAILURES_PER_IP: '0',
        DUNWALL_RATE_LIMIT_ADMIN_PER_IP: '0',
      }),
      createLogger('silent'),
    );
  });

  afterAll(async () => {
    proxy?.thaw();
    await running?.close();
    await db?.close();
  });

  it('answers every request within its bound while frozen (lookups from the read model, 503 with Retry-After for the rest), and recovers when it thaws', async () => {
    const base = running.url;
    const call = (path: string, init: RequestInit = {}) =>
      fetch(`${base}${path}`, { ...init, signal: AbortSignal.timeout(QUERY_TIMEOUT_MS + CLIENT_MARGIN_MS + HANG_MS) });
    const admin = (method: string, path: string, body?: unknown) =>
      call(`/admin/v1${path}`, {
        method,
        headers: {
          authorization: `Bearer ${TOKEN}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    const created = await admin('POST', '/tenants', { slug: 'frozen' });
    expect(created.status).toBe(201);
    const key = ((await created.json()) as { publishable_key: string }).publishable_key;
    expect((await admin('PATCH', '/tenants/frozen', { stripe_webhook_secret: SECRET })).status).toBe(200);
    expect((await admin('PUT', '/tenants/frozen/subscribers/cus_known', { status: 'lockout' })).status).toBe(200);
    const lookup = (customer: string) =>
      call(`/api/subscriber-status/frozen?processor_customer_id=${customer}`, {
        headers: { authorization: `Bearer ${key}` },
      });
    // Remembered before the freeze.
    expect(((await (await lookup('cus_known')).json()) as { status: string }).status).toBe('lockout');
    // Several connections open and idle in the pool, so that the frozen requests below wait
    // on queries sent over them (the client's query bound), not only on new connections.
    await Promise.all(Array.from({ length: 6 }, (_, i) => lookup(`cus_warm${i}`)));
    await Promise.all(Array.from({ length: 6 }, () => admin('GET', '/tenants/frozen/subscribers/cus_known')));

    proxy.freeze();
    const timed = async (what: string, request: () => Promise<Response>) => {
      const started = Date.now();
      const res = await request();
      return {
        what,
        status: res.status,
        retryAfter: res.headers.get('retry-after'),
        ms: Date.now() - started,
        body: await res.text(),
      };
    };
    let sent = 0;
    const stripeEvent = () => {
      sent += 1;
      return event('invoice.payment_failed', invoice(`cus_new${sent}`, { next_payment_attempt: null }), {
        created: Math.floor(Date.now() / 1000),
        id: `evt_frozen_${sent}`,
      });
    };
    const webhook = () => {
      const { payload, signature } = signed(stripeEvent(), SECRET, Math.floor(Date.now() / 1000));
      return call('/webhooks/stripe/frozen', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'stripe-signature': signature },
        body: payload,
      });
    };
    const answers = await Promise.all([
      timed('remembered lookup', () => lookup('cus_known')),
      timed('lookup never made', () => lookup('cus_never_asked')),
      timed('admin read', () => admin('GET', '/tenants/frozen/subscribers/cus_known')),
      timed('admin list', () => admin('GET', '/tenants')),
      // Writes with a body: the bound holds past the parsing of the body.
      timed('admin write', () => admin('PUT', '/tenants/frozen/subscribers/cus_known', { status: 'active' })),
      timed('admin update', () => admin('PATCH', '/tenants/frozen', { suspended: true })),
      // A batch is bounded call by call: the call the freeze meets ends it.
      timed('admin replay', () =>
        admin('POST', '/tenants/frozen/stripe-events', { events: [stripeEvent(), stripeEvent()] }),
      ),
      timed('webhook', webhook),
      timed('readyz', () => call('/readyz')),
    ]);
    for (const a of answers) {
      if (a.what === 'remembered lookup') {
        expect(a.status, a.what).toBe(200);
        expect(JSON.parse(a.body)).toMatchObject({ status: 'lockout' });
      } else if (a.what === 'lookup never made') {
        // The read model holds every subscriber: one it does not know is `active`, frozen or not.
        expect([a.status, a.body], a.what).toEqual([200, '{"status":"active"}']);
      } else {
        expect(a.status, `${a.what}: ${a.body}`).toBe(503);
        expect(JSON.parse(a.body), a.what).toMatchObject({
          type: 'about:blank',
          status: 503,
          code: 'store_unavailable',
        });
        expect(Number(a.retryAfter), `${a.what}: Retry-After`).toBeGreaterThan(0);
        // Ended by the request's own bound: not before it (nothing failed), and not by the
        // store's bounds, which are seconds later.
        expect(a.ms, `${a.what} took ${a.ms} ms`).toBeGreaterThanOrEqual(STORE_REQUEST_TIMEOUT_MS - 20);
      }
      expect(a.ms, `${a.what} took ${a.ms} ms`).toBeLessThan(STORE_REQUEST_TIMEOUT_MS + LATE_MS);
    }

    // Still frozen once the read model's own reads have timed out: it answers from memory.
    const failedCatchUps = async () =>
      Number(/^dunwall_readmodel_catchup_failures_total (\d+)$/m.exec(await (await call('/metrics')).text())?.[1] ?? 0);
    await expect
      .poll(failedCatchUps, { timeout: QUERY_TIMEOUT_MS + CLIENT_MARGIN_MS + HANG_MS, interval: 100 })
      .toBeGreaterThan(0);
    const later = await timed('remembered lookup, later', () => lookup('cus_known'));
    expect([later.status, JSON.parse(later.body).status]).toEqual([200, 'lockout']);

    proxy.thaw();
    const deadline = Date.now() + 15_000;
    let back = false;
    while (!back && Date.now() < deadline) {
      back = (await lookup('cus_never_asked')).status === 200 && (await call('/readyz')).status === 200;
      if (!back) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(back).toBe(true);
    // A transaction cut by the freeze leaves nothing behind on its connection: the next
    // writes commit, as another client of the database sees.
    for (let i = 0; i < 4; i += 1) expect((await webhook()).status).toBe(200);
    const direct = new pg.Client({ connectionString: db.direct });
    await direct.connect();
    try {
      const { rows } = await direct.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM stripe_events WHERE event_id LIKE 'evt_frozen_%'",
      );
      expect(rows[0]?.n).toBe(4);
    } finally {
      await direct.end();
    }
  });
});
