import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { TObject, TProperties } from 'typebox';
import type { StripeApiKeyStore, TenantRecord, TenantStore } from '../../store/index.js';
import type { ResolvedTenant } from '../principal.js';
import { AppError } from '../problems.js';
import { AdminHeaders, ProblemRef, SecretKeyHeaders, Slug } from '../schemas.js';

/**
 * What the route files of a tenant's resources share. Each file registers its routes once
 * per audience: under /admin/v1/tenants/:slug for the operator (admin token), and under /v1
 * for the tenant itself (a secret key, the tenant being the key's). The handlers are the
 * same; the audience changes the path's parameters, the OpenAPI names and the scope check
 * (the operator holds every scope).
 */
export type Audience = 'operator' | 'tenant';

export const ERRORS = {
  400: ProblemRef,
  401: ProblemRef,
  403: ProblemRef,
  404: ProblemRef,
  429: ProblemRef,
  503: ProblemRef,
};

/** The OpenAPI fields of a route: its tag, how it authenticates, a unique operation id per audience. */
export function doc(audience: Audience, operationId: string, summary: string, tag: string) {
  return audience === 'operator'
    ? {
        tags: [tag === 'downstream-webhooks' ? tag : 'admin'],
        security: [{ adminToken: [] }],
        headers: AdminHeaders,
        operationId,
        summary,
      }
    : {
        tags: ['tenant'],
        security: [{ secretKey: [] }],
        headers: SecretKeyHeaders,
        operationId: `tenant${operationId[0]?.toUpperCase() ?? ''}${operationId.slice(1)}`,
        summary,
      };
}

/** The path's parameters: the operator's paths name the tenant's slug first. */
export function paramsOf<P extends TProperties>(audience: Audience, props: P): TObject<P> {
  return (audience === 'operator'
    ? Type.Object({ slug: Slug, ...props })
    : Type.Object(props)) as unknown as TObject<P>;
}

/** The tenant the request acts on, resolved by its scope's hook. */
export function tenantOf(req: FastifyRequest): ResolvedTenant {
  if (req.tenant === null) throw new AppError('internal_error', 'The tenant was not resolved.');
  return req.tenant;
}

/** The tenant's whole record, as the store holds it now: 404 `tenant_not_found` when it is gone. */
export async function tenantRecord(store: Pick<TenantStore, 'getTenant'>, req: FastifyRequest): Promise<TenantRecord> {
  const tenant = await store.getTenant(tenantOf(req).slug);
  if (tenant === null) throw new AppError('tenant_not_found');
  return tenant;
}

export function invalid(field: string, why: string): AppError {
  return new AppError('invalid_request', `${field}: ${why}`);
}

/** The Stripe API key shown with a tenant: its prefix and date, never the key; null: none. */
export async function presentStripeApiKey(
  stripeApiKeys: Pick<StripeApiKeyStore, 'stripeApiKeyOf'>,
  spaceId: number,
): Promise<{ prefix: string; set_at: string } | null> {
  const summary = await stripeApiKeys.stripeApiKeyOf(spaceId);
  return summary === null ? null : { prefix: summary.prefix, set_at: summary.setAt.toISOString() };
}
