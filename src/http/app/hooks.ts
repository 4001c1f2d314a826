import { DEFAULT_STORE_REQUEST_TIMEOUT_MS } from '../../store/index.js';
import type { App } from '../app-instance.js';
import { sendProblem } from '../problems.js';
import { boundStoreCalls } from '../store-bound.js';
import { awaitWritesApplied } from '../write-visibility.js';
import type { AppContext } from './context.js';

/** What every request Fastify answers goes through, whatever its route. */
export function requestHooks(app: App, ctx: AppContext): void {
  // JSON in, JSON out: any other body is a 415, not a string that fails validation later.
  app.removeContentTypeParser('text/plain');

  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
    // RFC 9112 section 3.2: an HTTP/1.1 request must name its Host.
    if (req.raw.httpVersion === '1.1' && req.headers.host === undefined)
      return sendProblem(reply, 'bad_request', 'The Host header is required.');
  });
  boundStoreCalls(app, ctx.deps.storeRequestTimeoutMs ?? DEFAULT_STORE_REQUEST_TIMEOUT_MS);
  // A write's answer leaves once every worker of this instance shows it, whatever its route.
  awaitWritesApplied(app, ctx.model);
}
