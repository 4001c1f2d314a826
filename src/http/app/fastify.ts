import { createServer } from 'node:http';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify from 'fastify';
import { checkBearer } from '../../domain/lookup.js';
import type { App } from '../app-instance.js';
import { answerClientError, capConnectionsPerAddress, closeIdleSockets } from '../connections.js';
import { LOOKUP_PREFIX } from '../lookup.js';
import { sendProblem } from '../problems.js';
import { authorizationOf } from '../request.js';
import type { AppContext } from './context.js';
import { cachedSerializers } from './serializers.js';

const MAX_PARAM_LENGTH = 300;
const DEFAULT_BODY_LIMIT_BYTES = 1024 * 1024;

/**
 * The node:http server under Fastify, its limits set explicitly: the lookup is answered
 * before Fastify sees it; Fastify gets every other request (and every request once the
 * server is closing, to answer 503).
 */
function lookupFirstServer(ctx: AppContext, isClosing: () => boolean) {
  const { limits, answerer, trusted, metrics } = ctx;
  const options = {
    maxHeaderSize: limits.maxHeaderBytes,
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    connectionsCheckingInterval: limits.checkIntervalMs,
    noDelay: true,
    // Node's own refusal of a request without Host is a bare 400; the onRequest hook
    // (requestHooks) refuses it as a problem instead.
    requireHostHeader: false,
  };
  return (fastify: RequestListener) => {
    const server = createServer(options, (req: IncomingMessage, res: ServerResponse) => {
      if (isClosing() || !answerer.fast(req, res)) fastify(req, res);
    });
    // What Fastify sets on a server it creates itself.
    server.keepAliveTimeout = limits.keepAliveTimeoutMs;
    server.requestTimeout = limits.requestTimeoutMs;
    // Not `server.setTimeout`, whose timer every read and write of every socket re-arms.
    closeIdleSockets(server, limits.idleSocketTimeoutMs, limits.checkIntervalMs);
    server.maxRequestsPerSocket = limits.maxRequestsPerSocket;
    const refused = capConnectionsPerAddress(server, limits.maxConnectionsPerAddress, trusted);
    metrics?.observeCounter(
      'dunwall_http_connections_refused_total',
      'Connections closed on arrival: their address held its most open connections',
      () => refused.refused,
    );
    return server;
  };
}

/** The Fastify instance, on the lookup-first server, with the limits, request ids and proxies of `ctx`. */
export function createFastify(ctx: AppContext): App {
  const { deps, limits, requestIds, trusted } = ctx;
  let closing = false;
  const app = Fastify({
    ...(deps.logger ? { loggerInstance: deps.logger } : { logger: false }),
    bodyLimit: deps.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES,
    serverFactory: lookupFirstServer(ctx, () => closing),
    schemaController: { compilersFactory: { buildSerializer: cachedSerializers } },
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionTimeout: limits.idleSocketTimeoutMs,
    maxRequestsPerSocket: limits.maxRequestsPerSocket,
    clientErrorHandler: answerClientError,
    requestIdHeader: false,
    genReqId: (req) => requestIds.of(req),
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, allErrors: false } },
    // A customer id is up to 255 characters; the default of 100 would refuse valid ones.
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // Malformed or oversized URLs fail before routing: they still answer as problems, and on
    // the lookup's path in the contract's order and with its headers.
    frameworkErrors: (err, req, reply) => {
      reply.header('x-request-id', req.id);
      if (!req.url.startsWith(LOOKUP_PREFIX))
        return sendProblem(
          reply,
          err.code === 'FST_ERR_BAD_URL' || err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'not_found' : 'invalid_request',
        );
      reply.header('access-control-allow-origin', '*').header('cache-control', 'no-store');
      const bearer = checkBearer(authorizationOf(req.raw));
      return sendProblem(reply, bearer.ok ? 'tenant_not_found' : bearer.code);
    },
    return503OnClosing: true,
    // req.ip (in the logs) follows the same trusted proxies as the rate limits; Fastify reads
    // X-Forwarded-For only, so behind proxies that write Forwarded the logs show the proxy.
    trustProxy: trusted?.header === 'x-forwarded-for' ? (address: string) => trusted.trusts(address) : false,
  }).withTypeProvider<TypeBoxTypeProvider>() as unknown as App;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  return app;
}
