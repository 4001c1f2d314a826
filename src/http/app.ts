import type { App } from './app-instance.js';
import { decorateRequests } from './auth.js';
import { apiDocument } from './app/api-document.js';
import { consoleArea } from './app/console.js';
import { appContext } from './app/context.js';
import type { AppDeps } from './app/deps.js';
import { problemAnswers } from './app/errors.js';
import { createFastify } from './app/fastify.js';
import { requestHooks } from './app/hooks.js';
import { requestMetrics } from './app/metrics.js';
import { readRoutes } from './app/reads.js';
import { writeRoutes } from './app/writes.js';

export type { App } from './app-instance.js';
export type { AppDeps } from './app/deps.js';
export { DEFAULT_HTTP_LIMITS } from './app/limits.js';
export type { HttpLimits } from './app/limits.js';

/**
 * The one HTTP factory: the lookup's fast path in front of Fastify (routes, schemas and the
 * error handler behind it). It does no IO of its own. Each step is a file of `app/`.
 */
export async function buildApp(deps: AppDeps): Promise<App> {
  const ctx = appContext(deps);
  const app = createFastify(ctx);
  requestHooks(app, ctx);
  await apiDocument(app);
  decorateRequests(app);
  problemAnswers(app);
  requestMetrics(app, ctx);
  await readRoutes(app, ctx);
  await consoleArea(app, ctx);
  await writeRoutes(app, ctx);
  return app;
}
