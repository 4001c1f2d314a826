import { timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { ConsoleAssets, ConsoleFile } from '../../console/assets.js';
import {
  clearedSessionCookie,
  csrfTokenOf,
  newSessionId,
  readCookie,
  resolveSession,
  SESSION_COOKIE,
  sessionCookie,
  sessionDigest,
} from '../../console/session.js';
import type { SessionPrincipal } from '../../console/session.js';
import { brandingProblem } from '../../domain/branding.js';
import { looksLikeSecretKey, SCOPES, sha256 } from '../../domain/keys.js';
import { formatLockoutAt } from '../../domain/policy.js';
import { findSecretKey } from '../../domain/secret-keys.js';
import type { ReadModel } from '../../readmodel/index.js';
import type { ConsoleSessionStore } from '../../store/index.js';
import type { App } from '../app-instance.js';
import { ifNoneMatchHits } from '../conditional.js';
import { AppError, sendProblem } from '../problems.js';
import { countFailures, guardAddress } from '../rate-limit.js';
import type { RateLimiter } from '../rate-limit.js';
import { Text } from '../schemas.js';
import { CSRF_HEADER, csrfMatches } from '../../console/session.js';

/**
 * The console (docs/console.md): one page and its built scripts under /console, the
 * session it signs in with (/console/api/session), and the page that previews a draft
 * branding with the snippet itself. Everything else the console shows comes from the
 * tenant API (/v1) or the operator's (/admin/v1), with the session cookie standing in for
 * the credential (src/http/auth.ts).
 */
export interface ConsoleRoutesOptions {
  assets: ConsoleAssets | null;
  sessions: ConsoleSessionStore;
  model: ReadModel;
  now: () => number;
  /** The admin token's digest; null: the operator cannot sign in. */
  adminTokenSha256: Buffer | null;
  limiter: RateLimiter | null;
  sessionTtlMs: number;
  /** Whether the request reached the service over HTTPS (itself, or a trusted proxy that says so). */
  viaHttps: (req: FastifyRequest) => boolean;
  /** Whether the request came straight from this machine's loopback: its socket's peer, never a header. */
  fromLoopback: (req: FastifyRequest) => boolean;
}

/**
 * No script but the console's own files, nothing inline, no framing: a page that shows
 * customer data and holds a session is given nothing it does not use.
 */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' https: data:; connect-src 'self'; frame-src 'self'; " +
  "base-uri 'none'; form-action 'self'; frame-ancestors 'none'";
/** The branding preview: the snippet and its calls, framed by the console only. */
export const PREVIEW_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src https: data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'self'";

const PREVIEW_STATES = ['warning', 'lockout'] as const;
/** How far ahead the previewed banner's lockout is: its countdown shows. */
const PREVIEW_LOCKOUT_AHEAD_MS = 3 * 86_400_000;

function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function pageHeaders(reply: FastifyReply, csp: string): FastifyReply {
  return reply
    .header('content-security-policy', csp)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('cross-origin-opener-policy', 'same-origin')
    .header('cache-control', 'no-store');
}

function sendFile(req: FastifyRequest, reply: FastifyReply, file: ConsoleFile, cacheControl: string): FastifyReply {
  const gzip = /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''));
  reply
    .header('content-type', file.contentType)
    .header('etag', file.etag)
    .header('vary', 'Accept-Encoding')
    .header('cache-control', cacheControl);
  reply.header('x-content-type-options', 'nosniff');
  if (ifNoneMatchHits(req.headers['if-none-match'], file.etag)) return reply.code(304).send();
  if (gzip) reply.header('content-encoding', 'gzip');
  return reply.send(gzip ? file.gzipped : file.body);
}

/** A draft branding as the preview's address carries it: base64url JSON, checked like a saved one. */
function draftBranding(encoded: string): string {
  try {
    const value: unknown = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8'));
    return brandingProblem(value) === null ? JSON.stringify(value) : '{}';
  } catch {
    return '{}';
  }
}

function presentSession(principal: SessionPrincipal, sessionId: string) {
  return {
    kind: principal.kind === 'operator' ? ('operator' as const) : ('tenant' as const),
    // A key's session addresses its key's mode, which the console shows (read-only).
    tenant: principal.kind === 'key' ? { slug: principal.tenant.slug, mode: principal.tenant.mode } : null,
    scopes: principal.kind === 'key' ? SCOPES.filter((s) => principal.scopes.has(s)) : [...SCOPES],
    csrf_token: csrfTokenOf(sessionId),
    expires_at: principal.expiresAt.toISOString(),
  };
}

const SessionAnswer = Type.Object({
  kind: Type.Union([Type.Literal('operator'), Type.Literal('tenant')]),
  tenant: Type.Union([
    Type.Object({ slug: Type.String(), mode: Type.Union([Type.Literal('live'), Type.Literal('test')]) }),
    Type.Null(),
  ]),
  scopes: Type.Array(Type.String()),
  csrf_token: Type.String(),
  expires_at: Type.String(),
});

export async function consoleRoutes(app: App, opts: ConsoleRoutesOptions): Promise<void> {
  const { assets, sessions, model, limiter } = opts;

  const page = async (_req: FastifyRequest, reply: FastifyReply) => {
    if (assets === null) return sendProblem(reply, 'not_found', 'The console is not built: run npm run build.');
    return pageHeaders(reply, CONSOLE_CSP)
      .header('x-frame-options', 'DENY')
      .header('content-type', assets.page.contentType)
      .send(assets.page.body);
  };
  app.get('/console', { schema: { hide: true } }, page);
  // Every path of the console is its one page: the page routes itself.
  app.get('/console/*', { schema: { hide: true } }, page);

  app.get('/console/assets/:file', { schema: { hide: true } }, async (req, reply) => {
    const file = assets?.files.get((req.params as { file: string }).file);
    if (file === undefined) return sendProblem(reply, 'not_found');
    return sendFile(req, reply, file, 'public, max-age=31536000, immutable');
  });

  // The branding preview: a make-believe page of the tenant's app with the snippet itself,
  // answered by the two calls below instead of the lookup, with the draft in their address.
  app.get('/console/preview', { schema: { hide: true } }, async (req, reply) => {
    // A signed-in page's frame only: the draft is whatever its address says, so a link to the
    // preview from anywhere else (which never carries the SameSite=Strict cookie) is not a
    // page of this origin showing a stranger's text and links.
    const id = readCookie(req.headers.cookie, SESSION_COOKIE);
    if (id === null || (await resolveSession(sessions, model, id, opts.now())) === null)
      return sendProblem(reply, 'invalid_session');
    const q = req.query as Record<string, unknown>;
    const state = PREVIEW_STATES.find((s) => s === q.state) ?? 'warning';
    const draft = typeof q.draft === 'string' && /^[A-Za-z0-9_-]{0,12000}$/.test(q.draft) ? q.draft : '';
    const css = [...(assets?.files.keys() ?? [])].find((name) => name.startsWith('preview-') && name.endsWith('.css'));
    const base = `/console/preview/api/${state}/${draft || 'e30'}`;
    // As a member reads it (the member's texts, no link), or as a billing admin.
    const role = q.role === 'member' ? ' data-role="member"' : '';
    const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Preview</title>${css ? `<link rel="stylesheet" href="/console/assets/${css}">` : ''}</head><body class="preview-page">
<nav class="preview-nav" aria-hidden="true"><span></span><span></span><span></span></nav>
<main class="preview-main" aria-hidden="true"><div></div><div></div><div></div></main>
<script src="/snippet.js" data-tenant="preview" data-key="pk_preview" data-customer="cus_preview" data-base-url="${escapeHtml(base)}"${role} async></script>
</body></html>`;
    return pageHeaders(reply, PREVIEW_CSP)
      .header('x-frame-options', 'SAMEORIGIN')
      .header('content-type', 'text/html; charset=utf-8')
      .send(html);
  });

  app.get('/console/preview/api/*', { schema: { hide: true } }, async (req, reply) => {
    const rest = (req.params as { '*': string })['*'];
    const m = /^(warning|lockout)\/([A-Za-z0-9_-]{1,12000})\/api\/(subscriber-status|branding)\/[a-z0-9-]{1,64}$/.exec(
      rest,
    );
    if (m === null) return sendProblem(reply, 'not_found');
    reply
      .header('content-type', 'application/json; charset=utf-8')
      .header('cache-control', 'no-store')
      .header('x-content-type-options', 'nosniff');
    if (m[3] === 'branding') return reply.send(draftBranding(m[2] as string));
    const status = m[1] as (typeof PREVIEW_STATES)[number];
    const lockoutAt =
      status === 'warning' ? { lockout_at: formatLockoutAt(opts.now() + PREVIEW_LOCKOUT_AHEAD_MS) } : {};
    // The lookup's shape (docs/reference.md#the-lookup): no card update page, so the draft's payment link shows.
    return reply.send(JSON.stringify({ status, entitlements: {}, card_update_url: null, ...lockoutAt }));
  });

  await app.register(async (api: App) => {
    // Signing in is guessing a credential as far as the rate limits go: the address's admin
    // quota counts it, and a failure counts against the address.
    if (limiter) api.addHook('onRequest', guardAddress(limiter, 'admin'));
    // A failed sign-in is a guess; a page asking whether it is signed in is not.
    const countGuesses = limiter ? { onSend: countFailures(limiter, [401]) } : {};

    const current = async (req: FastifyRequest): Promise<{ id: string; principal: SessionPrincipal } | null> => {
      const id = readCookie(req.headers.cookie, SESSION_COOKIE);
      const principal = id === null ? null : await resolveSession(sessions, model, id, opts.now());
      return id === null || principal === null ? null : { id, principal };
    };
    // Plain http and a cookie without Secure only for a browser on this machine, as its socket says.
    const secure = (req: FastifyRequest) => !opts.fromLoopback(req);

    api.post(
      '/console/api/session',
      {
        ...countGuesses,
        schema: {
          hide: true,
          body: Type.Object({ credential: Text({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false }),
          response: { 201: SessionAnswer },
        },
      },
      async (req, reply) => {
        // Only the console's own page signs in: another site's page cannot plant a session.
        const origin = req.headers.origin;
        if (origin !== undefined && origin !== `${opts.viaHttps(req) ? 'https' : 'http'}://${req.headers.host ?? ''}`) {
          throw new AppError('csrf_token_invalid', "A sign-in from another site's page is refused.");
        }
        if (secure(req) && !opts.viaHttps(req)) throw new AppError('insecure_transport');
        const nowMs = opts.now();
        if (!model.serving(nowMs)) throw new AppError('store_unavailable');
        const credential = req.body.credential;
        const digest = sha256(credential);
        let tenantId: number | null = null;
        let keyId: string | null = null;
        if (looksLikeSecretKey(credential)) {
          const tenant = model.tenantBySecretKey(digest);
          const key = tenant === null ? null : findSecretKey(tenant.secretKeys, digest, nowMs);
          if (tenant === null || key === null) throw new AppError('invalid_credentials');
          [tenantId, keyId] = [tenant.id, key.id];
        } else if (opts.adminTokenSha256 === null || !timingSafeEqual(digest, opts.adminTokenSha256)) {
          throw new AppError('invalid_credentials');
        }
        const id = newSessionId();
        const createdAt = new Date(nowMs);
        const expiresAt = new Date(nowMs + opts.sessionTtlMs);
        await sessions.createConsoleSession({
          digest: sessionDigest(id),
          tenantId,
          secretKeyId: keyId,
          createdAt,
          expiresAt,
        });
        const principal = await resolveSession(sessions, model, id, nowMs);
        if (principal === null) throw new AppError('invalid_credentials');
        req.log.info(
          { kind: principal.kind, tenant: principal.kind === 'key' ? principal.tenant.slug : null },
          'console: signed in',
        );
        return reply
          .code(201)
          .header('set-cookie', sessionCookie(id, opts.sessionTtlMs, secure(req)))
          .header('cache-control', 'no-store')
          .send(presentSession(principal, id));
      },
    );

    api.get(
      '/console/api/session',
      { schema: { hide: true, response: { 200: SessionAnswer } } },
      async (req, reply) => {
        const session = await current(req);
        if (session === null) throw new AppError('invalid_session');
        return reply.header('cache-control', 'no-store').send(presentSession(session.principal, session.id));
      },
    );

    api.delete('/console/api/session', { schema: { hide: true } }, async (req, reply) => {
      const session = await current(req);
      if (session === null) throw new AppError('invalid_session');
      if (!csrfMatches(session.id, req.headers[CSRF_HEADER])) throw new AppError('csrf_token_invalid');
      await sessions.deleteConsoleSession(sessionDigest(session.id));
      return reply
        .code(204)
        .header('set-cookie', clearedSessionCookie(secure(req)))
        .send();
    });

    api.all('/console/api/*', { schema: { hide: true } }, async (_req, reply) => sendProblem(reply, 'not_found'));
  });
}
