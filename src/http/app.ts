import { createServer } from 'node:http';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify from 'fastify';
import type { FastifyBaseLogger, FastifyError, FastifyRequest } from 'fastify';
import type { App } from './app-instance.js';
import { sha256 } from '../domain/keys.js';
import { checkBearer } from '../domain/lookup.js';
import { AppError } from './problems.js';
import { describeValidationError, sendProblem } from './problems.js';
import { answerClientError, capConnectionsPerAddress, DEFAULT_MAX_CONNECTIONS_PER_ADDRESS } from './connections.js';
import { authorizationOf, RequestIds } from './request.js';
import { tenantResourceRoutes, tenantRoutes, tierRoutes } from './routes/index.js';
import { statusFeedRoutes } from './routes/statuses.js';
import type { StatusFeedOptions } from './routes/statuses.js';
import { decorateRequests, keyAuth, operatorAuth, requireScopes, tenantBySlug } from './auth.js';
import type { KeyUsage, SecretKeySightings } from './key-usage.js';
import type { StripeIntake } from './stripe-intake.js';
import { DEFAULT_DELIVERY_SETTINGS } from '../downstream/index.js';
import { DEFAULT_TIER } from '../domain/types.js';
import type { DeliverySettings } from '../downstream/index.js';
import { demoRoutes } from './routes/demo.js';
import { healthRoutes } from './routes/health.js';
import type { ClockSkewReading } from './routes/health.js';
import { snippetRoutes } from './routes/snippet.js';
import { packageRoutes } from './routes/packages.js';
import { brandingRoutes } from './routes/branding.js';
import { consoleRoutes } from './routes/console.js';
import type { ConsoleAssets } from '../console/assets.js';
import { DEFAULT_CONSOLE_SESSION_TTL_MS, isLoopbackAddress, resolveSession } from '../console/session.js';
import type { SessionAuth } from './auth.js';
import { stripeWebhookRoutes } from './routes/stripe-webhook.js';
import { LOOKUP_PREFIX, LOOKUP_ROUTE, LookupAnswerer, lookupRoutes } from './lookup.js';
import type { ReadModel } from '../readmodel/index.js';
import { Problem } from './schemas.js';
import {
  CursorNotIssuedError,
  DEFAULT_STORE_REQUEST_TIMEOUT_MS,
  StoreUnavailableError,
  isStoreUnavailable,
} from '../store/index.js';
import type { Store } from '../store/index.js';
import { boundStoreCalls } from './store-bound.js';
import { awaitWritesApplied } from './write-visibility.js';
import type { DemoPage } from '../demo/index.js';
import type { SnippetAsset } from './snippet-asset.js';
import type { PackageTarballs } from './package-tarballs.js';
import type { Metrics } from '../metrics/index.js';
import { FORWARDING_HEADERS } from './client-address.js';
import type { TrustedProxies } from './client-address.js';
import { RateLimiter } from './rate-limit.js';
import type { RateLimits } from './rate-limit.js';
import type { Redis } from 'ioredis';
import pkg from '../../package.json' with { type: 'json' };

/**
 * What one connection may cost, set explicitly rather than left to defaults: a slow or
 * oversized request is cut off instead of holding the server.
 */
export interface HttpLimits {
  /** All of a request's headers (and its request line) must arrive within this. */
  headersTimeoutMs: number;
  /** The whole request, body included. */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeoutMs: number;
  /** A socket with no activity at all is destroyed after this. */
  idleSocketTimeoutMs: number;
  /** The request line and headers together. */
  maxHeaderBytes: number;
  /** How often the server checks the timeouts above. */
  checkIntervalMs: number;
  maxRequestsPerSocket: number;
  /** Connections one address may hold open at once (IPv6: one /64); 0: no cap. Trusted proxies are not capped. */
  maxConnectionsPerAddress: number;
}

export const DEFAULT_HTTP_LIMITS: HttpLimits = Object.freeze({
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  idleSocketTimeoutMs: 60_000,
  maxHeaderBytes: 16 * 1024,
  checkIntervalMs: 1_000,
  maxRequestsPerSocket: 10_000,
  maxConnectionsPerAddress: DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
});

export interface AppDeps {
  store: Store;
  /** What the lookup reads: every tenant and subscriber, in memory, kept true by the store's change log. */
  model: ReadModel;
  /** Log every lookup; default false (the hot path logs nothing when it succeeds). */
  logLookups?: boolean;
  /** Epoch milliseconds; tests pass a fake clock. */
  now?: () => number;
  /** A monotonic clock in milliseconds (how long a /readyz check is reused); default performance.now. */
  monotonicNow?: () => number;
  /** How this instance's clock stands against the database's, shown by /readyz. */
  clockSkew?: () => ClockSkewReading;
  /**
   * The SHA-256 digest of the admin token: the app never holds the token itself. null, or
   * absent with no `adminToken` either: the admin API is off.
   */
  adminTokenSha256?: Buffer | null;
  /** The token itself (tests): hashed at once, only the digest is kept. Ignored when `adminTokenSha256` is given. */
  adminToken?: string | null;
  rotationOverlapS?: number;
  /** How endpoint URLs of downstream webhooks are checked; default: https only, no private address. */
  webhooks?: Pick<DeliverySettings, 'allowHttpLoopback' | 'allowedNetworks'>;
  /** The tier of a tenant created without one (DUNWALL_DEFAULT_TIER); default `starter`. */
  defaultTier?: string;
  /** A pino logger, or `false` for none (tests). */
  logger?: FastifyBaseLogger | false;
  /** The largest request body accepted, in bytes. */
  bodyLimitBytes?: number;
  /** The built browser snippet served at /snippet.js; null: not built. */
  snippet?: SnippetAsset | null;
  /** The package tarballs served at /packages/:file, by file name; null: not built. */
  packages?: PackageTarballs | null;
  /** The demo tenant's page data, when the demo exists. */
  demo?: DemoPage | null;
  /** Prometheus metrics; absent: no /metrics and nothing recorded. */
  metrics?: Metrics;
  /** The text /metrics answers; default this process's registry (a cluster's aggregates). */
  metricsText?: () => Promise<string>;
  /** False: /metrics is served on a listener of its own (`serveMetrics`), not on this app's port. Default true. */
  metricsOnPublicPort?: boolean;
  limits?: Partial<HttpLimits>;
  /** Requests per minute per address, tenant and failure; absent: no rate limits. */
  rateLimits?: RateLimits;
  /** Shares rate limit counts across instances; absent: counted in this process. */
  redis?: Redis | null;
  /** Prefix of the rate limit keys in Redis. */
  redisPrefix?: string;
  /** The status feed's bounds and clock (tests); absent: the defaults. */
  statusFeed?: Pick<StatusFeedOptions, 'limits' | 'timers'>;
  /** Where secret keys' uses are remembered for their `last_used_at`; absent: not recorded. */
  keyUsage?: KeyUsage | null;
  /** Where a secret key sent from a browser is counted, logged and marked; absent: not recorded. */
  keySightings?: SecretKeySightings | null;
  /** Where the Stripe webhook's and the replay's intake is counted for the tenants' health; absent: not counted. */
  stripeIntake?: StripeIntake | null;
  /** Proxies trusted to name the client (Forwarded / X-Forwarded-For); absent: none. */
  trustedProxies?: TrustedProxies | null;
  /** How long a request may wait on the store in all before it answers 503 (DUNWALL_STORE_REQUEST_TIMEOUT_MS). */
  storeRequestTimeoutMs?: number;
  /** The console at /console: its built files (null: not built) and how long a session lasts (DUNWALL_CONSOLE_SESSION_TTL_MS). */
  console?: { assets: ConsoleAssets | null; sessionTtlMs?: number };
}

export type { App } from './app-instance.js';

const silentLog = { info() {}, warn() {}, error() {} };

const MAX_PARAM_LENGTH = 300;
const DEFAULT_BODY_LIMIT_BYTES = 1024 * 1024;

const SHA256_BYTES = 32;

/** The admin token's digest; a clear token (tests) is hashed here and goes no further. */
function adminTokenDigest(deps: AppDeps): Buffer | null {
  const given = deps.adminTokenSha256;
  if (given === undefined)
    return deps.adminToken === undefined || deps.adminToken === null ? null : sha256(deps.adminToken);
  if (given !== null && given.length !== SHA256_BYTES)
    throw new Error(`adminTokenSha256 must be a SHA-256 digest (${SHA256_BYTES} bytes)`);
  return given;
}

/**
 * The one HTTP factory: the lookup's fast path in front of Fastify (routes, schemas and the
 * error handler behind it). It does no IO of its own.
 */
export async function buildApp(deps: AppDeps): Promise<App> {
  const limits = { ...DEFAULT_HTTP_LIMITS, ...deps.limits };
  const now = deps.now ?? Date.now;
  const model = deps.model;
  const metrics = deps.metrics;
  const requestIds = new RequestIds();
  const trusted = deps.trustedProxies ?? null;
  const limiter = deps.rateLimits
    ? new RateLimiter({
        limits: deps.rateLimits,
        redis: deps.redis ?? null,
        trustedProxies: trusted,
        now,
        log: deps.logger || silentLog,
        ...(deps.redisPrefix ? { redisPrefix: deps.redisPrefix } : {}),
      })
    : null;
  const logLookups = deps.logLookups ?? false;
  let closing = false;
  const answerer = new LookupAnswerer({
    model,
    now,
    limiter,
    requestIds,
    metrics: metrics ? metrics.http.route(LOOKUP_ROUTE, 'GET') : null,
    logLookups,
    logError: (err) => (deps.logger || silentLog).error({ err }, 'lookup failed'),
    keyUsage: deps.keyUsage ?? null,
    keySightings: deps.keySightings ?? null,
  });
  const http = {
    maxHeaderSize: limits.maxHeaderBytes,
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    connectionsCheckingInterval: limits.checkIntervalMs,
    noDelay: true,
    // Node's own refusal of a request without Host is a bare 400; the onRequest hook below
    // refuses it as a problem instead.
    requireHostHeader: false,
  };
  const app = Fastify({
    ...(deps.logger ? { loggerInstance: deps.logger } : { logger: false }),
    bodyLimit: deps.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES,
    // The lookup is answered before Fastify sees it; Fastify gets every other request (and
    // every request once the server is closing, to answer 503).
    serverFactory: (fastify: RequestListener) => {
      const server = createServer(http, (req: IncomingMessage, res: ServerResponse) => {
        if (closing || !answerer.fast(req, res)) fastify(req, res);
      });
      // What Fastify sets on a server it creates itself.
      server.keepAliveTimeout = limits.keepAliveTimeoutMs;
      server.requestTimeout = limits.requestTimeoutMs;
      server.setTimeout(limits.idleSocketTimeoutMs);
      server.maxRequestsPerSocket = limits.maxRequestsPerSocket;
      const refused = capConnectionsPerAddress(server, limits.maxConnectionsPerAddress, trusted);
      metrics?.observeCounter(
        'dunwall_http_connections_refused_total',
        'Connections closed on arrival: their address held its most open connections',
        () => refused.refused,
      );
      return server;
    },
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

  // JSON in, JSON out: any other body is a 415, not a string that fails validation later.
  app.removeContentTypeParser('text/plain');

  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
    // RFC 9112 section 3.2: an HTTP/1.1 request must name its Host.
    if (req.raw.httpVersion === '1.1' && req.headers.host === undefined)
      return sendProblem(reply, 'bad_request', 'The Host header is required.');
  });
  boundStoreCalls(app, deps.storeRequestTimeoutMs ?? DEFAULT_STORE_REQUEST_TIMEOUT_MS);
  // A write's answer leaves once every worker of this instance shows it, whatever its route.
  awaitWritesApplied(app, model);

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Dunwall',
        version: pkg.version,
        description:
          'Billing enforcement status of Stripe-billed subscribers. Every answer carries `X-Request-Id`; rate-limited ' +
          'answers carry the IETF `RateLimit` and `RateLimit-Policy` fields, and a 429 or 503 a `Retry-After` (seconds).',
        license: { name: 'MIT', identifier: 'MIT' },
      },
      // The instance that serves this document.
      servers: [{ url: '/', description: 'This Dunwall instance' }],
      tags: [
        { name: 'lookup', description: "A subscriber's status, for the tenant's pages, apps and backend" },
        { name: 'webhooks', description: "The tenant's Stripe events" },
        { name: 'admin', description: 'The operator' },
        {
          name: 'packages',
          description: "This service's npm packages at its own version, as tarballs to install from",
        },
        {
          name: 'tenant',
          description: "A tenant's own API (/v1), with one of its secret keys: the tenant is the key's",
        },
        {
          name: 'downstream-webhooks',
          description:
            "A tenant's downstream webhook endpoints: status changes POSTed to its backend, signed (docs/webhooks.md)",
        },
      ],
      components: {
        securitySchemes: {
          publishableKey: { type: 'http', scheme: 'bearer', description: "The tenant's publishable key" },
          adminToken: { type: 'http', scheme: 'bearer', description: 'DUNWALL_ADMIN_TOKEN' },
          secretKey: {
            type: 'http',
            scheme: 'bearer',
            description: "A tenant's secret key (sk_live_... or sk_test_...), from a server only",
          },
        },
      },
    },
  });
  app.addSchema(Problem);
  decorateRequests(app);

  app.setErrorHandler((err: FastifyError, req, reply) => {
    if (err instanceof AppError) {
      if (err.headers) reply.headers(err.headers);
      return sendProblem(reply, err.code, err.detail);
    }
    if (err.validation) return sendProblem(reply, 'invalid_request', describeValidationError(err));
    if (err instanceof CursorNotIssuedError)
      return sendProblem(
        reply,
        'invalid_cursor',
        'The cursor names a position this service never handed out: list again.',
      );
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return sendProblem(reply, 'payload_too_large');
    if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return sendProblem(reply, 'unsupported_media_type');
    if (err.code === 'FST_ERR_CTP_EMPTY_JSON_BODY')
      return sendProblem(reply, 'invalid_request', 'body: must not be empty');
    if (isStoreUnavailable(err)) {
      // A lookup refused without trying the store follows a failure that was logged: in an
      // outage the lookups log the one read a second that tries again, not every request.
      if (!(err instanceof StoreUnavailableError))
        req.log.warn({ err: { message: err.message, code: err.code } }, 'store unavailable');
      return sendProblem(reply, 'store_unavailable');
    }
    const status = err.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      if (status === 404) return sendProblem(reply, 'not_found');
      if (status === 405) return sendProblem(reply, 'method_not_allowed');
      if (status === 413) return sendProblem(reply, 'payload_too_large');
      if (status === 415) return sendProblem(reply, 'unsupported_media_type');
      // Body parser errors (malformed JSON...) carry no secret; their text helps the caller.
      return sendProblem(reply, 'invalid_request', `body: ${err.message}`);
    }
    req.log.error({ err }, 'request failed');
    return sendProblem(reply, 'internal_error');
  });
  app.setNotFoundHandler((_req, reply) => sendProblem(reply, 'not_found'));

  if (metrics) {
    metrics.observeReadModel(() => model.snapshotStats());
    // Route templates only: a slug or a customer id never becomes a label. The lookups the
    // fast path answers are counted there.
    app.addHook('onResponse', (req, reply, done) => {
      metrics.request(req.routeOptions.url ?? 'unmatched', req.method, reply.statusCode, reply.elapsedTime / 1000);
      done();
    });
    if (deps.metricsOnPublicPort !== false) {
      const text = deps.metricsText ?? (() => metrics.registry.metrics());
      app.get('/metrics', { schema: { hide: true } }, async (_req, reply) =>
        reply
          .header('content-type', metrics.registry.contentType)
          .header('cache-control', 'no-store')
          .send(await text()),
      );
    }
  }

  await app.register(healthRoutes, {
    maintenance: deps.store.maintenance,
    model,
    now,
    ...(deps.monotonicNow ? { monotonicNow: deps.monotonicNow } : {}),
    ...(deps.clockSkew ? { clockSkew: deps.clockSkew } : {}),
  });
  await app.register(lookupRoutes, { answerer, model, now, limiter, logLookups });
  await app.register(snippetRoutes, { snippet: deps.snippet ?? null });
  await app.register(packageRoutes, { packages: deps.packages ?? null, limiter });
  await app.register(brandingRoutes, { model, limiter });
  await app.register(demoRoutes, { demo: deps.demo ?? null, model });
  // The console's session cookie stands in for the admin token or the key it was opened with.
  const sessions: SessionAuth = (id) => resolveSession(deps.store.sessions, model, id, now());
  const viaHttps = (req: FastifyRequest) => {
    if (req.protocol === 'https') return true;
    // Behind a trusted TLS-terminating proxy, its word for the scheme.
    if (trusted === null || !trusted.trusts(req.socket.remoteAddress ?? '')) return false;
    const proto = req.headers['x-forwarded-proto'];
    return proto === 'https' || /(^|[;,\s])proto=https\b/i.test(String(req.headers.forwarded ?? ''));
  };
  // Straight from this machine: the socket's peer is loopback, and no proxy stands between
  // (a proxy on this machine passes on other machines' requests; a forwarding header says one
  // did). Never the Host header, which the client writes.
  const fromLoopback = (req: FastifyRequest) => {
    const peer = req.socket.remoteAddress;
    if (!isLoopbackAddress(peer)) return false;
    if (trusted !== null && trusted.trusts(peer ?? '')) return false;
    return (
      FORWARDING_HEADERS.every((h) => req.headers[h] === undefined) && req.headers['x-forwarded-proto'] === undefined
    );
  };
  await app.register(consoleRoutes, {
    assets: deps.console?.assets ?? null,
    sessions: deps.store.sessions,
    model,
    now,
    adminTokenSha256: adminTokenDigest(deps),
    limiter,
    sessionTtlMs: deps.console?.sessionTtlMs ?? DEFAULT_CONSOLE_SESSION_TTL_MS,
    viaHttps,
    fromLoopback,
  });
  const rotationOverlapS = deps.rotationOverlapS ?? 86_400;
  const intake = deps.stripeIntake ?? null;
  const resources = {
    store: deps.store,
    model,
    now,
    rotationOverlapS,
    webhooks: deps.webhooks ?? DEFAULT_DELIVERY_SETTINGS,
    intake,
  };
  // A write's answer leaves once every worker's read model shows it (awaitWritesApplied, at
  // the root), so that its writer's next lookup on this instance reads what it wrote.
  await app.register(async (writes: App) => {
    await writes.register(stripeWebhookRoutes, {
      stripe: deps.store.stripe,
      model,
      now,
      limiter,
      intake,
      ...(metrics ? { metrics } : {}),
    });
    await writes.register(
      async (admin: App) => {
        operatorAuth(admin, { adminTokenSha256: adminTokenDigest(deps), limiter, sessions });
        await tenantRoutes(admin, {
          tenants: deps.store.tenants,
          keys: deps.store.keys,
          subscribers: deps.store.subscribers,
          now,
          rotationOverlapS,
          defaultTier: deps.defaultTier ?? DEFAULT_TIER,
        });
        await tierRoutes(admin, { tenants: deps.store.tenants, now });
        await admin.register(
          async (scoped: App) => {
            tenantBySlug(scoped, (slug) => deps.store.tenants.getTenant(slug));
            await tenantResourceRoutes(scoped, { audience: 'operator', ...resources });
          },
          { prefix: '/tenants/:slug' },
        );
      },
      { prefix: '/admin/v1' },
    );
    await writes.register(
      async (v1: App) => {
        keyAuth(v1, {
          model,
          now,
          limiter,
          keyUsage: deps.keyUsage ?? null,
          keySightings: deps.keySightings ?? null,
          sessions,
        });
        requireScopes(v1);
        await tenantResourceRoutes(v1, { audience: 'tenant', ...resources });
        await statusFeedRoutes(v1, { feed: deps.store.feed, model, now, ...deps.statusFeed });
      },
      { prefix: '/v1' },
    );
  });
  return app;
}
