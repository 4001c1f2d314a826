import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/runtime/logger.js';
import { SecretBox, parseEncryptionKey } from '../../src/secrets/cipher.js';
import type { StripeTimers } from '../../src/services/stripe-api.js';
import { reencryptSecrets, secretCensus, storeOver } from '../../src/store/index.js';
import type { Db, Store } from '../../src/store/index.js';
import type { App } from '../../src/http/app.js';
import { availableEngines } from '../helpers/engines.js';
import { ADMIN_TOKEN, FakeClock, appWithModel } from '../helpers/harness.js';
import { Capture } from '../helpers/log-capture.js';
import { socketRequest } from '../helpers/socket.js';
import type { SocketAnswer } from '../helpers/socket.js';
import { startStripeStandin } from '../helpers/stripe-standin.js';
import type { StripeStandin } from '../helpers/stripe-standin.js';

/**
 * The tenant's Stripe API key through the admin API and the tenant API, over a real socket,
 * against the Stripe stand-in, on both engines: checked against Stripe before it is kept
 * (each missing permission named, an unknown key refused, nothing kept when Stripe is down,
 * slow or erring), sealed at rest (its text is nowhere in the database), shown again only by
 * its prefix, set by the operator or a key holding `stripe:write` alone, and each change
 * recorded with who made it. The 3 s bound is passed with timers the test fires.
 */
const engines = await availableEngines();

const LIVE_KEY = `rk_live_${'A1b2C3d4'.repeat(6)}`;
const LIVE_KEY_2 = `rk_live_${'Z9y8X7w6'.repeat(6)}`;
const TEST_KEY = `rk_test_${'Q1w2E3r4'.repeat(6)}`;
const SECRET_LIVE = `sk_live_${'M5n6B7v8'.repeat(6)}`;
const NO_PORTAL = `rk_live_${'P0o9I8u7'.repeat(6)}`;
const READ_NOTHING = `rk_live_${'L1k2J3h4'.repeat(6)}`;
const ALL_FOUR = [
  'rak_invoice_read',
  'rak_customer_read',
  'rak_subscription_read',
  'rak_billing_portal_session_write',
] as const;

/** Timers the test fires: the stand-in holds its answers while the test passes 3 s. */
function manualTimers() {
  const due = new Map<number, () => void>();
  let next = 1;
  const timers: StripeTimers = {
    setTimeout(fn) {
      const id = next++;
      due.set(id, fn);
      return id;
    },
    clearTimeout(handle) {
      due.delete(handle as number);
    },
  };
  return {
    timers,
    fireAll() {
      for (const [id, fn] of [...due]) {
        due.delete(id);
        fn();
      }
    },
  };
}

describe.each(engines)("the tenant's Stripe API key ($name)", (engine) => {
  let app: App;
  let store: Store;
  let db: Db;
  let cleanup: () => Promise<void>;
  let standin: StripeStandin;
  const clock = new FakeClock();
  const logs = new Capture();
  const manual = manualTimers();
  let useManualTimers = false;
  const timers: StripeTimers = {
    setTimeout: (fn, ms) => (useManualTimers ? manual.timers.setTimeout(fn, ms) : setTimeout(fn, ms)),
    clearTimeout: (h) =>
      useManualTimers ? manual.timers.clearTimeout(h) : clearTimeout(h as ReturnType<typeof setTimeout>),
  };
  const encryptionKey = parseEncryptionKey(randomBytes(32).toString('hex'));
  if (encryptionKey === null) throw new Error('no key');
  const secrets = new SecretBox({ current: encryptionKey });

  const call = (method: string, path: string, auth: string, body?: unknown): Promise<SocketAnswer> =>
    socketRequest(
      app,
      method,
      path,
      {
        authorization: `Bearer ${auth}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body === undefined ? undefined : JSON.stringify(body),
    );
  const admin = (method: string, path: string, body?: unknown) => call(method, `/admin/v1${path}`, ADMIN_TOKEN, body);

  async function storedRows(): Promise<Array<{ tenant_id: number; secret: string; prefix: string }>> {
    return db.query('SELECT tenant_id, secret, prefix FROM tenant_stripe_api_keys ORDER BY tenant_id');
  }
  /** Every text of every table: where a key's plaintext would show if it were kept in clear anywhere. */
  async function databaseText(): Promise<string> {
    const tables = await db.query<{ table_name: string }>(
      "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'",
    );
    let text = '';
    for (const { table_name } of tables) {
      const rows = await db.query(`SELECT * FROM "${table_name}"`);
      text += JSON.stringify(rows);
    }
    return text;
  }

  beforeAll(async () => {
    standin = await startStripeStandin(
      { subscriptions: [], invoices: [], invoicePayments: [], paymentIntents: [], charges: [], customers: [] },
      {
        keys: {
          [LIVE_KEY]: ALL_FOUR,
          [LIVE_KEY_2]: 'all',
          [TEST_KEY]: ALL_FOUR,
          [SECRET_LIVE]: 'all',
          [NO_PORTAL]: ['rak_invoice_read', 'rak_customer_read', 'rak_subscription_read'],
          [READ_NOTHING]: [],
        },
      },
    );
    const opened = await engine.open();
    db = opened.db;
    cleanup = opened.cleanup;
    store = storeOver(db, { secrets });
    ({ app } = await appWithModel({
      store,
      adminToken: ADMIN_TOKEN,
      now: clock.now,
      logger: createLogger('trace', logs),
      stripeApi: { apiUrl: standin.url, timeoutMs: 3000, timers },
    }));
    await app.ready();
    for (const [slug, livemode] of [
      ['acme', true],
      ['sandbox', false],
    ] as const) {
      const res = await admin('POST', '/tenants', { slug, livemode });
      expect(res.statusCode, res.body).toBe(201);
    }
  });
  afterAll(async () => {
    await app.close();
    await cleanup();
    await standin.close();
  });
  afterEach(() => {
    useManualTimers = false;
    standin.release();
    standin.up();
    standin.recover();
  });

  it('the operator sets a live key: checked with Stripe, sealed, shown by its prefix only', async () => {
    const before = standin.requests.length;
    const res = await admin('PUT', '/tenants/acme/stripe-api-key', { key: LIVE_KEY });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      mode: 'live',
      stripe_api_key: { prefix: LIVE_KEY.slice(0, 12), set_at: new Date(clock.ms).toISOString() },
      changes: [{ at: new Date(clock.ms).toISOString(), by: 'operator', key: null }],
    });
    expect(res.body).not.toContain(LIVE_KEY);
    // The four calls of the check, each with the key, none creating anything.
    const asked = standin.requests.slice(before).map((r) => `${r.method} ${r.path} ${r.status}`);
    expect(asked.sort()).toEqual([
      'GET /v1/customers 200',
      'GET /v1/invoices 200',
      'GET /v1/subscriptions 200',
      'POST /v1/billing_portal/sessions 400',
    ]);
    expect(standin.requests.slice(before).every((r) => r.key === LIVE_KEY)).toBe(true);

    const rows = await storedRows();
    expect(rows).toHaveLength(1);
    expect(rows[0]?.secret).toMatch(/^enc:v1:/);
    expect(rows[0]?.prefix).toBe('rk_live_A1b2');
    expect(await databaseText()).not.toContain(LIVE_KEY.slice(12));
    expect(await store.stripeApiKeys.openStripeApiKey(rows[0]?.tenant_id ?? 0)).toBe(LIVE_KEY);

    const detail = await admin('GET', '/tenants/acme');
    expect(detail.json()).toMatchObject({ stripe_api_key: { prefix: 'rk_live_A1b2' } });
    expect(detail.body).not.toContain(LIVE_KEY);
    expect(logs.text).not.toContain(LIVE_KEY.slice(12));
  });

  it('refuses a key of the other mode, naming both, and keeps what was there', async () => {
    const res = await admin('PUT', '/tenants/acme/stripe-api-key', { key: TEST_KEY });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'stripe_key_mode_mismatch' });
    expect(res.json().detail).toContain('test key');
    expect(res.json().detail).toContain('the mode addressed is live');
    const live = await admin('PUT', '/tenants/acme/stripe-api-key?mode=live', { key: TEST_KEY });
    expect(live.json()).toMatchObject({ code: 'stripe_key_mode_mismatch' });
    expect((await storedRows()).map((r) => r.prefix)).toEqual(['rk_live_A1b2']);
  });

  it('sets a test key on the test mode (?mode=test), beside the live one; an unknown mode is a 400', async () => {
    const res = await admin('PUT', '/tenants/sandbox/stripe-api-key?mode=test', { key: TEST_KEY });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ mode: 'test', stripe_api_key: { prefix: 'rk_test_Q1w2' } });
    // Every tenant has both modes: the live tenant's test mode takes a test key of its own.
    const acmeTest = await admin('PUT', '/tenants/acme/stripe-api-key?mode=test', { key: TEST_KEY });
    expect(acmeTest.statusCode, acmeTest.body).toBe(200);
    expect((await admin('GET', '/tenants/acme?mode=test')).json().stripe_api_key).toMatchObject({
      prefix: 'rk_test_Q1w2',
    });
    expect((await admin('GET', '/tenants/acme')).json().stripe_api_key).toMatchObject({ prefix: 'rk_live_A1b2' });
    const bad = await admin('PUT', '/tenants/acme/stripe-api-key?mode=staging', { key: LIVE_KEY });
    expect(bad.statusCode).toBe(400);
  });

  it('names each permission a restricted key lacks, and stores nothing', async () => {
    const res = await admin('PUT', '/tenants/acme/stripe-api-key', { key: NO_PORTAL });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'stripe_key_permission' });
    expect(res.json().detail).toContain('Customer portal: write');
    expect(res.json().detail).not.toContain('Invoices: read');
    const none = await admin('PUT', '/tenants/acme/stripe-api-key', { key: READ_NOTHING });
    expect(none.json().detail).toContain(
      'Invoices: read, Customers: read, Subscriptions: read, Customer portal: write',
    );
    expect((await storedRows()).map((r) => r.prefix)).not.toContain(NO_PORTAL.slice(0, 12));
    expect((await admin('GET', '/tenants/acme')).json().stripe_api_key.prefix).toBe('rk_live_A1b2');
  });

  it('refuses a key Stripe does not know, and a value that is no Stripe key without echoing it', async () => {
    const unknown = `rk_live_${'U0n0K0n0'.repeat(6)}`;
    const res = await admin('PUT', '/tenants/acme/stripe-api-key', { key: unknown });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'stripe_key_invalid' });
    expect(res.body).not.toContain(unknown);
    const shape = await admin('PUT', '/tenants/acme/stripe-api-key', { key: 'pk_live_notasecretkey0000000000' });
    expect(shape.statusCode).toBe(400);
    expect(shape.json()).toMatchObject({ code: 'invalid_request' });
    expect(shape.body).not.toContain('notasecretkey');
  });

  it('stores nothing when Stripe is down (503), erring (502) or slower than 3 s (503)', async () => {
    const rowsBefore = await storedRows();
    standin.down();
    const down = await admin('PUT', '/tenants/acme/stripe-api-key', { key: LIVE_KEY_2 });
    expect(down.statusCode).toBe(503);
    expect(down.json()).toMatchObject({ code: 'stripe_unreachable' });
    expect(down.json().detail).toContain('could not be reached');
    standin.up();

    standin.failFrom(1);
    const erring = await admin('PUT', '/tenants/acme/stripe-api-key', { key: LIVE_KEY_2 });
    expect(erring.statusCode).toBe(502);
    expect(erring.json()).toMatchObject({ code: 'stripe_error' });
    standin.recover();

    useManualTimers = true;
    standin.hold();
    const slow = admin('PUT', '/tenants/acme/stripe-api-key', { key: LIVE_KEY_2 });
    await expect.poll(() => standin.held).toBe(4);
    manual.fireAll();
    const answer = await slow;
    expect(answer.statusCode).toBe(503);
    expect(answer.json().detail).toContain('did not answer within 3000 ms');
    standin.release();

    expect(await storedRows()).toEqual(rowsBefore);
  });

  it('is the tenant API too: stripe:write alone sets it, other scopes cannot, the change names the key', async () => {
    const mint = async (name: string, scopes: string[]) => {
      const res = await admin('POST', '/tenants/acme/keys', { name, scopes });
      expect(res.statusCode, res.body).toBe(201);
      return res.json() as { id: string; secret_key: string; prefix: string };
    };
    const stripeOnly = await mint('stripe setter', ['stripe:write']);
    const everythingElse = await mint('settings', ['settings:write', 'keys:write', 'status:read']);

    const refused = await call('PUT', '/v1/settings/stripe-api-key', everythingElse.secret_key, { key: LIVE_KEY_2 });
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toMatchObject({ code: 'insufficient_scope' });
    const refusedDelete = await call('DELETE', '/v1/settings/stripe-api-key', everythingElse.secret_key);
    expect(refusedDelete.statusCode).toBe(403);

    clock.advance(60_000);
    const set = await call('PUT', '/v1/settings/stripe-api-key', stripeOnly.secret_key, { key: LIVE_KEY_2 });
    expect(set.statusCode, set.body).toBe(200);
    expect(set.json()).toMatchObject({
      mode: 'live',
      stripe_api_key: { prefix: 'rk_live_Z9y8', set_at: new Date(clock.ms).toISOString() },
    });
    expect(set.json().changes[0]).toEqual({
      at: new Date(clock.ms).toISOString(),
      by: 'key',
      key: { id: stripeOnly.id, prefix: stripeOnly.prefix, name: 'stripe setter' },
    });
    expect(set.json().changes).toHaveLength(2);

    const settings = await call('GET', '/v1/settings', everythingElse.secret_key);
    expect(settings.json().stripe_api_key).toEqual({
      prefix: 'rk_live_Z9y8',
      set_at: new Date(clock.ms).toISOString(),
    });
    expect(settings.body).not.toContain(LIVE_KEY_2);

    // A key sent from a browser is refused before anything reaches Stripe.
    const before = standin.requests.length;
    const browser = await socketRequest(
      app,
      'PUT',
      '/v1/settings/stripe-api-key',
      {
        authorization: `Bearer ${stripeOnly.secret_key}`,
        origin: 'https://evil.example',
        'content-type': 'application/json',
      },
      JSON.stringify({ key: LIVE_KEY }),
    );
    expect(browser.statusCode).toBe(401);
    expect(standin.requests.length).toBe(before);
  });

  it('DELETE removes it, recorded; a delete of none changes nothing', async () => {
    const res = await admin('DELETE', '/tenants/acme/stripe-api-key');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ mode: 'live', stripe_api_key: null });
    expect(res.json().changes[0]).toMatchObject({ by: 'operator' });
    const changes = res.json().changes.length as number;
    const again = await admin('DELETE', '/tenants/acme/stripe-api-key');
    expect(again.json().changes).toHaveLength(changes);
    expect((await admin('GET', '/tenants/acme')).json().stripe_api_key).toBeNull();
    // The test modes' keys stay.
    expect((await storedRows()).map((r) => r.prefix)).toEqual(['rk_test_Q1w2', 'rk_test_Q1w2']);
  });

  it('a secret key (sk_) passes the same check; the keys are counted and re-encrypted with the other secrets', async () => {
    const res = await admin('PUT', '/tenants/acme/stripe-api-key', { key: SECRET_LIVE });
    expect(res.statusCode, res.body).toBe(200);
    const census = await secretCensus(db);
    expect(census.clear).toBe(0);
    const next = parseEncryptionKey(randomBytes(32).toString('hex'));
    if (next === null) throw new Error('no key');
    const rotated = new SecretBox({ current: next, previous: [encryptionKey] });
    const counts = await reencryptSecrets(db, rotated);
    expect(counts.reencrypted).toBeGreaterThanOrEqual(2);
    const reopened = storeOver(db, { secrets: new SecretBox({ current: next }) });
    const acme = await store.tenants.getTenant('acme');
    expect(await reopened.stripeApiKeys.openStripeApiKey(acme?.id ?? 0)).toBe(SECRET_LIVE);
  });
});
