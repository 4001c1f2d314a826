/**
 * Instance B of the `feed` row: the service's app and read model on the bench database, with
 * the status feed's routes under /v1 as the tenant API mounts them. The tenant comes from
 * `X-Bench-Tenant` (its slug) instead of a secret key: the row measures the feed (the change
 * log's NOTIFY, the read model's catch-up, the wake-up and the read), not the key check.
 *
 * Env: PORT, HOST (127.0.0.1), FEED_DATABASE_URL (the bench database).
 */
import { buildApp } from '../src/http/app.js';
import type { App } from '../src/http/app.js';
import { sendProblem } from '../src/http/problems.js';
import { statusFeedRoutes } from '../src/http/routes/statuses.js';
import { ReadModel } from '../src/readmodel/index.js';
import { openStore } from '../src/store/index.js';

const url = process.env.FEED_DATABASE_URL;
if (!url) throw new Error('FEED_DATABASE_URL is required');
const store = await openStore({ engine: 'postgres', url });
const model = await ReadModel.open(store);
const app = await buildApp({ store, model, logger: false, adminToken: null });
await app.register(
  async (v1: App) => {
    v1.addHook('onRequest', async (req, reply) => {
      const slug = req.headers['x-bench-tenant'];
      const tenant = typeof slug === 'string' ? model.tenant(slug) : null;
      if (tenant === null) return sendProblem(reply, 'not_found');
      req.tenant = { id: tenant.id, slug: tenant.slug };
      req.principal = { kind: 'key', keyId: 'bench', scopes: new Set(['status:read']) };
    });
    await v1.register(statusFeedRoutes, { feed: store, model });
  },
  { prefix: '/v1' },
);
await app.listen({ port: Number(process.env.PORT ?? 0), host: process.env.HOST ?? '127.0.0.1' });

const stop = () => {
  void app
    .close()
    .then(() => model.close())
    .then(() => store.close())
    .finally(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
