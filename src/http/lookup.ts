import type { FastifyReply, FastifyRequest } from 'fastify';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { App } from './app-instance.js';
import { allowedOrigin, checkBearer, checkLookup, isValidSlug, previewBody } from '../domain/lookup.js';
import type { LookupCheck, LookupFailure } from '../domain/lookup.js';
import type { TenantAuth } from '../domain/types.js';
import { Lru } from './lru.js';
import type { RouteMetrics } from './request-metrics.js';
import type { ReadModel } from '../readmodel/index.js';
import { problemAnswer, sendProblem } from './problems.js';
import type { ErrorCode } from './problems.js';
import type { Arrival, Count, RateLimiter } from './rate-limit.js';
import { guardAddress } from './rate-limit.js';
import { seenHeaders } from './request.js';
import type { KeyUsage, SecretKeySightings } from './key-usage.js';
import type { RequestIds, SeenHeaders } from './request.js';
import { LookupHeaders, LookupKnown, LookupParams, LookupQuery, LookupUnknown, ProblemRef } from './schemas.js';

/** The lookup's path up to its slug; the route's template in metrics and the OpenAPI document. */
export const LOOKUP_PREFIX = '/api/subscriber-status/';
export const LOOKUP_ROUTE = '/api/subscriber-status/:tenantSlug';
const PREFLIGHT_MAX_AGE_S = 7200;
const JSON_TYPE = 'application/json; charset=utf-8';

export interface LookupOptions {
  model: ReadModel;
  now: () => number;
  /** Rate limits; null: none. */
  limiter: RateLimiter | null;
  requestIds: RequestIds;
  /** The lookup's own series (the fast path records here); null: no metrics. */
  metrics: RouteMetrics | null;
  /** Log every lookup: they then go through Fastify's lifecycle, which logs each request. */
  logLookups: boolean;
  /** Answers that failed with an exception are logged here. */
  logError(err: unknown): void;
  /** Where secret keys' uses are remembered; null: not recorded. */
  keyUsage?: KeyUsage | null;
  /** Where a tenant's secret key sent from a browser is counted, logged and marked; null: not recorded. */
  keySightings?: SecretKeySightings | null;
}

/**
 * Lookups whose checks passed, remembered by their query (`VerifiedLookup`): a page view
 * asks for the same customer with the same key and hmac as the last one did. About 400
 * bytes each (the query, the header, the entry), so at most 6.5 MB a process.
 */
export const VERIFIED_LOOKUPS_MAX = 16_384;
/** A remembered check is done again at least this often, whatever else holds. */
const VERIFIED_LOOKUP_TTL_MS = 5 * 60_000;
/**
 * Longer queries or headers are checked every time, never remembered: a client padding
 * either (extra parameters, spaces after `Bearer`) cannot make the entries large. A
 * lookup's own query is at most about 380 characters (a 255-character customer id, its hmac).
 */
const VERIFIED_QUERY_MAX = 512;
const VERIFIED_AUTHORIZATION_MAX = 256;

/**
 * A lookup whose checks 1 to 6 passed with a publishable key: the same query with the same
 * Authorization header, for the same prepared tenant, passes them again until the first of
 * the tenant's keys and HMAC secrets expires. Any change of the tenant (keys, secrets,
 * suspension, hmac_required, either mode's keys) prepares another `TenantAuth`, which no remembered
 * check matches. Only what passed is remembered, found by the exact strings a client sent
 * (as the tenant's accepted keys are): a guess at an hmac is never a hit, and a Map read
 * compares its key's hash before its characters.
 */
interface VerifiedLookup {
  readonly tenant: TenantAuth;
  readonly authorization: string;
  readonly check: Extract<LookupCheck, { ok: true }>;
}

/** `Bearer sk_...`: a server's lookup with a secret key, counted against the key, never its address. */
const SECRET_BEARER_RE = /^bearer +sk_/i;

/** The parameters the lookup reads from its query; a repeated one is an array. */
export interface LookupParameters {
  processor_customer_id?: string | string[];
  hmac?: string | string[];
  preview?: string | string[];
}

/** `+` is a space and `%XX` is decoded (a sequence that does not decode stays as sent), as Fastify's query parser does. */
function decodeComponent(part: string): string {
  const spaced = part.includes('+') ? part.replace(/\+/g, ' ') : part;
  if (!spaced.includes('%')) return spaced;
  try {
    return decodeURIComponent(spaced);
  } catch {
    return spaced;
  }
}

/**
 * Reads `processor_customer_id`, `hmac` and `preview` from a query string (without its `?`): pairs
 * split on `&`, a name up to its first `=`, names compared once decoded. Every other
 * parameter is ignored without being decoded.
 */
export function lookupParameters(search: string): LookupParameters {
  const found: LookupParameters = {};
  // Nothing to decode in the whole query (the usual case): names and values are as sent.
  const plain = !search.includes('%') && !search.includes('+');
  let start = 0;
  while (start <= search.length) {
    let end = search.indexOf('&', start);
    if (end < 0) end = search.length;
    if (end > start) {
      const eq = search.indexOf('=', start);
      const nameEnd = eq >= 0 && eq < end ? eq : end;
      const rawName = search.slice(start, nameEnd);
      const name =
        plain || rawName === 'processor_customer_id' || rawName === 'hmac' ? rawName : decodeComponent(rawName);
      if (name === 'processor_customer_id' || name === 'hmac' || name === 'preview') {
        const rawValue = nameEnd === end ? '' : search.slice(nameEnd + 1, end);
        const value = plain ? rawValue : decodeComponent(rawValue);
        const previous = found[name];
        found[name] =
          previous === undefined ? value : typeof previous === 'string' ? [previous, value] : [...previous, value];
      }
    }
    start = end + 1;
  }
  return found;
}

/** No cookies are ever used, so `*` is safe; a tenant's allowed_origins narrows it (with Vary: Origin). */
function corsHeaders(headers: string[], tenant: TenantAuth | null, origin: string | undefined): void {
  const allowed = allowedOrigin(tenant, origin);
  if (allowed !== null) headers.push('access-control-allow-origin', allowed);
  if (tenant?.allowedOrigins) headers.push('vary', 'Origin');
}

/**
 * The lookup (docs/api.md), answered from the read model on the raw request:
 * by the fast path, before Fastify sees the request, and by the Fastify route for what the
 * fast path leaves to it (a slug it must decode, `inject`, logged lookups). Both call
 * `answer`: one implementation of the checks, the problems, CORS and the rate limits.
 * Nothing here awaits unless the rate limits are counted in Redis.
 */
export class LookupAnswerer {
  private readonly verified = new Lru<string, VerifiedLookup>(VERIFIED_LOOKUPS_MAX);

  constructor(private readonly opts: LookupOptions) {}

  /**
   * The fast path: answers a well-formed `GET` of the lookup and returns true; returns
   * false, having touched nothing, for every other request (Fastify answers it).
   */
  fast(req: IncomingMessage, res: ServerResponse): boolean {
    if (req.method !== 'GET' || this.opts.logLookups) return false;
    const url = req.url as string;
    if (!url.startsWith(LOOKUP_PREFIX)) return false;
    const q = url.indexOf('?', LOOKUP_PREFIX.length);
    const slug = url.slice(LOOKUP_PREFIX.length, q < 0 ? url.length : q);
    // A slug that is not plain (percent-encoded, another path segment) is Fastify's to decode or refuse.
    if (!isValidSlug(slug)) return false;
    const headers = seenHeaders(req);
    // RFC 9112 section 3.2: Fastify refuses an HTTP/1.1 request without Host.
    if (!headers.host && req.httpVersion === '1.1') return false;
    const requestId = this.opts.requestIds.fromPresented(headers.requestId);
    this.answer(req, res, slug, q < 0 ? '' : url.slice(q + 1), requestId, true, headers);
    return true;
  }

  /**
   * Answers a lookup of `slug` (decoded) with `search` (the raw query, without `?`).
   * `record`: count it in the metrics here (Fastify's hook counts the lookups it routes).
   */
  answer(
    req: IncomingMessage,
    res: ServerResponse,
    slug: string,
    search: string,
    requestId: string,
    record: boolean,
    headers = seenHeaders(req),
  ): void {
    const startedMs = record && this.opts.metrics !== null ? performance.now() : 0;
    const call: Call = {
      req,
      res,
      slug,
      search,
      requestId,
      record,
      startedMs,
      headers,
      address: '',
      arrival: NO_ARRIVAL,
    };
    const limiter = this.opts.limiter;
    if (limiter === null) {
      this.check(call);
      return;
    }
    call.address = limiter.addressOf(req);
    // A secret key's lookups come from a tenant's few servers: they are counted against the
    // key once it verifies, and an address's earlier failures do not refuse them. A wrong
    // key still counts as a failure of its address (in `fail`).
    const auth = headers.authorization;
    if (typeof auth === 'string' && SECRET_BEARER_RE.test(auth)) {
      this.check(call);
      return;
    }
    const arrival = limiter.arrive(call.address, 'ip');
    if (arrival instanceof Promise) {
      arrival.then(
        (a) => this.arrived(call, a),
        (err: unknown) => this.failed(call, err),
      );
    } else {
      this.arrived(call, arrival);
    }
  }

  private arrived(call: Call, arrival: Arrival): void {
    call.arrival = arrival;
    if (arrival.over !== null) {
      this.refuse(call, arrival.over);
      return;
    }
    this.check(call);
  }

  /** Checks 1 to 6 in the contract's order, on the read model. */
  private check(call: Call): void {
    try {
      const headers = call.headers;
      const authorization = headers.authorization;
      const nowMs = this.opts.now();
      // The same query and header as a lookup that passed every check: check 1 passes
      // (the header is the one that passed it), and checks 2 to 6 once the tenant is the same.
      const seen = typeof authorization === 'string' ? this.verified.get(call.search, nowMs) : undefined;
      const remembered = seen !== undefined && seen.authorization === authorization ? seen : undefined;
      let token = '';
      if (remembered === undefined) {
        const bearer = checkBearer(authorization);
        if (!bearer.ok) {
          this.fail(call, bearer.code, null, headers.origin);
          return;
        }
        token = bearer.token;
      }
      const model = this.opts.model;
      // Out of touch with the database for too long: a 503 the snippet fails open on.
      if (!model.serving(nowMs)) {
        this.problem(call, 'store_unavailable', null, undefined, null);
        return;
      }
      const tenant = model.tenant(call.slug);
      // A tenant whose row cannot be read (a secret that does not open): not "no such
      // tenant", but a 503 for its lookups only, which the snippet and clients fail open on.
      if (tenant === null && model.unreadable(call.slug) !== null) {
        this.problem(call, 'store_unavailable', null, undefined, null);
        return;
      }
      const check =
        remembered !== undefined && remembered.tenant === tenant
          ? remembered.check
          : this.checkAndRemember(call, authorization, token, tenant, nowMs);
      if (!check.ok || tenant === null) {
        if (!check.ok && check.leaked !== undefined && tenant !== null) {
          this.opts.keySightings?.seen(
            { tenant: tenant.slug, keyId: check.leaked.id, prefix: check.leaked.prefix, origin: headers.origin ?? '' },
            nowMs,
          );
        }
        this.fail(call, check.ok ? 'tenant_not_found' : check.code, tenant, headers.origin);
        return;
      }
      let body: Buffer;
      if (check.preview !== null) {
        body = previewBody(check.space, check.preview, nowMs);
      } else {
        // The space the key addresses: its mode's subscribers (docs/test-mode.md).
        body = model.answer(check.space, check.customerId, check.signed, nowMs);
      }
      // Every check passed: only now does the lookup count against its tenant's quota (a
      // secret key's, against the key's).
      const limiter = this.opts.limiter;
      if (check.keyId !== null) this.opts.keyUsage?.used(check.keyId, nowMs);
      const counted =
        limiter === null
          ? null
          : check.keyId !== null
            ? limiter.key(check.keyId)
            : limiter.tenant(tenant.id, tenant.lookupsPerMinute);
      if (counted instanceof Promise) {
        counted.then(
          (c) => this.ok(call, tenant, headers.origin, body, c),
          (err: unknown) => this.failed(call, err),
        );
      } else {
        this.ok(call, tenant, headers.origin, body, counted);
      }
    } catch (err) {
      this.failed(call, err);
    }
  }

  /** Checks 2 to 6 (`checkLookup`); a publishable key's lookup that passed is remembered. */
  private checkAndRemember(
    call: Call,
    authorization: string | string[] | undefined,
    token: string,
    tenant: TenantAuth | null,
    nowMs: number,
  ): LookupCheck {
    // A remembered header whose tenant has changed since: check 1 again (it passes).
    if (token === '') {
      const bearer = checkBearer(authorization);
      if (!bearer.ok) return { ok: false, code: bearer.code };
      token = bearer.token;
    }
    const origin = call.headers.origin;
    const check = checkLookup({ token, query: lookupParameters(call.search), origin }, tenant, nowMs);
    if (
      check.ok &&
      check.keyId === null &&
      tenant !== null &&
      typeof authorization === 'string' &&
      authorization.length <= VERIFIED_AUTHORIZATION_MAX &&
      call.search.length <= VERIFIED_QUERY_MAX
    ) {
      this.verified.set(call.search, { tenant, authorization, check }, verifiedUntil(tenant, check.space, nowMs));
    }
    return check;
  }

  private ok(call: Call, tenant: TenantAuth, origin: string | undefined, body: Buffer, counted: Count | null): void {
    if (counted !== null && counted.current > counted.quota) {
      this.refuse(call, counted, counted);
      return;
    }
    const headers = ['content-type', JSON_TYPE, 'cache-control', 'no-store', 'x-request-id', call.requestId];
    corsHeaders(headers, tenant, origin);
    this.rateLimitFields(call, headers, counted, null);
    this.send(call, 200, headers, body);
  }

  /** A failed check counts against the sender's address; one failure past its quota is a 429 instead. */
  private fail(call: Call, code: LookupFailure, tenant: TenantAuth | null, origin: string | undefined): void {
    const limiter = this.opts.limiter;
    const over = limiter === null ? null : limiter.fail(call.address);
    if (over instanceof Promise) {
      over.then(
        (o) => (o === null ? this.problem(call, code, tenant, origin, null) : this.refuse(call, o)),
        (err: unknown) => this.failed(call, err),
      );
    } else if (over === null) {
      this.problem(call, code, tenant, origin, null);
    } else {
      this.refuse(call, over);
    }
  }

  /** A 429: the snippet reads it cross-origin and fails open on it. */
  private refuse(call: Call, over: Count, tenant: Count | null = null): void {
    this.problem(call, 'rate_limited', null, undefined, over, tenant);
  }

  private problem(
    call: Call,
    code: ErrorCode,
    tenant: TenantAuth | null,
    origin: string | undefined,
    over: Count | null,
    tenantCount: Count | null = null,
  ): void {
    const answer = problemAnswer(code);
    const headers = [...answer.headers, 'cache-control', 'no-store', 'x-request-id', call.requestId];
    corsHeaders(headers, tenant, origin);
    const retryAfter = this.rateLimitFields(call, headers, tenantCount, over);
    if (retryAfter !== null) headers.push('retry-after', String(retryAfter));
    this.send(call, answer.status, headers, answer.body as Buffer);
  }

  /** Adds the RateLimit fields; returns the Retry-After of a refusal. */
  private rateLimitFields(call: Call, headers: string[], tenant: Count | null, over: Count | null): number | null {
    const limiter = this.opts.limiter;
    if (limiter === null) return null;
    const fields = limiter.fields(call.arrival.own, call.arrival.failures, tenant, over);
    if (fields === null) return null;
    headers.push('ratelimit-policy', fields.policy, 'ratelimit', fields.limit);
    return fields.retryAfterS;
  }

  private send(call: Call, status: number, headers: string[], body: Buffer): void {
    const res = call.res;
    if (res.headersSent || res.destroyed) return;
    headers.push('content-length', String(body.length));
    res.writeHead(status, headers);
    res.end(body);
    if (call.record) this.opts.metrics?.observe(status, (performance.now() - call.startedMs) / 1000);
  }

  /** An exception on the way: logged, answered 500 without its message. */
  private failed(call: Call, err: unknown): void {
    this.opts.logError(err);
    this.problem(call, 'internal_error', null, undefined, null);
  }
}

/** Until when a check that passed at `nowMs` holds: the first expiry among the tenant's keys and secrets, or the TTL. */
function verifiedUntil(tenant: TenantAuth, space: TenantAuth, nowMs: number): number {
  let until = nowMs + VERIFIED_LOOKUP_TTL_MS;
  for (const key of space.publishableKeyHashes) {
    if (key.expiresAtMs !== null && key.expiresAtMs < until) until = key.expiresAtMs;
  }
  for (const key of tenant.hmacKeys) {
    if (key.expiresAtMs !== null && key.expiresAtMs < until) until = key.expiresAtMs;
  }
  return until;
}

interface Call {
  req: IncomingMessage;
  res: ServerResponse;
  slug: string;
  search: string;
  requestId: string;
  record: boolean;
  startedMs: number;
  headers: SeenHeaders;
  /** Where the rate limits count it ('' without limits). */
  address: string;
  arrival: Arrival;
}

const NO_ARRIVAL: Arrival = Object.freeze({ own: null, failures: null, over: null });

export interface LookupRoutesOptions {
  answerer: LookupAnswerer;
  model: ReadModel;
  now: () => number;
  limiter: RateLimiter | null;
  logLookups: boolean;
}

const Type200 = {
  anyOf: [LookupKnown, LookupUnknown],
  description: 'Known subscriber, or {"status":"active"} when unknown',
};

/**
 * The lookup's Fastify routes: the GET, documented in the OpenAPI document and answering
 * what the fast path leaves to Fastify (through the same `LookupAnswerer`), and its CORS
 * preflight.
 */
export async function lookupRoutes(app: App, opts: LookupRoutesOptions): Promise<void> {
  const { answerer, model, now, limiter } = opts;
  // Every page view calls the lookup: its requests are logged only when asked for.
  const logLevel = opts.logLookups ? 'info' : 'warn';

  app.get(
    LOOKUP_ROUTE,
    {
      logLevel,
      schema: {
        operationId: 'getSubscriberStatus',
        summary: "A subscriber's billing enforcement status",
        tags: ['lookup'],
        security: [{ publishableKey: [] }],
        params: LookupParams,
        querystring: LookupQuery,
        headers: LookupHeaders,
        response: {
          200: Type200,
          400: ProblemRef,
          401: ProblemRef,
          402: ProblemRef,
          403: ProblemRef,
          404: ProblemRef,
          429: ProblemRef,
          503: ProblemRef,
        },
      },
      // The checks run in the contract's order in the domain (a 401 before a 400), so the
      // schemas document the route and Fastify does not validate it first.
      validatorCompiler: () => () => true,
    },
    (req: FastifyRequest<{ Params: { tenantSlug: string } }>, reply: FastifyReply) => {
      reply.hijack();
      const url = req.raw.url ?? '';
      const q = url.indexOf('?');
      answerer.answer(req.raw, reply.raw, req.params.tenantSlug, q < 0 ? '' : url.slice(q + 1), req.id, false);
    },
  );

  const guard = limiter === null ? [] : [guardAddress(limiter, 'ip')];
  app.options(
    LOOKUP_ROUTE,
    {
      logLevel,
      onRequest: guard,
      schema: {
        operationId: 'preflightSubscriberStatus',
        summary: 'CORS preflight',
        tags: ['lookup'],
        // Browsers send it without credentials.
        security: [],
        params: LookupParams,
        response: {
          204: {
            description: 'Allowed: Access-Control-Allow-Methods, -Headers and -Max-Age, and the origin allowed',
            type: 'null',
          },
          429: ProblemRef,
          503: ProblemRef,
        },
      },
      validatorCompiler: () => () => true,
    },
    async (req: FastifyRequest<{ Params: { tenantSlug: string } }>, reply) => {
      reply.header('cache-control', 'no-store');
      if (!model.serving(now()))
        return sendProblem(reply.header('access-control-allow-origin', '*'), 'store_unavailable');
      const slug = req.params.tenantSlug;
      const tenant = isValidSlug(slug) ? model.tenant(slug) : null;
      const cors: string[] = [];
      corsHeaders(cors, tenant, req.headers.origin);
      for (let i = 0; i < cors.length; i += 2) reply.header(cors[i] as string, cors[i + 1]);
      return reply
        .header('access-control-allow-methods', 'GET, OPTIONS')
        .header('access-control-allow-headers', 'Authorization')
        .header('access-control-max-age', String(PREFLIGHT_MAX_AGE_S))
        .code(204)
        .send();
    },
  );
}
