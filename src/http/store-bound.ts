import type { App } from './app-instance.js';
import { holdStoreBound, StoreBound } from '../store/index.js';
import type { StoreBoundMode } from '../store/index.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * How the route's store calls are bounded: `request` (the default), one deadline for
     * all of them; `call`, the whole bound for each (a batch of many small writes).
     */
    storeBound?: StoreBoundMode;
  }
}

/**
 * Every request Fastify routes waits on the store for at most `timeoutMs` in all, from its
 * first store call on: a frozen database (connections open, nothing answering) costs a
 * caller a 503 with Retry-After by then, not the store's own, longer bounds. The bound
 * lives in the request's async context, so that a route added later is bounded without
 * doing anything; the engines read it at each call (src/store/db/deadline.ts). Fastify keeps
 * the context through the parsing of a body (its content-type parser runs in an
 * AsyncResource of the request), so the hooks and the handler after it are bounded too.
 */
export function boundStoreCalls(app: App, timeoutMs: number): void {
  app.addHook('onRequest', (req, reply, done) => {
    const bound = new StoreBound(timeoutMs, req.routeOptions.config.storeBound ?? 'request');
    // Held until the response is closed (sent, or its connection lost): the lookup's fast
    // path, which never reaches Fastify, then runs without the bounds' async context.
    const res = reply.raw;
    const release = holdStoreBound(bound, done);
    if (res.closed) release();
    else res.once('close', release);
  });
}
