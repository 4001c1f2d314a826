import { DEFAULT_POLICY } from '../../domain/policy.js';
import { sweepSpacesAgain } from '../maintenance/sweeps.js';
import { normaliseNotices } from '../../domain/notices.js';
import type { Policy } from '../../domain/policy.js';
import type { Entitlements, Mode } from '../../domain/types.js';
import type { SecretBox } from '../../secrets/cipher.js';
import type { Commits } from '../changes/commits.js';
import type { Db, Queryable } from '../db/db.js';
import { rotateIn } from '../keys/credentials.js';
import type { CredentialRotation } from '../keys/types.js';
import { tenantPolicy } from '../stripe/episodes.js';
import { TENANT_ROWS, TENANT_SELECT, orderEntitlements, toTenant } from './rows.js';
import type { TenantRow } from './rows.js';
import type {
  CreateTenantResult,
  DeleteTierResult,
  NewTenant,
  TenantRecord,
  TenantSettings,
  TenantStore,
  TierRecord,
  UpdateTenantResult,
} from './types.js';

const UNIQUE_VIOLATION = '23505';

/** A tenant re-read inside the transaction that wrote it. */
async function tenantById(tx: Queryable, id: number): Promise<TenantRecord> {
  const [row] = await tx.query<TenantRow>(`${TENANT_SELECT} WHERE t.id = $1`, [id]);
  if (!row) throw new Error('tenant vanished inside its own transaction');
  return toTenant(row);
}

interface TierRow {
  name: string;
  entitlements: Entitlements;
  created_at: Date;
  updated_at: Date;
}

function toTier(row: TierRow): TierRecord {
  return {
    name: row.name,
    entitlements: orderEntitlements(row.entitlements),
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}

function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === UNIQUE_VIOLATION;
}

/** Tenants and tiers in SQL. */
export class SqlTenants implements TenantStore {
  constructor(
    private readonly db: Db,
    private readonly secrets: SecretBox,
    private readonly commits: Commits,
  ) {}

  async countTenants(): Promise<number> {
    const [row] = await this.db.query<{ n: number }>('SELECT count(*)::int AS n FROM tenants WHERE mode_of IS NULL');
    return row?.n ?? 0;
  }

  async createTenant(t: NewTenant, now: Date): Promise<CreateTenantResult> {
    try {
      const result = await this.db.transaction(async (tx) => {
        const [tier] = await tx.query('SELECT 1 FROM tiers WHERE name = $1', [t.tier]);
        if (!tier) return { ok: false, error: 'unknown_tier' } as const;
        const [row] = await tx.query<{ id: number }>(
          `INSERT INTO tenants (slug, tier, card_update_url, hmac_required, allowed_origins, lookups_per_minute, branding, created_at, updated_at,
             policy_enforcement, policy_grace_days, policy_escalate_after_days, livemode, policy_notices, mode)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9, $10, $11, $12, $13, 'live') ON CONFLICT (slug) DO NOTHING RETURNING id`,
          [
            t.slug,
            t.tier,
            t.cardUpdateUrl,
            t.hmacRequired,
            JSON.stringify(t.allowedOrigins),
            t.lookupsPerMinute ?? null,
            JSON.stringify(t.branding ?? {}),
            now,
            (t.policy ?? DEFAULT_POLICY).enforcement,
            (t.policy ?? DEFAULT_POLICY).grace_days,
            (t.policy ?? DEFAULT_POLICY).escalate_after_days,
            t.livemode ?? null,
            normaliseNotices(t.policy?.notices ?? []),
          ],
        );
        if (!row) return { ok: false, error: 'exists' } as const;
        // The test mode's data space: a twin of the tenant's row (migration 022), its settings a copy.
        const [twin] = await tx.query<{ id: number }>(
          `INSERT INTO tenants (slug, tier, card_update_url, hmac_required, suspended, allowed_origins, lookups_per_minute,
             branding, policy_enforcement, policy_grace_days, policy_escalate_after_days, policy_notices, livemode,
             created_at, updated_at, mode, mode_of)
           SELECT slug || '~test', tier, card_update_url, hmac_required, suspended, allowed_origins, lookups_per_minute,
             branding, policy_enforcement, policy_grace_days, policy_escalate_after_days, policy_notices, livemode,
             created_at, updated_at, 'test', id
           FROM tenants WHERE id = $1 RETURNING id`,
          [row.id],
        );
        if (!twin) throw new Error('the test space of a new tenant was not created');
        await tx.query(
          `INSERT INTO tenant_credentials (tenant_id, kind, key_hash, secret, created_at) VALUES
           ($1, 'publishable_key', $2, NULL, $4), ($1, 'hmac_secret', NULL, $3, $4)`,
          [
            row.id,
            t.publishableKeyHash,
            this.secrets.seal(t.hmacSecret, { tenantId: row.id, kind: 'hmac_secret' }),
            now,
          ],
        );
        if (t.testPublishableKeyHash !== undefined)
          await tx.query(
            `INSERT INTO tenant_credentials (tenant_id, kind, key_hash, secret, created_at) VALUES ($1, 'publishable_key', $2, NULL, $3)`,
            [twin.id, t.testPublishableKeyHash, now],
          );
        return { ok: true, tenant: await tenantById(tx, row.id) } as const;
      });
      if (result.ok) this.commits.emit();
      return result;
    } catch (err) {
      // Two creations of one slug racing: the loser's insert waits, then violates the key.
      if (isUniqueViolation(err)) return { ok: false, error: 'exists' };
      throw err;
    }
  }

  async listTenants(): Promise<TenantRecord[]> {
    const rows = await this.db.query<TenantRow>(`${TENANT_ROWS} ORDER BY t.slug`);
    return rows.map(toTenant);
  }

  async getTenant(slug: string): Promise<TenantRecord | null> {
    const [row] = await this.db.query<TenantRow>(`${TENANT_ROWS} AND t.slug = $1`, [slug]);
    return row ? toTenant(row) : null;
  }

  async spaceOf(slug: string, mode: Mode): Promise<{ tenantId: number; spaceId: number } | null> {
    const [row] = await this.db.query<{ tenant_id: number; space_id: number }>(
      `SELECT t.id AS tenant_id, s.id AS space_id FROM tenants t
       JOIN tenants s ON (s.id = t.id OR s.mode_of = t.id) AND s.mode = $2
       WHERE t.slug = $1 AND t.mode_of IS NULL`,
      [slug, mode],
    );
    return row ? { tenantId: row.tenant_id, spaceId: row.space_id } : null;
  }

  async updateTenant(
    slug: string,
    patch: Partial<TenantSettings>,
    now: Date,
    rotation?: CredentialRotation,
  ): Promise<UpdateTenantResult> {
    const result = await this.db.transaction(async (tx) => {
      if (patch.tier !== undefined) {
        const [tier] = await tx.query('SELECT 1 FROM tiers WHERE name = $1', [patch.tier]);
        if (!tier) return { ok: false, error: 'unknown_tier' } as const;
      }
      // Each column is set only when its field is in the patch; $7 says which are.
      const [row] = await tx.query<{ id: number }>(
        `UPDATE tenants SET
           tier = CASE WHEN 'tier' = ANY($7::text[]) THEN $2 ELSE tier END,
           card_update_url = CASE WHEN 'card_update_url' = ANY($7::text[]) THEN $3 ELSE card_update_url END,
           hmac_required = CASE WHEN 'hmac_required' = ANY($7::text[]) THEN $4 ELSE hmac_required END,
           suspended = CASE WHEN 'suspended' = ANY($7::text[]) THEN $5 ELSE suspended END,
           allowed_origins = CASE WHEN 'allowed_origins' = ANY($7::text[]) THEN $6::jsonb ELSE allowed_origins END,
           lookups_per_minute = CASE WHEN 'lookups_per_minute' = ANY($7::text[]) THEN $9::integer ELSE lookups_per_minute END,
           branding = CASE WHEN 'branding' = ANY($7::text[]) THEN $10::jsonb ELSE branding END,
           livemode = CASE WHEN 'livemode' = ANY($7::text[]) THEN $11::boolean ELSE livemode END,
           updated_at = $8
         WHERE slug = $1 AND mode_of IS NULL RETURNING id`,
        [
          slug,
          patch.tier ?? null,
          patch.cardUpdateUrl ?? null,
          patch.hmacRequired ?? null,
          patch.suspended ?? null,
          patch.allowedOrigins === undefined ? null : JSON.stringify(patch.allowedOrigins),
          [
            ...(patch.tier !== undefined ? ['tier'] : []),
            ...(patch.cardUpdateUrl !== undefined ? ['card_update_url'] : []),
            ...(patch.hmacRequired !== undefined ? ['hmac_required'] : []),
            ...(patch.suspended !== undefined ? ['suspended'] : []),
            ...(patch.allowedOrigins !== undefined ? ['allowed_origins'] : []),
            ...(patch.lookupsPerMinute !== undefined ? ['lookups_per_minute'] : []),
            ...(patch.branding !== undefined ? ['branding'] : []),
            ...(patch.livemode !== undefined ? ['livemode'] : []),
          ],
          now,
          patch.lookupsPerMinute ?? null,
          patch.branding === undefined ? null : JSON.stringify(patch.branding),
          patch.livemode ?? null,
        ],
      );
      if (!row) return { ok: false, error: 'not_found' } as const;
      if (patch.policy !== undefined) await this.changePolicy(tx, row.id, patch.policy, now);
      if (rotation) {
        // A credential of one mode (a Stripe signing secret) goes to that mode's space; the others are the tenant's.
        const [space] =
          rotation.mode === undefined
            ? [{ id: row.id }]
            : await tx.query<{ id: number }>('SELECT id FROM tenants WHERE (id = $1 OR mode_of = $1) AND mode = $2', [
                row.id,
                rotation.mode,
              ]);
        if (!space) throw new Error('a tenant without the space of a mode');
        await rotateIn(tx, space.id, rotation, now, this.secrets);
      }
      return { ok: true, tenant: await tenantById(tx, row.id) } as const;
    });
    if (result.ok) this.commits.emit();
    return result;
  }

  /**
   * A new policy, and when it differs, a sweep that answers each of the tenant's subscribers
   * again under it (`sweepPolicy`): batched, so that no transaction holds the tenant while a
   * million subscribers are seen. A change during a sweep starts it over.
   */
  private async changePolicy(tx: Queryable, tenantId: number, patch: Partial<Policy>, now: Date): Promise<void> {
    // The tenant's row is locked by the update before this: two changes at once merge in turn.
    const current = await tenantPolicy(tx, tenantId);
    const policy: Policy = { ...current, ...patch };
    // Notices never change a status: they need no sweep, only the tenant's row (the read
    // model prepares the tenant again, and its answers with it).
    if (patch.notices !== undefined) {
      await tx.query('UPDATE tenants SET policy_notices = $2 WHERE id = $1', [
        tenantId,
        normaliseNotices(patch.notices),
      ]);
    }
    if (
      current.enforcement === policy.enforcement &&
      current.grace_days === policy.grace_days &&
      current.escalate_after_days === policy.escalate_after_days
    )
      return;
    await tx.query(
      'UPDATE tenants SET policy_enforcement = $2, policy_grace_days = $3, policy_escalate_after_days = $4 WHERE id = $1',
      [tenantId, policy.enforcement, policy.grace_days, policy.escalate_after_days],
    );
    // Both modes' subscribers are answered under the tenant's policy: a sweep for each space.
    await sweepSpacesAgain(tx, 'SELECT id AS tenant_id FROM tenants WHERE id = $2 OR mode_of = $2', now, [tenantId]);
  }

  async deleteTenant(tenantId: number): Promise<boolean> {
    const rows = await this.db.query<{ id: number }>('DELETE FROM tenants WHERE id = $1 RETURNING id', [tenantId]);
    if (rows.length > 0) this.commits.emit();
    return rows.length > 0;
  }

  async listTiers(): Promise<TierRecord[]> {
    const rows = await this.db.query<TierRow>(
      'SELECT name, entitlements, created_at, updated_at FROM tiers ORDER BY name',
    );
    return rows.map(toTier);
  }

  async putTier(name: string, entitlements: Entitlements, now: Date): Promise<TierRecord> {
    const [row] = await this.db.query<TierRow>(
      `INSERT INTO tiers (name, entitlements, created_at, updated_at) VALUES ($1, $2, $3, $3)
       ON CONFLICT (name) DO UPDATE SET entitlements = EXCLUDED.entitlements, updated_at = EXCLUDED.updated_at
       RETURNING name, entitlements, created_at, updated_at`,
      [name, JSON.stringify(entitlements), now],
    );
    if (!row) throw new Error('tier upsert returned no row');
    this.commits.emit();
    return toTier(row);
  }

  async deleteTier(name: string): Promise<DeleteTierResult> {
    return this.db.transaction(async (tx) => {
      const [tier] = await tx.query<{ name: string }>('SELECT name FROM tiers WHERE name = $1 FOR UPDATE', [name]);
      if (!tier) return 'not_found';
      const [used] = await tx.query<{ n: number }>('SELECT count(*)::integer AS n FROM tenants WHERE tier = $1', [
        name,
      ]);
      if (Number(used?.n ?? 0) > 0) return 'in_use';
      await tx.query('DELETE FROM tiers WHERE name = $1', [name]);
      return 'deleted';
    });
  }
}
