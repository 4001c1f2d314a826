import { request } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { App } from '../../src/http/app.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { ADMIN_TOKEN, buildAppWithModel } from './harness.js';
import { portOf } from './socket.js';
import { LEGACY_API, event, hostedInvoiceUrl, invoice, paymentIds, signed } from './stripe-fixtures.js';

/**
 * A real Dunwall for the @dunwall/node tests: the app and its read model on loopback, one
 * tenant (escalating a warning after 14 days), a secret key with `status:read`, and
 * subscribers in each state, set through the admin API and through Stripe's signed webhook
 * (for the pay link and the scheduled lockout).
 */
export const STRIPE_SECRET = 'whsec_node_middleware_0123456789abcdef';
const DAY_MS = 86_400_000;

export interface Subscribers {
  /** No record: active. */
  active: string;
  /** Set `warning` by the admin API: no pay link, no scheduled lockout. */
  warning: string;
  /** A soft decline: `warning`, with the invoice's pay link and a lockout in 14 days. */
  dunning: string;
  /** Retries exhausted: `lockout`, with the invoice's pay link. */
  lockout: string;
  /** Set `lockout` by the admin API: no pay link. */
  locked: string;
}

export interface Service {
  app: App;
  store: Store;
  baseUrl: string;
  secretKey: string;
  subscribers: Subscribers;
  /** The pay link of `dunning`'s and of `lockout`'s invoice. */
  payUrls: { dunning: string; lockout: string };
  /** `dunning`'s scheduled lockout, as Dunwall answers it. */
  lockoutAt: string;
  /** Sets a subscriber's status through the admin API. */
  setStatus(customerId: string, status: 'active' | 'warning' | 'lockout'): Promise<void>;
  close(): Promise<void>;
}

export async function startService(slug = 'acme'): Promise<Service> {
  const store = await openStore({ engine: 'embedded', dataDir: null });
  const app = await buildAppWithModel({ store, adminToken: ADMIN_TOKEN });
  try {
    const baseUrl = `http://127.0.0.1:${await portOf(app)}`;
    const admin = async (method: string, path: string, body: unknown, expected: number) => {
      const res = await app.inject({
        method: method as 'POST',
        url: `/admin/v1${path}`,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        payload: JSON.stringify(body),
      });
      if (res.statusCode !== expected) throw new Error(`${method} ${path}: ${res.statusCode} ${res.body}`);
      return res.json() as Record<string, unknown>;
    };
    await admin('POST', '/tenants', { slug, policy: { escalate_after_days: 14 } }, 201);
    await admin('PATCH', `/tenants/${slug}`, { stripe_webhook_secret: STRIPE_SECRET }, 200);
    const key = await admin('POST', `/tenants/${slug}/keys`, { name: 'web servers', scopes: ['status:read'] }, 201);
    const subscribers: Subscribers = {
      active: 'cus_active',
      warning: 'cus_warning',
      dunning: 'cus_dunning',
      lockout: 'cus_lockout',
      locked: 'cus_locked',
    };
    const setStatus = async (customerId: string, status: string) => {
      await admin('PUT', `/tenants/${slug}/subscribers/${customerId}`, { status }, 200);
    };
    await setStatus(subscribers.warning, 'warning');
    await setStatus(subscribers.locked, 'lockout');
    const nowS = Math.floor(Date.now() / 1000);
    const failed = async (customerId: string, nextAttempt: number | null) => {
      const ids = paymentIds();
      const fixture = event(
        'invoice.payment_failed',
        invoice(customerId, { api: LEGACY_API, ids, next_payment_attempt: nextAttempt }),
        {
          created: nowS,
          api: LEGACY_API,
        },
      );
      const { payload, signature } = signed(fixture, STRIPE_SECRET, nowS);
      const res = await app.inject({
        method: 'POST',
        url: `/webhooks/stripe/${slug}`,
        headers: { 'content-type': 'application/json', 'stripe-signature': signature },
        payload,
      });
      if (res.statusCode !== 200) throw new Error(`Stripe webhook: ${res.statusCode} ${res.body}`);
      return hostedInvoiceUrl(ids.invoice);
    };
    const payUrls = {
      dunning: await failed(subscribers.dunning, nowS + (3 * DAY_MS) / 1000),
      lockout: await failed(subscribers.lockout, null),
    };
    const lockoutAt = new Date(nowS * 1000 + 14 * DAY_MS).toISOString().replace('.000Z', 'Z');
    return {
      app,
      store,
      baseUrl,
      secretKey: String(key.secret_key),
      subscribers,
      payUrls,
      lockoutAt,
      setStatus,
      async close() {
        await app.close();
        await store.close();
      },
    };
  } catch (err) {
    await app.close();
    await store.close();
    throw err;
  }
}

export interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * One request on a fresh socket, the path sent as written (no normalization), bounded at 10 s.
 */
export function httpGet(
  port: number,
  path: string,
  headers: Record<string, string> = {},
  method = 'GET',
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers, agent: false, timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }),
      );
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer to ${method} ${path} in 10 s`)));
    req.on('error', reject);
    req.end();
  });
}

/** A node:http server's port, once it listens on loopback. */
export async function listening(server: Server): Promise<number> {
  if (!server.listening)
    await new Promise<void>((resolve, reject) => server.once('listening', resolve).once('error', reject));
  return (server.address() as AddressInfo).port;
}

export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
