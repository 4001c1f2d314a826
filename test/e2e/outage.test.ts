import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/runtime/config.js';
import { STORE_UNAVAILABLE_RETRY_AFTER_S } from '../../src/http/problems.js';
import { createLogger } from '../../src/runtime/logger.js';
import { start } from '../../src/runtime/server.js';
import type { Running } from '../../src/runtime/server.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { proxiedSchema } from '../helpers/cuttable-proxy.js';
import type { CuttableProxy } from '../helpers/cuttable-proxy.js';
import { availableEngines } from '../helpers/engines.js';
import { event, invoice, signed } from '../helpers/stripe-fixtures.js';

const engines = await availableEngines();

const TOKEN = 'outage-test-admin-token-0123456789abcdefghij';
const SECRET = 'whsec_outage_test_0123456789abcdefghijklmnop';
/** The load: this many requests, one every INTERVAL_MS; the store goes away before request CUT_AT. */
const REQUESTS = 400;
const INTERVAL_MS = 5;
const CUT_AT = 100;
/** A request that does not answer within this is a hang, and fails the test. */
const REQUEST_TIMEOUT_MS = 15_000;
/** Everything must be back within this once PostgreSQL is, without a restart. */
const RECOVERY_TIMEOUT_MS = 15_000;
/**
 * Store connections the service may try during the cut besides one per webhook, per
 * /readyz and per request still in flight when it began: the listener's reconnections and
 * the read model's one catch-up a second. Lookups never try the store.
 */
const OTHER_CONNECTIONS_MAX = 20;
const POLL_MS = 50;

type Kind = 'known' | 'unknown' | 'webhook' | 'readyz';

interface Answer {
  kind: Kind;
  during: boolean;
  status: number;
  code: string | null;
  retryAfter: string | null;
  body: string;
  customer: string | null;
  eventId: string | null;
}

/** The mix of the load: 60 % lookups asked before the cut, 20 % lookups never made, 15 % webhooks, 5 % /readyz. */
function kindOf(i: number): Kind {
  const slot = i % 20;
  if (slot < 12) return 'known';
  if (slot < 16) return 'unknown';
  if (slot < 19) return 'webhook';
  return 'readyz';
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function pollUntil(what: string, check: () => Promise<boolean>): Promise<number> {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > RECOVERY_TIMEOUT_MS)
      throw new Error(`not back within ${RECOVERY_TIMEOUT_MS} ms: ${what}`);
    await sleep(POLL_MS);
  }
  return Date.now() - started;
}

// Outside CI without a reachable PostgreSQL, availableEngines() has said so loudly: skipped.
describe.skipIf(!engines.some((e) => e.name === 'postgres'))('PostgreSQL goes away under load', () => {
  let scoped: Awaited<ReturnType<typeof proxiedSchema>>;
  let proxy: CuttableProxy;
  let running: Running;
  let other: Store;
  /** Holds one webhook's transaction open across the cut; ended before the schema is dropped. */
  let locker: pg.Client | undefined;
  const crashes: unknown[] = [];
  const onCrash = (err: unknown) => crashes.push(err);

  beforeAll(async () => {
    process.on('uncaughtExceptionMonitor', onCrash);
    process.on('unhandledRejection', onCrash);
    scoped = await proxiedSchema('dunwall_outage');
    proxy = scoped.proxy;
    running = await start(
      loadConfig({
        DATABASE_URL: scoped.url,
        PORT: '0',
        DUNWALL_ADMIN_TOKEN: TOKEN,
        DUNWALL_DEMO: '0',
        // The load comes from one address: rate limits are not what this test is about.
        DUNWALL_RATE_LIMIT_LOOKUP_PER_IP: '0',
        DUNWALL_RATE_LIMIT_LOOKUP_PER_TENANT: '0',
        DUNWALL_RATE_LIMIT_FAILURES_PER_IP: '0',
        DUNWALL_RATE_LIMIT_ADMIN_PER_IP: '0',
      }),
      createLogger('silent'),
    );
    // Another instance, straight to PostgreSQL: its writes reach the service by NOTIFY only.
    other = await openStore({ engine: 'postgres', url: scoped.direct });
  });

  afterAll(async () => {
    proxy?.restore();
    await locker?.end().catch(() => {});
    await running?.close();
    await other?.close();
    await scoped?.close();
    process.off('uncaughtExceptionMonitor', onCrash);
    process.off('unhandledRejection', onCrash);
  });

  it('answers every lookup from the read model, 503 with Retry-After for the rest, never crashes, and recovers by itself', async () => {
    const base = running.url;
    const admin = (method: string, path: string, body?: unknown) =>
      fetch(`${base}/admin/v1${path}`, {
        method,
        headers: {
          authorization: `Bearer ${TOKEN}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
    const created = await admin('POST', '/tenants', { slug: 'outage', card_update_url: 'https://outage.test/card' });
    expect(created.status).toBe(201);
    const key = ((await created.json()) as { publishable_key: string }).publishable_key;
    expect((await admin('PATCH', '/tenants/outage', { stripe_webhook_secret: SECRET })).status).toBe(200);
    for (const [customer, status] of [
      ['cus_lock', 'lockout'],
      ['cus_warn', 'warning'],
      ['cus_paid', 'active'],
    ] as const) {
      expect((await admin('PUT', `/tenants/outage/subscribers/${customer}`, { status })).status).toBe(200);
    }
    const lookup = (customer: string) =>
      fetch(`${base}/api/subscriber-status/outage?processor_customer_id=${customer}`, {
        headers: { authorization: `Bearer ${key}` },
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
    const webhook = (customer: string, eventId: string) => {
      const nowS = Math.floor(Date.now() / 1000);
      const fixture = event('invoice.payment_failed', invoice(customer, { next_payment_attempt: null }), {
        created: nowS - 1,
        id: eventId,
      });
      const { payload, signature } = signed(fixture, SECRET, nowS);
      return fetch(`${base}/webhooks/stripe/outage`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'stripe-signature': signature },
        body: payload,
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
    };

    // Before the cut: these answers are what the outage must repeat, from the read model.
    const known = ['cus_lock', 'cus_warn', 'cus_paid', 'cus_nobody'];
    const expected = new Map<string, string>();
    for (const customer of known) {
      const res = await lookup(customer);
      expect(res.status).toBe(200);
      expected.set(customer, await res.text());
    }
    expect(JSON.parse(expected.get('cus_warn') ?? '')).toMatchObject({
      status: 'warning',
      card_update_url: 'https://outage.test/card',
    });
    expect(expected.get('cus_nobody')).toBe('{"status":"active"}');

    // One webhook caught mid-transaction by the cut: another transaction holds its event id,
    // so that its INSERT waits on a connection the cut then resets.
    const tenantId = (await other.tenants.getTenant('outage'))?.id;
    const lock = new pg.Client({ connectionString: scoped.direct });
    locker = lock;
    await lock.connect();
    await lock.query('BEGIN');
    await lock.query(
      `INSERT INTO stripe_events (tenant_id, event_id, event_type, processor_customer_id, created, facts, outcome, received_at)
       VALUES ($1, 'evt_outage_held', 'invoice.payment_failed', 'cus_held', now(), '{}', 'ignored', now())`,
      [tenantId],
    );
    const held = webhook('cus_held', 'evt_outage_held').then(
      async (res) => ({ status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.text() }),
      (err: unknown) => ({ status: 0, retryAfter: null, body: (err as Error).message }),
    );
    await expect
      .poll(
        async () =>
          (
            await lock.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM pg_locks w WHERE NOT w.granted AND w.locktype = 'transactionid' AND w.transactionid =
                 (SELECT transactionid FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'transactionid' AND granted)`,
            )
          ).rows[0]?.n,
        { timeout: 5_000, interval: 20 },
      )
      .toBe(1);

    // The load, with the store cut away part of the way through.
    const answers: Answer[] = [];
    const failures: string[] = [];
    const pending: Promise<void>[] = [];
    let connectionsAtCut = 0;
    let outstanding = 0;
    let inFlightAtCut = 0;
    const t0 = Date.now();
    for (let i = 0; i < REQUESTS; i += 1) {
      const wait = t0 + i * INTERVAL_MS - Date.now();
      if (wait > 0) await sleep(wait);
      if (i === CUT_AT) {
        connectionsAtCut = proxy.connections;
        inFlightAtCut = outstanding;
        proxy.cut();
      }
      const kind = kindOf(i);
      const during = i >= CUT_AT;
      const customer =
        kind === 'known'
          ? (known[i % known.length] ?? null)
          : kind === 'unknown'
            ? `cus_fresh_${i}`
            : kind === 'webhook'
              ? `cus_hook_${i}`
              : null;
      const eventId = kind === 'webhook' ? `evt_outage_${i}` : null;
      const sent =
        kind === 'readyz'
          ? fetch(`${base}/readyz`, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) })
          : kind === 'webhook'
            ? webhook(customer ?? '', eventId ?? '')
            : lookup(customer ?? '');
      outstanding += 1;
      pending.push(
        sent
          .finally(() => (outstanding -= 1))
          .then(
            async (res) => {
              const body = await res.text();
              const code = res.headers.get('content-type')?.startsWith('application/problem+json')
                ? (JSON.parse(body) as { code: string }).code
                : null;
              answers.push({
                kind,
                during,
                status: res.status,
                code,
                retryAfter: res.headers.get('retry-after'),
                body,
                customer,
                eventId,
              });
            },
            (err: unknown) => {
              failures.push(`${kind} #${i}: ${(err as Error).message}`);
            },
          ),
      );
    }
    await Promise.all(pending);
    const connectionsDuringCut = proxy.connections - connectionsAtCut;
    await lock.query('ROLLBACK');
    await lock.end();
    locker = undefined;
    const heldAnswer = await held;

    // Still down: the process is up, the admin API and /readyz say 503 with Retry-After.
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    const adminDown = await admin('GET', '/tenants/outage');
    expect(adminDown.status).toBe(503);
    expect(adminDown.headers.get('retry-after')).toBe(String(STORE_UNAVAILABLE_RETRY_AFTER_S));
    // The read model has tried the store and found it gone.
    await pollUntil('a failed catch-up of the read model', async () =>
      /^dunwall_readmodel_catchup_failures_total [1-9]/m.test(await (await fetch(`${base}/metrics`)).text()),
    );
    const metricsDown = await (await fetch(`${base}/metrics`)).text();

    // Back: no restart, everything recovers within the bound.
    proxy.restore();
    const restoredAt = Date.now();
    await pollUntil('/readyz 200', async () => (await fetch(`${base}/readyz`)).status === 200);
    const readyMs = Date.now() - restoredAt;
    const metricNow = async (name: string) =>
      Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(await (await fetch(`${base}/metrics`)).text())?.[1] ?? NaN);
    await pollUntil(
      'the read model listening again',
      async () => (await metricNow('dunwall_readmodel_listening')) === 1,
    );
    const listeningMs = Date.now() - restoredAt;
    // Stripe delivers again what got no 2xx; every status ends as the events say.
    const refused = [
      ...answers.filter((a) => a.kind === 'webhook' && a.status !== 200),
      { customer: 'cus_held', eventId: 'evt_outage_held' },
    ];
    for (const a of refused) {
      const res = await webhook(a.customer ?? '', a.eventId ?? '');
      expect(res.status).toBe(200);
    }
    for (const a of [...answers.filter((x) => x.kind === 'webhook'), { customer: 'cus_held' }]) {
      const res = await lookup(a.customer ?? '');
      expect({ customer: a.customer, status: ((await res.json()) as { status: string }).status }).toEqual({
        customer: a.customer,
        status: 'lockout',
      });
    }
    // The read model is kept true again: this instance's own change at once, another
    // instance's through NOTIFY.
    expect((await admin('PUT', '/tenants/outage/subscribers/cus_lock', { status: 'active' })).status).toBe(200);
    expect(((await (await lookup('cus_lock')).json()) as { status: string }).status).toBe('active');
    const tenant = await other.tenants.getTenant('outage');
    if (tenant === null) throw new Error('the tenant is gone');
    await other.subscribers.applyChange(
      tenant.id,
      'cus_warn',
      { kind: 'set', status: 'lockout', reason: 'manual' },
      { source: 'admin', eventId: null, eventType: null, declineCode: null, occurredAt: new Date() },
      new Date(),
    );
    await expect
      .poll(async () => ((await (await lookup('cus_warn')).json()) as { status: string }).status, {
        timeout: 2_000,
        interval: 20,
      })
      .toBe('lockout');

    // The figures, then the verdicts.
    const byStatus = new Map<string, number>();
    for (const a of answers) {
      const label = a.status === 503 && a.code === 'store_unavailable' ? '503 store_unavailable' : String(a.status);
      byStatus.set(label, (byStatus.get(label) ?? 0) + 1);
    }
    const other5xx = answers.filter((a) => a.status >= 500 && a.code !== 'store_unavailable');
    const during = (kind: Kind) => answers.filter((a) => a.during && a.kind === kind);
    const share = (kind: Kind, ok: (a: Answer) => boolean) =>
      `${during(kind).filter(ok).length}/${during(kind).length}`;
    const failedCatchUps = /^dunwall_readmodel_catchup_failures_total (\d+)$/m.exec(metricsDown)?.[1] ?? '0';
    console.log(
      `outage figures: ${REQUESTS} requests tried (${CUT_AT} before the cut, ${REQUESTS - CUT_AT} during), ${failures.length} without an answer; ` +
        `answers ${[...byStatus].map(([s, n]) => `${s}: ${n}`).join(', ')}; 5xx other than store_unavailable: ${other5xx.length}; ` +
        `during the cut: known lookups 200 ${share('known', (a) => a.status === 200)}, unknown lookups 200 ${share('unknown', (a) => a.status === 200)}, ` +
        `webhooks 503 ${share('webhook', (a) => a.status === 503)}, /readyz 503 ${share('readyz', (a) => a.status === 503)}; ` +
        `failed catch-ups of the read model ${failedCatchUps}; store connections tried during the cut ${connectionsDuringCut} (requests in flight at the cut ${inFlightAtCut}); ` +
        `back, from the restore: /readyz 200 in ${readyMs} ms, read model listening in ${listeningMs} ms; ` +
        `webhooks redelivered ${refused.length} (one caught mid-transaction), all statuses right`,
    );

    expect(failures).toEqual([]);
    expect(crashes).toEqual([]);
    expect(heldAnswer.status).toBe(503);
    expect(heldAnswer.retryAfter).toBe(String(STORE_UNAVAILABLE_RETRY_AFTER_S));
    expect(JSON.parse(heldAnswer.body)).toMatchObject({ code: 'store_unavailable' });
    expect(answers).toHaveLength(REQUESTS);
    expect(other5xx).toEqual([]);
    for (const a of answers) {
      expect([200, 503]).toContain(a.status);
      if (a.status === 503) {
        expect(a.code).toBe('store_unavailable');
        expect(a.retryAfter).toBe(String(STORE_UNAVAILABLE_RETRY_AFTER_S));
        expect(a.body).not.toMatch(/ECONN|terminated|5432/);
      }
    }
    // Every lookup answered from the read model, as before the cut: known customers their
    // status, customers never seen `active`.
    for (const a of answers.filter((x) => x.kind === 'known')) {
      expect({ customer: a.customer, status: a.status, body: a.body }).toEqual({
        customer: a.customer,
        status: 200,
        body: expected.get(a.customer ?? ''),
      });
    }
    expect(during('unknown').length).toBeGreaterThan(0);
    for (const a of answers.filter((x) => x.kind === 'unknown'))
      expect({ customer: a.customer, status: a.status, body: a.body }).toEqual({
        customer: a.customer,
        status: 200,
        body: '{"status":"active"}',
      });
    for (const kind of ['webhook', 'readyz'] as const) {
      expect(during(kind).length).toBeGreaterThan(0);
      expect(during(kind).every((a) => a.status === 503)).toBe(true);
    }
    expect(Number(failedCatchUps)).toBeGreaterThan(0);
    expect(connectionsDuringCut).toBeLessThanOrEqual(
      during('webhook').length + during('readyz').length + inFlightAtCut + OTHER_CONNECTIONS_MAX,
    );
  });
});
