import { createSecretKey, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/http/app.js';
import { SecretBox } from '../../src/secrets/cipher.js';
import { UNREADABLE_SECRET_RETRY_MS, storeOver } from '../../src/store/index.js';
import { DownstreamDeliverer } from '../../src/downstream/index.js';
import { availableEngines } from '../helpers/engines.js';
import type { Engine } from '../helpers/engines.js';
import { ADMIN_TOKEN, FakeClock, buildAppWithModel, adminRequest } from '../helpers/harness.js';
import { Receiver } from '../helpers/receiver.js';
import { verifyDelivery } from '../helpers/webhook.js';

/**
 * One endpoint whose sealed signing secret does not open (copied from another endpoint's
 * row) must not stop the deliveries of every other endpoint: its messages wait, unattempted,
 * and it is named once in the log.
 */

const engines = await availableEngines();
const KEY = createSecretKey(randomBytes(32));
const LOOPBACK_OK = { allowHttpLoopback: true, allowedNetworks: ['127.0.0.0/8'] };

function verify(
  secret: string,
  r: { headers: Record<string, unknown>; body: string },
): { tenant: string; data: { processor_customer_id: string } } {
  return verifyDelivery(secret, r);
}

describe.each(engines)('an endpoint whose signing secret cannot be read ($name)', (engine: Engine) => {
  let opened: Awaited<ReturnType<Engine['open']>>;
  let app: App;
  let receiver: Receiver;
  let deliverer: DownstreamDeliverer;
  const clock = new FakeClock();
  const logged: { level: string; obj: Record<string, unknown>; msg: string }[] = [];

  const admin = (method: string, url: string, body?: unknown) => adminRequest(app, method, url, body);

  beforeAll(async () => {
    opened = await engine.open();
    const store = storeOver(opened.db, { secrets: new SecretBox({ current: KEY }) });
    app = await buildAppWithModel({ store, adminToken: ADMIN_TOKEN, now: clock.now, downstream: LOOPBACK_OK });
    await app.ready();
    receiver = await Receiver.start();
    deliverer = new DownstreamDeliverer({
      queue: store.downstream.queue,
      now: clock.now,
      random: () => 0.5,
      attemptTimeoutMs: 2_000,
      concurrencyPerEndpoint: 4,
      log: {
        info: (obj, msg) => logged.push({ level: 'info', obj: obj as Record<string, unknown>, msg }),
        warn: (obj, msg) => logged.push({ level: 'warn', obj: obj as Record<string, unknown>, msg }),
      },
      ...LOOPBACK_OK,
    });
  });
  afterAll(async () => {
    await deliverer.stop();
    await receiver.close();
    await app.close();
    await opened.cleanup();
  });

  it('skips that endpoint only, names it once, and sends its messages once the secret is fixed', async () => {
    const endpoints: Record<string, { id: string; secret: string }> = {};
    for (const slug of ['acme', 'beta']) {
      expect((await admin('POST', '/tenants', { slug, tier: 'scale' })).statusCode).toBe(201);
      const res = await admin('POST', `/tenants/${slug}/webhook-endpoints`, { url: receiver.url() });
      expect(res.statusCode, res.body).toBe(201);
      endpoints[slug] = res.json();
    }
    const sealedOf = async (slug: string) =>
      (
        await opened.db.query<{ secret: string }>(
          `SELECT c.secret FROM tenant_credentials c JOIN tenants t ON t.id = c.tenant_id WHERE t.slug = $1 AND c.kind = 'webhook_signing_secret'`,
          [slug],
        )
      )[0]?.secret ?? '';
    const betaSealed = await sealedOf('beta');
    const setSealed = async (slug: string, secret: string) =>
      opened.db.query(
        `UPDATE tenant_credentials SET secret = $1 WHERE kind = 'webhook_signing_secret' AND tenant_id = (SELECT id FROM tenants WHERE slug = $2)`,
        [secret, slug],
      );
    await setSealed('beta', await sealedOf('acme'));

    // beta's message is due first: the claim meets the unreadable endpoint before acme's.
    expect((await admin('PUT', '/tenants/beta/subscribers/cus_beta', { status: 'warning' })).statusCode).toBe(200);
    clock.advance(1_000);
    expect((await admin('PUT', '/tenants/acme/subscribers/cus_acme', { status: 'warning' })).statusCode).toBe(200);

    expect(await deliverer.runOnce()).toBe(1);
    expect(receiver.received).toHaveLength(1);
    expect(verify(endpoints.acme?.secret ?? '', receiver.received[0] as never)).toMatchObject({
      tenant: 'acme',
      data: { processor_customer_id: 'cus_acme' },
    });
    // beta's message waits, unattempted.
    const attempts = await admin('GET', `/tenants/beta/webhook-endpoints/${endpoints.beta?.id}/attempts`);
    expect(attempts.json()).toMatchObject({ data: [] });
    const warned = logged.filter((e) => e.level === 'warn');
    expect(warned).toHaveLength(1);
    expect(warned[0]?.obj).toMatchObject({ endpoint: endpoints.beta?.id });
    expect(String(warned[0]?.obj.reason)).toContain('webhook_signing_secret');
    const text = JSON.stringify(logged);
    for (const secret of [
      betaSealed,
      await sealedOf('acme'),
      endpoints.acme?.secret ?? '-',
      endpoints.beta?.secret ?? '-',
    ])
      expect(text).not.toContain(secret);

    // Later changes of the others still go out; the bad endpoint is not logged again.
    clock.advance(1_000);
    expect((await admin('PUT', '/tenants/acme/subscribers/cus_acme', { status: 'lockout' })).statusCode).toBe(200);
    clock.advance(UNREADABLE_SECRET_RETRY_MS);
    expect(await deliverer.runOnce()).toBe(1);
    expect(receiver.received).toHaveLength(2);
    expect(logged.filter((e) => e.level === 'warn')).toHaveLength(1);

    // Fixed: its message goes out, signed with its own secret.
    await setSealed('beta', betaSealed);
    clock.advance(UNREADABLE_SECRET_RETRY_MS);
    expect(await deliverer.runOnce()).toBe(1);
    expect(verify(endpoints.beta?.secret ?? '', receiver.received[2] as never)).toMatchObject({
      tenant: 'beta',
      data: { processor_customer_id: 'cus_beta' },
    });
    expect(logged.filter((e) => e.level === 'info' && e.obj.endpoint === endpoints.beta?.id)).toHaveLength(1);
  });
});
