import type { Mode } from '../domain/types.js';
import type { Scope } from '../domain/keys.js';

/**
 * Who a request to a tenant's resources acts for, resolved once by a hook (src/http/auth.ts):
 * the operator (admin token, every scope, the tenant named by its slug in the path) or a
 * tenant's secret key (its scopes, the tenant being the key's).
 */
export type Principal =
  { readonly kind: 'operator' } | { readonly kind: 'key'; readonly keyId: string; readonly scopes: ReadonlySet<Scope> };

/** The tenant a request acts on. */
export interface ResolvedTenant {
  /** The data space of the request's mode (docs/test-mode.md): the rows of that mode's subscribers, keys and events. */
  readonly id: number;
  readonly slug: string;
  /** The tenant's own row (its settings and endpoints), whichever the mode. */
  readonly tenantId: number;
  readonly mode: Mode;
}

/**
 * The credential a tenant's request was let in with (a secret key, or a console session
 * opened with one), asked again for as long as a connection it opened stays open: a long
 * poll or an event stream ends when its credential is revoked or expires.
 */
export interface Credential {
  /** The problem a request with it answers once it has ended. */
  readonly refusal: 'invalid_secret_key' | 'invalid_session';
  /**
   * When it ends as this process's read model shows it at `nowMs` (milliseconds since the
   * epoch; null: never), or 'ended': revoked, expired, or its tenant gone.
   */
  endsAt(nowMs: number): number | null | 'ended';
  /** A console session: whether the store still holds it (a sign-out on any instance deletes it). Absent: nothing to ask. */
  stillSignedIn?: () => Promise<boolean>;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the tenant-resolving hook on the routes of a tenant's resources; null elsewhere. */
    tenant: ResolvedTenant | null;
    principal: Principal | null;
    /** Set by the secret key's hook (src/http/auth.ts); null for the operator and elsewhere. */
    credential: Credential | null;
  }
}

/** Whether the principal holds `scope` (the operator holds every scope). */
export function holds(principal: Principal | null, scope: Scope): boolean {
  if (principal === null) return false;
  return principal.kind === 'operator' || principal.scopes.has(scope);
}
