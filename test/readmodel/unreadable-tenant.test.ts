import { createSecretKey, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computeHmac } from '../../src/domain/hmac.js';
import { buildApp } from '../../src/http/app.js';
import type { App } from '../../src/http/app.js';
import { createMetrics } from '../../src/metrics/index.js';
import { ReadModel } from '../../src/readmodel/index.js';
import type { ReadModelLog } from '../../src/readmodel/index.js';
import { DEFAULT_STALE_IF_ERROR_MS } from '../../src/readmodel/read-model.js';
import { SecretBox } from '../../src/secrets/cipher.js';
import { storeOver } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { availableEngines } from '../helpers/engines.js';
import type { Engine } from '../helpers/engines.js';
import { ADMIN_TOKEN, FakeClock, adminRequest } from '../helpers/harness.js';
import type { CreatedTenant } from '../helpers/harness.js';
import { socketRequest } from '../helpers/socket.js';
import { event, invoice, signed } from '../helpers/stripe-fixtures.js';

/**
 * One tenant whose row cannot be read (its sealed HMAC secret replaced by another tenant's,
 * as a restore gone wrong or a manual fix leaves it) costs that tenant only: every other
 * tenant's changes and loads still apply, readiness holds, its own lookups fail open (503),
 * it is named in the log and the metrics, and fixing the row recovers it through the change
 * stream.
 */

const engines = await availableEngines();
const KEY = createSecretKey(randomBytes(32));
const WHSEC_BETA = `whsec_${randomBytes(24).toString('base64url')}`;

interface LogEntry {
  level: 'info' | 'warn';
  obj: Record<string, unknown>;
  msg: string;
}

describe.each(engines)('a tenant whose row cannot be read ($name)', (engine: Engine) => {
  let opened: Awaited<ReturnType<Engine['open']>>;
  let store: Store;
  let model: ReadModel;
  let app: App;
  const clock = new FakeClock();
  const logged: LogEntry[] = [];
  const log: ReadModelLog = {
    info: (obj, msg) => logged.push({ level: 'info', obj: obj as Record<string, unknown>, msg }),
    warn: (obj, msg) => logged.push({ level: 'warn', obj: obj as Record<string, unknown>, msg }),
  };
  const tenants: Record<string, CreatedTenant> = {};

  const admin = (method: string, url: string, body?: unknown) => adminRequest(app, method, url, body);
  const create = async (slug: string) => {
    const res = await admin('POST', '/tenants', { slug });
    expect(res.statusCode).toBe(201);
    tenants[slug] = res.json<CreatedTenant>();
    return tenants[slug];
  };
  /** A lookup through a real socket: the fast path answers it. */
  const lookup = (slug: string, customerId = 'cus_probe') => {
    const t = tenants[slug];
    const hmac = t === undefined ? '' : `&hmac=${computeHmac(t.hmac_secret, customerId)}`;
    return socketRequest(app, 'GET', `/api/subscriber-status/${slug}?processor_customer_id=${customerId}${hmac}`, {
      authorization: `Bearer ${t?.publishable_key ?? 'pk_unknownunknownunknown0000'}`,
    });
  };
  const scrape = async () => {
    const res = await app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    return res.body;
  };
  const metric = (text: string, series: string) =>
    Number(new RegExp(`^${series.replace(/[{}"()[\]]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1] ?? 'NaN');
  const idOf = async (slug: string) =>
    (await opened.db.query<{ id: number }>('SELECT id FROM tenants WHERE slug = $1', [slug]))[0]?.id ?? -1;
  const sealedHmac = async (slug: string) =>
    (
      await opened.db.query<{ secret: string }>(
        `SELECT secret FROM tenant_credentials WHERE tenant_id = $1 AND kind = 'hmac_secret' ORDER BY id LIMIT 1`,
        [await idOf(slug)],
      )
    )[0]?.secret ?? '';
  /** What an audit found: one tenant's sealed secret copied into another tenant's row. */
  const copySealedHmac = async (from: string, to: string) => {
    await opened.db.query(`UPDATE tenant_credentials SET secret = $1 WHERE tenant_id = $2 AND kind = 'hmac_secret'`, [
      await sealedHmac(from),
      await idOf(to),
    ]);
  };

  beforeAll(async () => {
    opened = await engine.open();
    store = storeOver(opened.db, { secrets: new SecretBox({ current: KEY }) });
    model = await ReadModel.open(store.changes, { now: clock.now, log });
    app = await buildApp({ store, model, adminToken: ADMIN_TOKEN, now: clock.now, metrics: createMetrics() });
    app.addHook('onClose', () => model.close());
    await app.ready();
  });
  afterAll(async () => {
    await app.close();
    await opened.cleanup();
  });

  it("costs only that tenant: others' changes, loads and readiness go on; its lookups fail open; it is named; fixing it recovers", async () => {
    await create('acme');
    await create('beta');
    await create('gamma');
    expect((await admin('PATCH', '/tenants/beta', { stripe_webhook_secret: WHSEC_BETA })).statusCode).toBe(200);
    expect((await admin('PUT', '/tenants/gamma/subscribers/cus_gamma', { status: 'warning' })).statusCode).toBe(200);
    expect((await lookup('beta')).statusCode).toBe(200);
    const betaSealed = await sealedHmac('beta');

    await copySealedHmac('acme', 'beta');
    await model.catchUp();

    // Its lookups fail open: a 503 the snippet shows nothing on, never a 404 for a tenant that exists.
    const bad = await lookup('beta');
    expect(bad.statusCode).toBe(503);
    expect(bad.json()).toMatchObject({ code: 'store_unavailable' });
    expect(bad.headers['retry-after']).toMatch(/^\d+$/);
    expect(bad.headers['access-control-allow-origin']).toBe('*');
    expect(model.tenant('beta')).toBeNull();
    expect(model.unreadable('beta')).toMatchObject({ slug: 'beta', id: await idOf('beta') });
    // Check 1 still comes first: no key, a 401 as for any tenant.
    expect(
      (await socketRequest(app, 'GET', '/api/subscriber-status/beta?processor_customer_id=cus_probe')).statusCode,
    ).toBe(401);

    // Every other tenant's changes still reach the read model: a suspension, a new tenant, a status.
    expect((await admin('PATCH', '/tenants/acme', { suspended: true })).statusCode).toBe(200);
    await create('delta');
    expect((await admin('PUT', '/tenants/gamma/subscribers/cus_gamma', { status: 'lockout' })).statusCode).toBe(200);
    await model.catchUp();
    expect((await lookup('acme')).json()).toMatchObject({ code: 'tenant_suspended' });
    expect((await lookup('delta')).statusCode).toBe(200);
    expect((await lookup('gamma', 'cus_gamma')).json()).toMatchObject({ status: 'lockout' });
    // The unreadable tenant's own subscribers and Stripe events are kept following too.
    expect((await admin('PUT', '/tenants/beta/subscribers/cus_beta', { status: 'warning' })).statusCode).toBe(200);
    const nowS = Math.floor(clock.ms / 1000);
    const { payload, signature } = signed(
      event('invoice.payment_failed', invoice('cus_beta_stripe', { next_payment_attempt: null }), { created: nowS }),
      WHSEC_BETA,
      nowS,
    );
    const webhook = await app.inject({
      method: 'POST',
      url: '/webhooks/stripe/beta',
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      payload,
    });
    expect(webhook.statusCode).toBe(200);
    await model.catchUp();
    expect(model.status(await idOf('beta'), 'cus_beta')).toBe('warning');
    expect(model.status(await idOf('beta'), 'cus_beta_stripe')).toBe('lockout');

    // Readiness holds, past the time a failing read model would stop serving.
    for (let i = 0; i < 4; i += 1) {
      clock.advance(DEFAULT_STALE_IF_ERROR_MS / 3);
      await model.catchUp();
    }
    expect(model.serving(clock.ms)).toBe(true);
    expect(model.snapshotStats().catchUps.failed).toBe(0);
    const ready = await app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(200);
    expect((await lookup('delta')).statusCode).toBe(200);

    // A fresh load (a new process, a reload after a gap) succeeds with every readable tenant.
    const fresh = await ReadModel.open(store.changes, { now: clock.now });
    try {
      for (const slug of ['acme', 'gamma', 'delta']) expect(fresh.tenant(slug)?.slug).toBe(slug);
      expect(fresh.tenant('beta')).toBeNull();
      expect(fresh.unreadable('beta')?.slug).toBe('beta');
      expect(fresh.status(await idOf('gamma'), 'cus_gamma')).toBe('lockout');
      expect(fresh.snapshotStats()).toMatchObject({ tenants: 3, unreadableTenants: [{ slug: 'beta' }] });
    } finally {
      await fresh.close();
    }

    // Named once in the log, however many catch-ups saw it, without any secret.
    const warned = logged.filter((e) => e.level === 'warn');
    expect(warned).toHaveLength(1);
    expect(warned[0]?.obj).toMatchObject({ tenant: 'beta', tenantId: await idOf('beta') });
    const [betaRow] = await opened.db.query<{ id: number }>(
      `SELECT id FROM tenant_credentials WHERE tenant_id = $1 AND kind = 'hmac_secret'`,
      [await idOf('beta')],
    );
    expect(String(warned[0]?.obj.reason)).toContain(`hmac_secret of tenant ${await idOf('beta')}`);
    expect(String(warned[0]?.obj.reason)).toContain(`(tenant_credentials id ${betaRow?.id})`);
    const text = JSON.stringify(logged);
    for (const secret of [
      betaSealed,
      await sealedHmac('acme'),
      tenants.beta?.hmac_secret ?? '-',
      tenants.acme?.hmac_secret ?? '-',
    ])
      expect(text).not.toContain(secret);
    // And in the metrics.
    const scraped = await scrape();
    expect(metric(scraped, 'dunwall_tenants_unreadable')).toBe(1);
    expect(metric(scraped, `dunwall_tenant_unreadable{tenant_id="${await idOf('beta')}"}`)).toBe(1);
    expect(scraped).not.toContain('beta');
    expect(metric(scraped, 'dunwall_readmodel_tenants')).toBe(3);

    // Fixed: the row as it was, and the tenant is back through the change stream.
    await opened.db.query(`UPDATE tenant_credentials SET secret = $1 WHERE tenant_id = $2 AND kind = 'hmac_secret'`, [
      betaSealed,
      await idOf('beta'),
    ]);
    await model.catchUp();
    const back = await lookup('beta', 'cus_beta');
    expect(back.statusCode).toBe(200);
    expect(back.json()).toMatchObject({ status: 'warning' });
    expect(model.unreadable('beta')).toBeNull();
    expect(logged.filter((e) => e.level === 'info' && e.obj.tenant === 'beta')).toHaveLength(1);
    const after = await scrape();
    expect(metric(after, 'dunwall_tenants_unreadable')).toBe(0);
    expect(after).not.toContain('dunwall_tenant_unreadable{');
    expect(model.snapshotStats().loads).toBe(1);
  });

  it('recovers when the unreadable tenant is deleted instead', async () => {
    await create('doomed');
    await copySealedHmac('gamma', 'doomed');
    await model.catchUp();
    expect((await lookup('doomed')).statusCode).toBe(503);
    await opened.db.query(`DELETE FROM tenants WHERE slug = 'doomed'`);
    await model.catchUp();
    const gone = await lookup('doomed');
    expect(gone.statusCode).toBe(404);
    expect(gone.json()).toMatchObject({ code: 'tenant_not_found' });
    expect(model.snapshotStats().unreadableTenants).toEqual([]);
    expect(metric(await scrape(), 'dunwall_tenants_unreadable')).toBe(0);
    expect((await lookup('gamma', 'cus_gamma')).json()).toMatchObject({ status: 'lockout' });
  });
});
