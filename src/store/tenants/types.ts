import type { Branding } from '../../domain/branding.js';
import type { Policy, TenantPolicy } from '../../domain/policy.js';
import type { Entitlements, Mode } from '../../domain/types.js';
import type { CredentialRotation } from '../keys/types.js';

export interface TenantRecord {
  id: number;
  slug: string;
  tier: string;
  entitlements: Entitlements;
  cardUpdateUrl: string | null;
  hmacRequired: boolean;
  suspended: boolean;
  allowedOrigins: string[] | null;
  /** This tenant's lookup rate limit; null: the service's default. */
  lookupsPerMinute: number | null;
  /** What the snippet shows with a banner or a gate ({}: its defaults). */
  branding: Branding;
  /** How derived statuses are enforced (docs/reference.md, "The dunning policy"). */
  policy: TenantPolicy;
  /** Superseded by the modes (docs/test-mode.md): what the tenant had chosen before them. */
  livemode: boolean | null;
  /** The mode of the tenant's own row's data (the other mode's is its twin's). */
  mode: Mode;
  createdAt: Date;
  updatedAt: Date;
}

export interface TenantSettings {
  tier: string;
  cardUpdateUrl: string | null;
  hmacRequired: boolean;
  suspended: boolean;
  allowedOrigins: string[] | null;
  lookupsPerMinute: number | null;
  branding: Branding;
  /** Any of the policy's fields: the others keep their values. */
  policy: Partial<Policy>;
  livemode: boolean | null;
}

export interface NewTenant extends Omit<
  TenantSettings,
  'suspended' | 'lookupsPerMinute' | 'branding' | 'policy' | 'livemode'
> {
  lookupsPerMinute?: number | null;
  branding?: Branding;
  policy?: Policy;
  /** Default null: both modes. */
  livemode?: boolean | null;
  slug: string;
  /** The live mode's first publishable key (a digest), and the test mode's (absent: none yet). */
  publishableKeyHash: string;
  testPublishableKeyHash?: string;
  hmacSecret: string;
}

export interface TierRecord {
  name: string;
  entitlements: Entitlements;
  createdAt: Date;
  updatedAt: Date;
}

export type DeleteTierResult = 'deleted' | 'not_found' | 'in_use';

export type CreateTenantResult = { ok: true; tenant: TenantRecord } | { ok: false; error: 'exists' | 'unknown_tier' };
export type UpdateTenantResult =
  { ok: true; tenant: TenantRecord } | { ok: false; error: 'not_found' | 'unknown_tier' };

/**
 * Tenants and the tiers they are on: what the operator's API and the tenant's settings
 * change (their credentials are the keys role's).
 */
export interface TenantStore {
  countTenants(): Promise<number>;
  createTenant(tenant: NewTenant, now: Date): Promise<CreateTenantResult>;
  listTenants(): Promise<TenantRecord[]>;
  getTenant(slug: string): Promise<TenantRecord | null>;
  /**
   * The data space of a tenant's mode (docs/test-mode.md): `tenantId`, the tenant's own row
   * (its settings); `spaceId`, the row whose subscribers, history and events are that mode's.
   */
  spaceOf(slug: string, mode: Mode): Promise<{ tenantId: number; spaceId: number } | null>;
  /** Applies the patch and, in the same transaction, the rotation when one is given. */
  updateTenant(
    slug: string,
    patch: Partial<TenantSettings>,
    now: Date,
    rotation?: CredentialRotation,
  ): Promise<UpdateTenantResult>;
  /** Deletes the tenant and everything it owns (credentials, subscribers, history, Stripe events); false: no such tenant. */
  deleteTenant(tenantId: number): Promise<boolean>;
  listTiers(): Promise<TierRecord[]>;
  putTier(name: string, entitlements: Entitlements, now: Date): Promise<TierRecord>;
  /** Deletes a tier no tenant is on. */
  deleteTier(name: string): Promise<DeleteTierResult>;
}
