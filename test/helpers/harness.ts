import type { LightMyRequestResponse } from 'fastify';
import { buildApp } from '../../src/http/app.js';
import { ReadModel } from '../../src/readmodel/index.js';
import type { ReadModelOptions } from '../../src/readmodel/index.js';
import type { App, AppDeps } from '../../src/http/app.js';
import { computeHmac } from '../../src/domain/hmac.js';
import type { Engine } from './engines.js';
import { socketRequest } from './socket.js';
import type { SocketAnswer } from './socket.js';

export const ADMIN_TOKEN = 'test-admin-token-0123456789abcdefghijklmnopqrstuv';
export const T0 = Date.parse('2026-01-01T00:00:00Z');

export interface CreatedTenant {
  slug: string;
  publishable_key: string;
  hmac_secret: string;
  [key: string]: unknown;
}

/** A fake clock: tests move time, nothing sleeps. */
export class FakeClock {
  constructor(public ms = T0) {}
  now = (): number => this.ms;
  advance(ms: number): void {
    this.ms += ms;
  }
}

export interface Harness {
  app: App;
  /** The app's read model, on the app's clock. */
  model: ReadModel;
  clock: FakeClock;
  store: Awaited<ReturnType<Engine['open']>>['store'];
  /** The store's database, for a test that sets up rows no role writes. */
  db: Awaited<ReturnType<Engine['open']>>['db'];
  /** Where the store is: a second instance opens its own store on it. */
  target: Awaited<ReturnType<Engine['open']>>['target'];
  admin(method: string, url: string, body?: unknown): Promise<LightMyRequestResponse>;
  createTenant(slug: string, fields?: Record<string, unknown>): Promise<CreatedTenant>;
  setSubscriber(slug: string, customerId: string, status: string, reason?: string): Promise<void>;
  /** A lookup through a real socket, where the fast path answers it. */
  lookup(
    slug: string,
    opts: { key?: string; customerId?: string; hmac?: string; query?: string; headers?: Record<string, string> },
  ): Promise<SocketAnswer>;
  close(): Promise<void>;
}

/**
 * The bound on a request's store calls in an app a test builds, unless the test gives its own.
 * The service's default (4 s of the real clock) is a margin that a loaded 2-core machine
 * spends on a PGlite batch (a dry run of 235 customers answered 503 there); the tests of the
 * bound itself set theirs (test/store/request-bound.test.ts, test/e2e/frozen-db.test.ts).
 */
export const TEST_STORE_REQUEST_TIMEOUT_MS = 60_000;

/**
 * `buildApp` with a read model opened on `deps.store` (on the app's clock, with `options`),
 * closed with the app, as the server wires them.
 */
export async function appWithModel(
  deps: Omit<AppDeps, 'model'>,
  options: Omit<ReadModelOptions, 'now'> = {},
): Promise<{ app: App; model: ReadModel }> {
  const model = await ReadModel.open(deps.store.changes, { ...options, ...(deps.now ? { now: deps.now } : {}) });
  try {
    const app = await buildApp({ storeRequestTimeoutMs: TEST_STORE_REQUEST_TIMEOUT_MS, ...deps, model });
    app.addHook('onClose', () => model.close());
    return { app, model };
  } catch (err) {
    await model.close();
    throw err;
  }
}

/** `appWithModel`'s app alone. */
export async function buildAppWithModel(deps: Omit<AppDeps, 'model'>): Promise<App> {
  return (await appWithModel(deps)).app;
}

/** A call of the admin API (`/admin/v1` + `url`) with the test token, JSON in when a body is given. */
export function adminRequest(app: App, method: string, url: string, body?: unknown): Promise<LightMyRequestResponse> {
  return app.inject({
    method: method as 'GET',
    url: `/admin/v1${url}`,
    headers: {
      authorization: `Bearer ${ADMIN_TOKEN}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });
}

/** `storeOptions.fromTemplate`: the store a copy of the run's migrated folder (engines.ts), for a harness per test. */
export async function harness(
  engine: Engine,
  deps: Partial<AppDeps> = {},
  modelOptions: Omit<ReadModelOptions, 'now'> = {},
  storeOptions: { fromTemplate?: boolean } = {},
): Promise<Harness> {
  const opened = await engine.open(storeOptions);
  const clock = new FakeClock();
  // The lookup answers from the read model, kept true as in production: every route test
  // checks that writes reach the answers.
  const { app, model } = await appWithModel(
    { store: opened.store, adminToken: ADMIN_TOKEN, now: clock.now, ...deps },
    modelOptions,
  );
  await app.ready();

  const admin: Harness['admin'] = (method, url, body) => adminRequest(app, method, url, body);

  return {
    app,
    model,
    clock,
    store: opened.store,
    db: opened.db,
    target: opened.target,
    admin,
    async createTenant(slug, fields = {}) {
      const res = await admin('POST', '/tenants', { slug, ...fields });
      if (res.statusCode !== 201) throw new Error(`tenant create failed: ${res.statusCode} ${res.body}`);
      return res.json() as CreatedTenant;
    },
    async setSubscriber(slug, customerId, status, reason) {
      const res = await admin('PUT', `/tenants/${slug}/subscribers/${customerId}`, {
        status,
        ...(reason ? { reason } : {}),
      });
      if (res.statusCode !== 200) throw new Error(`subscriber put failed: ${res.statusCode} ${res.body}`);
    },
    lookup(slug, opts) {
      const params = new URLSearchParams();
      if (opts.customerId !== undefined) params.set('processor_customer_id', opts.customerId);
      if (opts.hmac !== undefined) params.set('hmac', opts.hmac);
      const query = [params.toString(), opts.query].filter(Boolean).join('&');
      return socketRequest(app, 'GET', `/api/subscriber-status/${slug}${query ? `?${query}` : ''}`, {
        ...(opts.key ? { authorization: `Bearer ${opts.key}` } : {}),
        ...opts.headers,
      });
    },
    async close() {
      await app.close();
      await opened.cleanup();
    },
  };
}

export { computeHmac };
