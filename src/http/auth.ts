import { timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { looksLikeSecretKey, SECRET_KEY_PREFIX_CHARS, sha256 } from '../domain/keys.js';
import type { Scope } from '../domain/keys.js';
import type { Mode } from '../domain/types.js';
import { checkBearer } from '../domain/lookup.js';
import { findSecretKey } from '../domain/secret-keys.js';
import type { ReadModel } from '../readmodel/index.js';
import type { App } from './app-instance.js';
import { holds } from './principal.js';
import type { Credential, ResolvedTenant } from './principal.js';
import { AppError, sendProblem } from './problems.js';
import type { RateLimiter } from './rate-limit.js';
import { countFailures, guardAddress, guardKey, remaining, setRateLimitFields } from './rate-limit.js';
import { authorizationOf, seenHeaders } from './request.js';
import type { KeyUsage, SecretKeySightings } from './key-usage.js';
import { CSRF_HEADER, csrfMatches, readCookie, SESSION_COOKIE } from '../console/session.js';
import type { SessionPrincipal } from '../console/session.js';

/**
 * Who a request acts for, resolved once per request by the hooks of its scope (never by a
 * route): the operator by the admin token (and the tenant by the slug in the path), or a
 * tenant by its secret key (the tenant being the key's). Route handlers read `req.tenant`
 * and `req.principal`; a route names the scope it needs in its config (`{ scope }`).
 */

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The scope a secret key needs for this route (the operator holds every scope). */
    scope?: Scope;
  }
}

/** Every request starts with neither; the hooks below set them. */
export function decorateRequests(app: App): void {
  app.decorateRequest('tenant', null);
  app.decorateRequest('principal', null);
  app.decorateRequest('credential', null);
}

export interface OperatorAuthOptions {
  /** The SHA-256 digest of the admin token; null: the admin API is off. */
  adminTokenSha256: Buffer | null;
  limiter: RateLimiter | null;
  /** The console's sessions, which stand in for the bearer; absent: bearer only. */
  sessions?: SessionAuth | null;
}

/** Finds a console session's principal by the id in its cookie (src/console/session.ts). */
export type SessionAuth = (sessionId: string) => Promise<SessionPrincipal | null>;

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * A request without Authorization that carries the console's session cookie acts for the
 * session: null when it carries neither (the bearer's own checks answer), else the
 * session's principal, or the problem that refuses it. A write must name the session's
 * CSRF token: a page of another site can send the cookie of a form it posts, never the token.
 */
async function sessionOf(
  req: FastifyRequest,
  sessions: SessionAuth | null | undefined,
  authorization: string | string[] | undefined,
): Promise<SessionPrincipal | 'invalid_session' | 'csrf_token_invalid' | null> {
  if (!sessions || authorization !== undefined) return null;
  const id = readCookie(req.headers.cookie, SESSION_COOKIE);
  if (id === null) return null;
  const session = await sessions(id);
  if (session === null) return 'invalid_session';
  if (!SAFE_METHODS.has(req.method) && !csrfMatches(id, req.headers[CSRF_HEADER])) return 'csrf_token_invalid';
  return session;
}

/**
 * The operator's scope (/admin/v1): the address's admin quota and failures are counted
 * before the token is checked, so that guessing it is limited too; the token is compared
 * digest to digest, in constant time.
 */
export function operatorAuth(app: App, opts: OperatorAuthOptions): void {
  const { limiter, adminTokenSha256 } = opts;
  /** Whether a request carries the admin token, decided once per request. */
  const verdicts = new WeakMap<FastifyRequest, boolean>();
  const holdsToken = (req: FastifyRequest): boolean => {
    let verdict = verdicts.get(req);
    if (verdict === undefined) {
      const bearer = checkBearer(authorizationOf(req.raw), 'missing_admin_token', 'invalid_admin_token');
      // Digests of equal length, compared in constant time: neither the token nor its length leaks.
      verdict = adminTokenSha256 !== null && bearer.ok && timingSafeEqual(sha256(bearer.token), adminTokenSha256);
      verdicts.set(req, verdict);
    }
    return verdict;
  };
  // Counted before the token is answered for, so that guessing it is limited too; the token
  // is checked first, so that the operator is never refused for the address's failures.
  if (limiter) {
    app.addHook('onRequest', guardAddress(limiter, 'admin', null, holdsToken));
    // A 401 is a guess at the token; a 404 after a valid token is no guess.
    app.addHook('onSend', countFailures(limiter, [401]));
  }
  app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
    if (adminTokenSha256 === null) return sendProblem(reply, 'admin_disabled');
    const authorization = authorizationOf(req.raw);
    const session = await sessionOf(req, opts.sessions, authorization);
    if (typeof session === 'string') return sendProblem(reply, session);
    if (session !== null) {
      if (session.kind !== 'operator')
        return sendProblem(
          reply,
          'invalid_session',
          "This is a tenant's console session: the operator's API needs the operator's.",
        );
      req.principal = OPERATOR;
      return;
    }
    const bearer = checkBearer(authorization, 'missing_admin_token', 'invalid_admin_token');
    if (!bearer.ok) return sendProblem(reply, bearer.code);
    if (!holdsToken(req)) return sendProblem(reply, 'invalid_admin_token');
    req.principal = OPERATOR;
  });
}

const OPERATOR = Object.freeze({ kind: 'operator' as const });

/**
 * The tenant named by the path's slug, for the operator's routes of a tenant's resources
 * (after the params are validated): 404 `tenant_not_found` when there is none.
 */
export function tenantBySlug(app: App, find: (slug: string, mode: Mode) => Promise<ResolvedTenant | null>): void {
  app.addHook('preHandler', async (req) => {
    const slug = (req.params as { slug?: string }).slug;
    const mode = modeOf(req);
    const tenant = slug === undefined ? null : await find(slug, mode);
    if (tenant === null) throw new AppError('tenant_not_found');
    req.tenant = tenant;
  });
}

/**
 * The mode an operator's request addresses: `?mode=test`, else live (docs/test-mode.md). Any
 * other value is refused, never taken for live: a typo must not write to the live mode.
 */
export function modeOf(req: FastifyRequest): Mode {
  const mode = (req.query as { mode?: unknown } | undefined)?.mode;
  if (mode === undefined || mode === 'live') return 'live';
  if (mode === 'test') return 'test';
  throw new AppError('invalid_request', 'mode: must be live or test');
}

export interface KeyAuthOptions {
  model: ReadModel;
  now: () => number;
  limiter: RateLimiter | null;
  /** Where uses are remembered for `last_used_at`; null: not recorded. */
  keyUsage: KeyUsage | null;
  /** Where a secret key sent from a browser is counted, logged and marked; absent: not recorded. */
  keySightings?: SecretKeySightings | null;
  /** The console's sessions, which stand in for the key they were opened with; absent: keys only. */
  sessions?: SessionAuth | null;
}

/**
 * The tenant's scope (/v1): a secret key, never from a browser, found by its digest in the
 * read model (so a revocation reaches every instance with the change stream), then checked
 * against the tenant's keys in constant time with its expiry. A request with a valid key is
 * counted against that key's quota, never its address's; an invalid one counts as a failure
 * of its address, like a wrong admin token.
 */
export function keyAuth(app: App, opts: KeyAuthOptions): void {
  const { model, limiter } = opts;
  if (limiter) app.addHook('onSend', countFailures(limiter, [401]));
  app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
    const headers = seenHeaders(req.raw);
    const session = await sessionOf(req, opts.sessions, headers.authorization);
    if (typeof session === 'string') return sendProblem(reply, session);
    if (session !== null) {
      if (session.kind !== 'key')
        return sendProblem(
          reply,
          'invalid_session',
          "This is the operator's console session: a tenant's API needs a tenant's.",
        );
      if (limiter && (await guardKey(limiter, session.keyId, reply))) return reply;
      opts.keyUsage?.used(session.keyId, opts.now());
      req.tenant = session.tenant;
      req.principal = { kind: 'key', keyId: session.keyId, scopes: session.scopes };
      const sessionId = readCookie(req.headers.cookie, SESSION_COOKIE) ?? '';
      const sessions = opts.sessions as SessionAuth;
      req.credential = sessionCredential(model, session, () => sessions(sessionId).then((s) => s !== null));
      return;
    }
    const bearer = checkBearer(headers.authorization, 'invalid_secret_key', 'invalid_secret_key');
    if (!bearer.ok || !looksLikeSecretKey(bearer.token)) return sendProblem(reply, 'invalid_secret_key');
    const nowMs = opts.now();
    if (headers.origin !== undefined) {
      // Refused whatever the key; a current key of a tenant is marked as seen there.
      const digest = sha256(bearer.token);
      const tenant = model.serving(nowMs) ? model.tenantBySecretKey(digest) : null;
      const key = tenant === null ? null : findSecretKey(tenant.secretKeys, digest, nowMs);
      if (tenant !== null && key !== null) {
        opts.keySightings?.seen(
          {
            tenant: tenant.slug,
            keyId: key.id,
            prefix: bearer.token.slice(0, SECRET_KEY_PREFIX_CHARS),
            origin: headers.origin,
          },
          nowMs,
        );
      }
      return sendProblem(reply, 'secret_key_in_browser');
    }
    if (!model.serving(nowMs)) return sendProblem(reply, 'store_unavailable');
    const digest = sha256(bearer.token);
    const tenant = model.tenantBySecretKey(digest);
    const key = tenant === null ? null : findSecretKey(tenant.secretKeys, digest, nowMs);
    if (tenant === null || key === null) {
      // An address past its failure quota is refused before its next guess is answered.
      const failures = limiter === null ? null : await limiter.failuresOf(limiter.addressOf(req.raw));
      if (limiter !== null && failures !== null && remaining(failures) === 0) {
        setRateLimitFields(reply, limiter.fields(null, failures, null, failures));
        return sendProblem(reply, 'rate_limited');
      }
      return sendProblem(reply, 'invalid_secret_key');
    }
    if (limiter && (await guardKey(limiter, key.id, reply))) return reply;
    opts.keyUsage?.used(key.id, nowMs);
    req.tenant = { id: tenant.id, slug: tenant.slug, tenantId: tenant.tenantId, mode: tenant.mode };
    req.principal = { kind: 'key', keyId: key.id, scopes: key.scopes };
    req.credential = keyCredential(model, tenant.id, digest);
  });
}

/**
 * A secret key as the read model shows it, looked up again by its digest each time: a
 * revocation, an expiry set by a rotation or the tenant's deletion reach it with the change
 * log, on every instance.
 */
function keyCredential(model: Pick<ReadModel, 'tenantById'>, tenantId: number, digest: Buffer): Credential {
  return {
    refusal: 'invalid_secret_key',
    endsAt(nowMs) {
      const tenant = model.tenantById(tenantId);
      const key = tenant === null ? null : findSecretKey(tenant.secretKeys, digest, nowMs);
      return key === null ? 'ended' : key.expiresAtMs;
    },
  };
}

/**
 * A tenant's console session: it ends at its own expiry, with the key it was opened with
 * (revoked or expired, as the read model shows it), or when it is signed out (the store).
 */
function sessionCredential(
  model: Pick<ReadModel, 'tenantById'>,
  session: Extract<SessionPrincipal, { kind: 'key' }>,
  stillSignedIn: () => Promise<boolean>,
): Credential {
  const sessionEndsMs = session.expiresAt.getTime();
  return {
    refusal: 'invalid_session',
    endsAt(nowMs) {
      if (sessionEndsMs <= nowMs) return 'ended';
      // A rotated key is listed once per digest in force: it lasts as long as the last of them.
      const current = (model.tenantById(session.tenant.id)?.secretKeys ?? []).filter(
        (k) => k.id === session.keyId && (k.expiresAtMs === null || k.expiresAtMs > nowMs),
      );
      if (current.length === 0) return 'ended';
      const keyEndsMs = current.some((k) => k.expiresAtMs === null)
        ? Infinity
        : Math.max(...current.map((k) => k.expiresAtMs ?? 0));
      return Math.min(keyEndsMs, sessionEndsMs);
    },
    stillSignedIn,
  };
}

/** The route's scope, checked once the principal is known: 403 `insufficient_scope` without it. */
export function requireScopes(app: App): void {
  app.addHook('preHandler', async (req) => {
    const scope = req.routeOptions.config.scope;
    if (scope !== undefined && !holds(req.principal, scope))
      throw new AppError('insufficient_scope', `This call needs the scope ${scope}.`);
  });
}
