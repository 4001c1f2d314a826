import { prepareTenant } from '../domain/lookup.js';
import { NAMED_FLAGS } from '../domain/types.js';
import type { Branding } from '../domain/branding.js';
import type { Credential, Entitlements, TenantAuth } from '../domain/types.js';
import type { SecretBox } from '../secrets/cipher.js';
import type { Queryable } from './db.js';
import type { CredentialKind, TenantRecord } from './store.js';

export interface TenantRow {
  id: number;
  slug: string;
  tier: string;
  entitlements: Entitlements;
  card_update_url: string | null;
  hmac_required: boolean;
  suspended: boolean;
  allowed_origins: string[] | null;
  lookups_per_minute: number | null;
  branding: Branding;
  livemode: boolean | null;
  created_at: Date;
  updated_at: Date;
}

export interface CredentialRow {
  kind: CredentialKind;
  key_hash: string | null;
  secret: string | null;
  expires_at: Date | null;
}

export const TENANT_SELECT = `SELECT t.id, t.slug, t.tier, tr.entitlements, t.card_update_url, t.hmac_required,
  t.suspended, t.allowed_origins, t.lookups_per_minute, t.branding, t.created_at, t.updated_at,
  t.livemode
  FROM tenants t JOIN tiers tr ON tr.name = t.tier`;

/** The named flags first, in the contract's order, then the tier's other flags. */
export function orderEntitlements(flags: Entitlements): Entitlements {
  const ordered: Entitlements = {};
  for (const name of NAMED_FLAGS) ordered[name] = flags[name] === true;
  for (const [name, value] of Object.entries(flags)) if (!(name in ordered)) ordered[name] = value === true;
  return ordered;
}

export function toTenant(row: TenantRow): TenantRecord {
  return {
    id: row.id,
    slug: row.slug,
    tier: row.tier,
    entitlements: orderEntitlements(row.entitlements),
    cardUpdateUrl: row.card_update_url,
    hmacRequired: row.hmac_required,
    suspended: row.suspended,
    allowedOrigins: row.allowed_origins,
    lookupsPerMinute: row.lookups_per_minute,
    branding: row.branding ?? {},
    livemode: row.livemode,
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}

export function credential<T>(value: T, expiresAt: Date | null): Credential<T> {
  return { value, expiresAtMs: expiresAt === null ? null : new Date(expiresAt).getTime() };
}

/**
 * Tenants as the lookup uses them (`prepareTenant`): all of them, or those of the given ids,
 * slug or tiers. HMAC secrets are opened here, once per read, so that lookups never decrypt.
 */
export async function readTenantsAuth(q: Queryable, secrets: SecretBox, which: null | readonly number[] | { slug: string } | { tiers: readonly string[] }): Promise<TenantAuth[]> {
  let where = '';
  let params: unknown[] = [];
  if (Array.isArray(which)) [where, params] = [' WHERE t.id = ANY($1::int[])', [which]];
  else if (which !== null && 'slug' in which) [where, params] = [' WHERE t.slug = $1', [which.slug]];
  else if (which !== null && 'tiers' in which) [where, params] = [' WHERE t.tier = ANY($1::text[])', [which.tiers]];
  const rows = await q.query<TenantRow>(`${TENANT_SELECT}${where}`, params);
  if (rows.length === 0) return [];
  const creds = await q.query<CredentialRow & { tenant_id: number }>(
    `SELECT tenant_id, kind, key_hash, secret, expires_at FROM tenant_credentials
     WHERE tenant_id = ANY($1::int[]) AND kind IN ('publishable_key', 'hmac_secret') ORDER BY id`,
    [rows.map((r) => r.id)],
  );
  const byTenant = new Map<number, CredentialRow[]>();
  for (const c of creds) {
    const list = byTenant.get(c.tenant_id);
    if (list) list.push(c);
    else byTenant.set(c.tenant_id, [c]);
  }
  return rows.map((row) => {
    const tenant = toTenant(row);
    const own = byTenant.get(row.id) ?? [];
    return prepareTenant({
      id: tenant.id,
      slug: tenant.slug,
      suspended: tenant.suspended,
      hmacRequired: tenant.hmacRequired,
      cardUpdateUrl: tenant.cardUpdateUrl,
      allowedOrigins: tenant.allowedOrigins,
      lookupsPerMinute: tenant.lookupsPerMinute,
      branding: tenant.branding,
      entitlements: tenant.entitlements,
      publishableKeyHashes: own
        .filter((c) => c.kind === 'publishable_key' && c.key_hash !== null)
        .map((c) => credential(Buffer.from(c.key_hash ?? '', 'hex'), c.expires_at)),
      hmacSecrets: own
        .filter((c) => c.kind === 'hmac_secret' && c.secret !== null)
        .map((c) => credential(secrets.open(c.secret ?? '', { tenantId: row.id, kind: 'hmac_secret' }), c.expires_at)),
    });
  });
}
