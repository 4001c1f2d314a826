import type { Scope } from '../domain/keys.js';

/**
 * Who a request to a tenant's resources acts for, resolved once by a hook (src/http/auth.ts):
 * the operator (admin token, every scope, the tenant named by its slug in the path) or a
 * tenant's secret key (its scopes, the tenant being the key's).
 */
export type Principal = { readonly kind: 'operator' } | { readonly kind: 'key'; readonly keyId: string; readonly scopes: ReadonlySet<Scope> };

/** The tenant a request acts on. */
export interface ResolvedTenant {
  readonly id: number;
  readonly slug: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the tenant-resolving hook on the routes of a tenant's resources; null elsewhere. */
    tenant: ResolvedTenant | null;
    principal: Principal | null;
  }
}

/** Whether the principal holds `scope` (the operator holds every scope). */
export function holds(principal: Principal | null, scope: Scope): boolean {
  if (principal === null) return false;
  return principal.kind === 'operator' || principal.scopes.has(scope);
}
