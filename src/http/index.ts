/**
 * The HTTP layer: the lookup's fast path, the Fastify app behind it (`buildApp`, assembled
 * from the parts in `app/`), one file per surface (lookup, admin API, the Stripe intake,
 * health, snippet, demo), problem documents, rate limits and the client's address. It
 * imports the domain and the read model; neither imports it.
 */
export { buildApp, DEFAULT_HTTP_LIMITS } from './app.js';
export type { App, AppDeps, HttpLimits } from './app.js';
export { serveMetrics } from './metrics-server.js';
export type { MetricsServer } from './metrics-server.js';
export { openApiDocument } from './openapi.js';
