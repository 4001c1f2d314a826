import { prepareTenant } from '../../domain/lookup.js';
import { NAMED_FLAGS } from '../../domain/types.js';
import type { Branding } from '../../domain/branding.js';
import type { Policy } from '../../domain/policy.js';
import { normaliseNotices } from '../../domain/notices.js';
import type { Credential, Entitlements, Mode, SecretKeyAuth, TenantAuth } from '../../domain/types.js';
import { readSecretKeyAuth } from '../keys/secret-keys.js';
import { SecretDecryptionError, UnknownEncryptionKeyError } from '../../secrets/cipher.js';
import type { SecretBox } from '../../secrets/cipher.js';
import type { Queryable } from '../db/db.js';
import type { UnreadableTenant } from '../changes/types.js';
import type { CredentialKind } from '../keys/types.js';
import type { TenantRecord } from './types.js';

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
  policy_enforcement: Policy['enforcement'];
  policy_grace_days: number;
  policy_escalate_after_days: number | null;
  policy_notices: string[] | null;
  livemode: boolean | null;
  mode: Mode;
  /** A twin (the other mode's data space): the tenant's row; null: the tenant's own row. */
  mode_of: number | null;
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
  t.suspended, t.allowed_origins, t.lookups_per_minute, t.branding, t.policy_enforcement, t.policy_grace_days,
  t.policy_escalate_after_days, t.policy_notices, t.created_at, t.updated_at, t.livemode, t.mode, t.mode_of
  FROM tenants t JOIN tiers tr ON tr.name = t.tier`;

/** The tenants' own rows (twins, the other mode's data spaces, are never listed or addressed). */
export const TENANT_ROWS = `${TENANT_SELECT} WHERE t.mode_of IS NULL`;

/** The named flags first, in the contract's order, then the tier's other flags. */
export function orderEntitlements(flags: Entitlements): Entitlements {
  const ordered: Entitlements = {};
  for (const name of NAMED_FLAGS) ordered[name] = flags[name] === true;
  // Own names only: `in` would also see what every object has, and lose a flag named so.
  for (const [name, value] of Object.entries(flags)) if (!Object.hasOwn(ordered, name)) ordered[name] = value === true;
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
    policy: {
      enforcement: row.policy_enforcement,
      grace_days: Number(row.policy_grace_days),
      escalate_after_days: row.policy_escalate_after_days === null ? null : Number(row.policy_escalate_after_days),
      notices: normaliseNotices(row.policy_notices ?? []),
    },
    livemode: row.livemode,
    mode: row.mode,
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}

export function credential<T>(value: T, expiresAt: Date | null): Credential<T> {
  return { value, expiresAtMs: expiresAt === null ? null : new Date(expiresAt).getTime() };
}

type TenantsWhich = null | readonly number[] | { slug: string } | { tiers: readonly string[] };

/** The tenants of one read, and those of them that could not be prepared. */
export interface TenantsRead {
  tenants: TenantAuth[];
  unreadable: UnreadableTenant[];
}

/**
 * Why a tenant could not be prepared, fit for a log line: the cipher's errors name the row,
 * the kind and the key id (never the value); any other error is named by its class only, as
 * its message might quote what the row holds.
 */
function unreadableReason(err: unknown): string {
  if (err instanceof SecretDecryptionError || err instanceof UnknownEncryptionKeyError) return err.message;
  return `its row could not be prepared (${err instanceof Error ? err.name : typeof err})`;
}

/**
 * Tenants as the lookup uses them (`prepareTenant`): all of them, or those of the given ids,
 * slug or tiers. HMAC secrets are opened here, once per read, so that lookups never decrypt.
 *
 * A tenant whose row does not prepare (a sealed secret that does not open: altered, or copied
 * from another tenant's row) is set aside in `unreadable`, and every other tenant is read as
 * usual: one bad row must never stop the read model from following the others. A failure of
 * the query itself still throws.
 */
export async function readTenantsChecked(q: Queryable, secrets: SecretBox, which: TenantsWhich): Promise<TenantsRead> {
  const read = await readTenants(q, secrets, which);
  return {
    tenants: read.tenants,
    unreadable: read.failed.map(({ id, slug, error, credentialIds }) => ({
      id,
      slug,
      reason: `${unreadableReason(error)}${credentialIds.length > 0 ? ` (tenant_credentials id ${credentialIds.join(', ')})` : ''}`,
    })),
  };
}

/** A read with each failed tenant's error itself (its class tells a caller what failed). */
interface RawRead {
  tenants: TenantAuth[];
  /** `credentialIds`: the rows of tenant_credentials that do not open, for the operator to fix. */
  failed: { id: number; slug: string; error: unknown; credentialIds: number[] }[];
}

/** The ids of a tenant's sealed credentials that do not open (only asked once its row failed). */
function unopenable(own: readonly (CredentialRow & { id: number })[], tenantId: number, secrets: SecretBox): number[] {
  const ids: number[] = [];
  for (const c of own) {
    if (c.kind !== 'hmac_secret' || c.secret === null) continue;
    try {
      secrets.open(c.secret, { tenantId, kind: 'hmac_secret' });
    } catch {
      ids.push(c.id);
    }
  }
  return ids;
}

async function readTenants(q: Queryable, secrets: SecretBox, which: TenantsWhich): Promise<RawRead> {
  // A twin's id (the other mode's space) reads its tenant: the two spaces are prepared together.
  let where = ' WHERE t.mode_of IS NULL';
  let params: unknown[] = [];
  if (Array.isArray(which))
    [where, params] = [
      ' WHERE t.mode_of IS NULL AND t.id IN (SELECT COALESCE(x.mode_of, x.id) FROM tenants x WHERE x.id = ANY($1::int[]))',
      [which],
    ];
  else if (which !== null && 'slug' in which)
    [where, params] = [' WHERE t.mode_of IS NULL AND t.slug = $1', [which.slug]];
  else if (which !== null && 'tiers' in which)
    [where, params] = [' WHERE t.mode_of IS NULL AND t.tier = ANY($1::text[])', [which.tiers]];
  const rows = await q.query<TenantRow>(`${TENANT_SELECT}${where}`, params);
  const read: RawRead = { tenants: [], failed: [] };
  if (rows.length === 0) return read;
  const twins = await q.query<{ id: number; mode_of: number; mode: Mode }>(
    'SELECT id, mode_of, mode FROM tenants WHERE mode_of = ANY($1::int[])',
    [rows.map((r) => r.id)],
  );
  const twinOf = new Map(twins.map((t) => [t.mode_of, t]));
  const ids = [...rows.map((r) => r.id), ...twins.map((t) => t.id)];
  const creds = await q.query<CredentialRow & { id: number; tenant_id: number }>(
    `SELECT id, tenant_id, kind, key_hash, secret, expires_at FROM tenant_credentials
     WHERE tenant_id = ANY($1::int[]) AND kind IN ('publishable_key', 'hmac_secret') ORDER BY id`,
    [ids],
  );
  const byTenant = new Map<number, (CredentialRow & { id: number })[]>();
  for (const c of creds) {
    const list = byTenant.get(c.tenant_id);
    if (list) list.push(c);
    else byTenant.set(c.tenant_id, [c]);
  }
  const keys = await readSecretKeyAuth(q, ids);
  for (const row of rows) {
    const own = byTenant.get(row.id) ?? [];
    try {
      const twin = twinOf.get(row.id);
      const other =
        twin === undefined
          ? null
          : prepareRow(
              row,
              { id: twin.id, mode: twin.mode },
              own,
              byTenant.get(twin.id) ?? [],
              secrets,
              keys.get(twin.id) ?? [],
              null,
            );
      read.tenants.push(
        prepareRow(row, { id: row.id, mode: row.mode }, own, own, secrets, keys.get(row.id) ?? [], other),
      );
    } catch (error) {
      read.failed.push({ id: row.id, slug: row.slug, error, credentialIds: unopenable(own, row.id, secrets) });
    }
  }
  return read;
}

/**
 * One data space of a tenant as the lookup uses it: the tenant's settings and hmac secrets
 * (`own`: the tenant's row's credentials), the space's publishable and secret keys (`keysOf`:
 * the space's row's credentials). `twin`: the tenant's other space, on the tenant's own row's.
 */
function prepareRow(
  row: TenantRow,
  space: { id: number; mode: Mode },
  own: readonly CredentialRow[],
  keysOf: readonly CredentialRow[],
  secrets: SecretBox,
  secretKeys: readonly SecretKeyAuth[],
  twin: TenantAuth | null,
): TenantAuth {
  const tenant = toTenant(row);
  return prepareTenant({
    id: space.id,
    tenantId: tenant.id,
    mode: space.mode,
    twin,
    slug: tenant.slug,
    suspended: tenant.suspended,
    hmacRequired: tenant.hmacRequired,
    cardUpdateUrl: tenant.cardUpdateUrl,
    allowedOrigins: tenant.allowedOrigins,
    lookupsPerMinute: tenant.lookupsPerMinute,
    branding: tenant.branding,
    enforcement: tenant.policy.enforcement,
    cardExpiringNotice: tenant.policy.notices?.includes('card_expiring') === true,
    livemode: tenant.livemode,
    entitlements: tenant.entitlements,
    publishableKeyHashes: keysOf
      .filter((c) => c.kind === 'publishable_key' && c.key_hash !== null)
      .map((c) => credential(Buffer.from(c.key_hash ?? '', 'hex'), c.expires_at)),
    hmacSecrets: own
      .filter((c) => c.kind === 'hmac_secret' && c.secret !== null)
      .map((c) => credential(secrets.open(c.secret ?? '', { tenantId: row.id, kind: 'hmac_secret' }), c.expires_at)),
    secretKeys,
  });
}

/** As `readTenantsChecked`, for a caller that needs every tenant it asked for: an unreadable one throws its error. */
export async function readTenantsAuth(q: Queryable, secrets: SecretBox, which: TenantsWhich): Promise<TenantAuth[]> {
  const read = await readTenants(q, secrets, which);
  const [bad] = read.failed;
  if (bad !== undefined) throw bad.error;
  return read.tenants;
}
