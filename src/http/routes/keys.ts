import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { generateKeyId, generateSecretKey, SECRET_KEY_PREFIX_CHARS, sha256 } from '../../domain/keys.js';
import type { Scope } from '../../domain/keys.js';
import { parseScopes, scopesLacking } from '../../domain/secret-keys.js';
import type { SecretKeyRecord, SecretKeyStore, TenantStore } from '../../store/index.js';
import type { App } from '../app-instance.js';
import { AppError } from '../problems.js';
import { CreateKeyBody, KeyId, ProblemRef, RotateKeyBody, SecretKeyList, SecretKeyWithSecret } from '../schemas.js';
import { doc, ERRORS, invalid, paramsOf, tenantOf, tenantRecord } from './common.js';
import type { Audience } from './common.js';

/**
 * A tenant's secret keys (docs/reference.md#keys-and-scopes), for the operator and for a tenant key
 * holding `keys:write`. A key's secret is shown once, in the answer that creates or rotates
 * it; only its digest is kept. A tenant key never grants, rotates or revokes a key with a
 * scope it does not hold itself.
 */
export interface KeyRoutesOptions {
  audience: Audience;
  tenants: Pick<TenantStore, 'getTenant'>;
  keys: SecretKeyStore;
  now: () => number;
  /** A rotation's default overlap (DUNWALL_ROTATION_OVERLAP_S). */
  rotationOverlapS: number;
}

export function presentKey(k: SecretKeyRecord) {
  return {
    id: k.id,
    name: k.name,
    scopes: k.scopes,
    prefix: k.prefix,
    created_at: k.createdAt.toISOString(),
    expires_at: k.expiresAt?.toISOString() ?? null,
    last_used_at: k.lastUsedAt?.toISOString() ?? null,
    seen_in_browser_at: k.seenInBrowserAt?.toISOString() ?? null,
    previous_expires_at: k.previousExpiresAt?.toISOString() ?? null,
  };
}

/** What the caller holds: every scope for the operator, the key's own for a tenant key. */
function heldBy(req: FastifyRequest): ReadonlySet<Scope> | 'all' {
  const p = req.principal;
  return p === null ? new Set() : p.kind === 'operator' ? 'all' : p.scopes;
}

function mayManage(req: FastifyRequest, scopes: readonly Scope[]): void {
  const lacking = scopesLacking(heldBy(req), scopes);
  if (lacking.length > 0)
    throw new AppError(
      'insufficient_scope',
      `This key does not hold ${lacking.join(', ')}: it cannot grant or manage a key that does.`,
    );
}

export async function keyRoutes(app: App, opts: KeyRoutesOptions): Promise<void> {
  const { audience, tenants, keys } = opts;
  const tag = 'keys';
  const one = paramsOf(audience, { id: KeyId });
  const config = { scope: 'keys:write' as const };

  async function found(req: FastifyRequest, id: string): Promise<SecretKeyRecord> {
    const key = await keys.getSecretKey(tenantOf(req).id, id);
    if (key === null) throw new AppError('secret_key_not_found');
    return key;
  }

  /**
   * A key created by a key expires no later than its creator: no expiry, or a later one,
   * becomes the creator's (and the answer names the creator). The operator's keys are bound
   * by nothing but what is asked.
   */
  async function boundByCreator(
    req: FastifyRequest,
    asked: Date | null,
  ): Promise<{ expiresAt: Date | null; clampedBy: string | null }> {
    const p = req.principal;
    if (p === null || p.kind !== 'key') return { expiresAt: asked, clampedBy: null };
    const creator = await keys.getSecretKey(tenantOf(req).id, p.keyId);
    // Revoked since the request was let in: it creates nothing.
    if (creator === null) throw new AppError('invalid_secret_key');
    if (creator.expiresAt === null || (asked !== null && asked.getTime() <= creator.expiresAt.getTime()))
      return { expiresAt: asked, clampedBy: null };
    return { expiresAt: creator.expiresAt, clampedBy: creator.id };
  }

  /** A new secret of the request's mode (docs/test-mode.md): sk_test_ in test mode, sk_live_ in live. */
  async function newSecret(req: FastifyRequest): Promise<{ secret: string; digest: Buffer; prefix: string }> {
    // The tenant still exists (a key's space is found by it).
    await tenantRecord(tenants, req);
    const secret = generateSecretKey(tenantOf(req).mode === 'live');
    return { secret, digest: sha256(secret), prefix: secret.slice(0, SECRET_KEY_PREFIX_CHARS) };
  }

  app.post(
    '/keys',
    {
      config,
      schema: {
        ...doc(audience, 'createSecretKey', 'Create a secret key; its secret is shown once', tag),
        params: paramsOf(audience, {}),
        body: CreateKeyBody,
        response: { 201: SecretKeyWithSecret, 409: ProblemRef, ...ERRORS },
      },
    },
    async (req, reply) => {
      const parsed = parseScopes(req.body.scopes);
      if (!parsed.ok) throw invalid('scopes', `'${parsed.bad}' is not a scope`);
      mayManage(req, parsed.scopes);
      const nowMs = opts.now();
      const asked =
        req.body.expires_at === undefined || req.body.expires_at === null ? null : new Date(req.body.expires_at);
      if (asked !== null && asked.getTime() <= nowMs) throw invalid('expires_at', 'must be in the future');
      const { expiresAt, clampedBy } = await boundByCreator(req, asked);
      const { secret, digest, prefix } = await newSecret(req);
      const created = await keys.createSecretKey(
        tenantOf(req).id,
        { id: generateKeyId(), name: req.body.name, scopes: parsed.scopes, prefix, digest, expiresAt },
        new Date(nowMs),
      );
      if (created === 'limit') throw new AppError('secret_key_limit');
      req.log.info(
        { tenant: tenantOf(req).slug, key: created.id, scopes: created.scopes, expiresAtClampedBy: clampedBy },
        'secret key created',
      );
      return reply.code(201).send({
        ...presentKey(created),
        secret_key: secret,
        ...(clampedBy === null ? {} : { expires_at_clamped_by: clampedBy }),
      });
    },
  );

  app.get(
    '/keys',
    {
      config,
      schema: {
        ...doc(audience, 'listSecretKeys', "The tenant's secret keys (never their secrets)", tag),
        params: paramsOf(audience, {}),
        response: { 200: SecretKeyList, ...ERRORS },
      },
    },
    async (req) => ({ data: (await keys.listSecretKeys(tenantOf(req).id)).map(presentKey) }),
  );

  app.delete(
    '/keys/:id',
    {
      config,
      schema: {
        ...doc(audience, 'revokeSecretKey', 'Revoke a secret key: refused on every instance within a second', tag),
        params: one,
        response: { 204: Type.Null({ description: 'Revoked' }), ...ERRORS },
      },
    },
    async (req, reply) => {
      const key = await found(req, req.params.id);
      mayManage(req, key.scopes);
      if (!(await keys.revokeSecretKey(tenantOf(req).id, key.id))) throw new AppError('secret_key_not_found');
      req.log.warn({ tenant: tenantOf(req).slug, key: key.id }, 'secret key revoked');
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/keys/:id/rotate',
    {
      config,
      schema: {
        ...doc(
          audience,
          'rotateSecretKey',
          'A new secret for the key; the replaced one keeps working for the overlap',
          tag,
        ),
        params: one,
        body: Type.Union([RotateKeyBody, Type.Null()]),
        response: { 200: SecretKeyWithSecret, 409: ProblemRef, ...ERRORS },
      },
    },
    async (req) => {
      const key = await found(req, req.params.id);
      mayManage(req, key.scopes);
      // A new secret for a dead key would be refused at once: say so instead of answering one.
      if (key.expiresAt !== null && key.expiresAt.getTime() <= opts.now()) throw new AppError('secret_key_expired');
      const overlapS = req.body?.overlap_seconds ?? opts.rotationOverlapS;
      const { secret, digest, prefix } = await newSecret(req);
      const rotated = await keys.rotateSecretKey(
        tenantOf(req).id,
        key.id,
        { digest, prefix },
        overlapS,
        new Date(opts.now()),
      );
      if (rotated === null) throw new AppError('secret_key_not_found');
      req.log.info({ tenant: tenantOf(req).slug, key: key.id, overlapS }, 'secret key rotated');
      return { ...presentKey(rotated), secret_key: secret };
    },
  );
}
