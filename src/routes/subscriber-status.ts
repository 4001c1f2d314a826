import type { FastifyReply, FastifyRequest } from 'fastify';
import type { App } from '../app-instance.js';
import { allowedOrigin, checkBearer, checkLookup, isValidSlug, lookupBody } from '../domain/lookup.js';
import type { TenantAuth } from '../domain/types.js';
import { authorizationOf, sendProblem } from '../http.js';
import type { RateLimitGuards } from '../rate-limit.js';
import type { ErrorCode } from '../errors.js';
import type { ReadModel } from '../readmodel/index.js';
import { StoreUnavailableError } from '../store/errors.js';
import { LookupHeaders, LookupKnown, LookupParams, LookupQuery, LookupUnknown, ProblemRef } from '../schemas.js';

export interface SubscriberStatusOptions {
  model: ReadModel;
  now: () => number;
  logLookups: boolean;
  /** Rate limits; null: none. */
  guards: RateLimitGuards | null;
}

const PATH = '/api/subscriber-status/:tenantSlug';
/** Checks 2 and 3: until they pass, the request is nobody's in particular. */
const KEY_CHECK_FAILURES: ReadonlySet<ErrorCode> = new Set(['tenant_not_found', 'invalid_publishable_key']);
const PREFLIGHT_MAX_AGE_S = 7200;
const problemRef = ProblemRef;

/**
 * The slug's tenant from the read model; a 503 (the snippet fails open) once the model has
 * been out of touch with the database for longer than it may answer.
 */
function tenantFor(model: ReadModel, slug: string, nowMs: number): TenantAuth | null {
  if (!model.serving(nowMs)) throw new StoreUnavailableError();
  return isValidSlug(slug) ? model.tenant(slug) : null;
}

/** No cookies are ever used, so `*` is safe; a tenant's allowed_origins narrows it. */
function applyCors(reply: FastifyReply, tenant: TenantAuth | null, origin: string | undefined): void {
  const allowed = allowedOrigin(tenant, origin);
  if (tenant?.allowedOrigins) reply.header('vary', 'Origin');
  if (allowed === null) reply.removeHeader('access-control-allow-origin');
  else reply.header('access-control-allow-origin', allowed);
}

export async function subscriberStatusRoutes(app: App, opts: SubscriberStatusOptions): Promise<void> {
  const { model, now, guards } = opts;
  // Every page view calls the lookup: its requests are logged only when asked for.
  const logLevel = opts.logLookups ? 'info' : 'warn';
  const limited = guards ? { onRequest: guards.lookup } : {};

  app.get(
    PATH,
    {
      logLevel,
      ...limited,
      schema: {
        summary: "A subscriber's billing enforcement status",
        tags: ['lookup'],
        security: [{ publishableKey: [] }],
        params: LookupParams,
        querystring: LookupQuery,
        headers: LookupHeaders,
        response: {
          200: Type200,
          400: problemRef,
          401: problemRef,
          402: problemRef,
          403: problemRef,
          404: problemRef,
          503: problemRef,
        },
      },
      // The checks run in the contract's order in the domain (a 401 before a 400), so the
      // schemas document the route and Fastify does not validate it first.
      validatorCompiler: () => () => true,
    },
    async (req: FastifyRequest<{ Params: { tenantSlug: string } }>, reply) => {
      reply.header('cache-control', 'no-store');
      // Set before the model is asked, so that its 503 is readable by the snippet.
      reply.header('access-control-allow-origin', '*');
      /** A failed check's answer; a 401 or 404 past the address's failure quota is a 429 instead. */
      const refuse = async (code: ErrorCode) => sendProblem(reply, guards && (await guards.lookupFailure(req, reply, code)) ? 'rate_limited' : code);
      // Check 1 needs no store: a request without a usable header never reaches it.
      const bearer = checkBearer(authorizationOf(req.raw));
      if (!bearer.ok) return refuse(bearer.code);
      const nowMs = now();
      const tenant = tenantFor(model, req.params.tenantSlug, nowMs);
      applyCors(reply, tenant, req.headers.origin);

      const check = checkLookup({ token: bearer.token, query: req.query as Record<string, unknown> }, tenant, nowMs);
      if (tenant === null || (!check.ok && KEY_CHECK_FAILURES.has(check.code))) return refuse(check.ok ? 'tenant_not_found' : check.code);
      // Past checks 2 and 3 the request carries the tenant's own key: it counts against the
      // tenant's quota whatever checks 4 to 6 say.
      const overQuota = guards?.tenant(req, reply, String(tenant.id), tenant.lookupsPerMinute);
      if (overQuota === true || (overQuota instanceof Promise && (await overQuota))) return reply;
      if (!check.ok) return sendProblem(reply, check.code);
      const status = model.status(tenant.id, check.customerId);
      reply.header('content-type', 'application/json; charset=utf-8');
      return reply.send(lookupBody(tenant, status));
    },
  );

  app.options(
    PATH,
    { logLevel, ...limited, schema: { summary: 'CORS preflight', tags: ['lookup'], params: LookupParams }, validatorCompiler: () => () => true },
    async (req: FastifyRequest<{ Params: { tenantSlug: string } }>, reply) => {
      reply.header('access-control-allow-origin', '*');
      const tenant = tenantFor(model, req.params.tenantSlug, now());
      applyCors(reply, tenant, req.headers.origin);
      reply
        .header('access-control-allow-methods', 'GET, OPTIONS')
        .header('access-control-allow-headers', 'Authorization')
        .header('access-control-max-age', String(PREFLIGHT_MAX_AGE_S))
        .header('cache-control', 'no-store');
      return reply.code(204).send();
    },
  );
}

const Type200 = { anyOf: [LookupKnown, LookupUnknown], description: 'Known subscriber, or {"status":"active"} when unknown' };
