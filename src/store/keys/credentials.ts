import type { SecretBox } from '../../secrets/cipher.js';
import type { Queryable } from '../db/db.js';
import type { CredentialChange, CredentialRotation, RecordedCredentialKind } from './types.js';

/** A rotation of a tenant credential, or of one downstream webhook endpoint's signing secret. */
export type Rotation =
  CredentialRotation | { kind: 'webhook_signing_secret'; material: string; overlapS: number; endpointId: number };

/**
 * Adds a credential, in the caller's transaction, and makes every current one it replaces
 * (the tenant's of the same kind, or the endpoint's) expire `overlapS` seconds from `now`.
 * Two at most are in force during a rotation: the new one, and the one it replaces for the
 * overlap; one already on its way out (a rotation in progress) ends now.
 */
export async function rotateIn(
  tx: Queryable,
  tenantId: number,
  rotation: Rotation,
  now: Date,
  secrets: SecretBox,
): Promise<void> {
  const endpointId = 'endpointId' in rotation ? rotation.endpointId : null;
  await tx.query(
    `UPDATE tenant_credentials
     SET expires_at = CASE WHEN expires_at IS NULL THEN $3::timestamptz + make_interval(secs => $4) ELSE $3::timestamptz END
     WHERE tenant_id = $1 AND kind = $2 AND endpoint_id IS NOT DISTINCT FROM $5::integer AND (expires_at IS NULL OR expires_at > $3)`,
    [tenantId, rotation.kind, now, rotation.overlapS, endpointId],
  );
  // Publishable keys are kept as their digests; the other kinds must stay usable: sealed.
  const isHash = rotation.kind === 'publishable_key';
  await tx.query(
    'INSERT INTO tenant_credentials (tenant_id, kind, key_hash, secret, endpoint_id, created_at) VALUES ($1, $2, $3, $4, $5, $6)',
    [
      tenantId,
      rotation.kind,
      isHash ? rotation.material : null,
      rotation.kind === 'publishable_key' ? null : secrets.seal(rotation.material, { tenantId, kind: rotation.kind }),
      endpointId,
      now,
    ],
  );
  if ('by' in rotation && rotation.by !== undefined) await recordChange(tx, tenantId, rotation.kind, rotation.by, now);
}

/**
 * Records who changed a credential (migration 021), in the caller's transaction: the operator,
 * or the key with its prefix and name as they are now (a revoked key is deleted; its record
 * stays). A key revoked while its request was under way is still named by its id.
 */
export async function recordChange(
  tx: Queryable,
  tenantId: number,
  kind: RecordedCredentialKind,
  by: NonNullable<CredentialRotation['by']>,
  now: Date,
): Promise<void> {
  const keyId = by.kind === 'key' ? by.keyId : null;
  await tx.query(
    `INSERT INTO tenant_credential_changes (tenant_id, kind, at, by_operator, secret_key_id, secret_key_prefix, secret_key_name)
     SELECT $1, $2, $3, $4::text IS NULL, $4::text,
       CASE WHEN $4::text IS NULL THEN NULL ELSE COALESCE(k.prefix, '') END,
       CASE WHEN $4::text IS NULL THEN NULL ELSE COALESCE(k.name, '') END
     FROM (SELECT 1) AS one LEFT JOIN tenant_secret_keys k ON k.id = $4::text AND k.tenant_id = $1`,
    [tenantId, kind, now, keyId],
  );
}

interface ChangeRow {
  kind: RecordedCredentialKind;
  at: Date;
  secret_key_id: string | null;
  secret_key_prefix: string | null;
  secret_key_name: string | null;
}

/** A tenant's recorded changes of one kind of credential, the latest first. */
export async function credentialChanges(
  db: Queryable,
  tenantId: number,
  kind: RecordedCredentialKind,
  limit: number,
): Promise<CredentialChange[]> {
  const rows = await db.query<ChangeRow>(
    `SELECT kind, at, secret_key_id, secret_key_prefix, secret_key_name FROM tenant_credential_changes
     WHERE tenant_id = $1 AND kind = $2 ORDER BY at DESC, id DESC LIMIT $3`,
    [tenantId, kind, limit],
  );
  return rows.map((r) => ({
    kind: r.kind,
    at: new Date(r.at),
    by:
      r.secret_key_id === null
        ? { kind: 'operator' }
        : { kind: 'key', id: r.secret_key_id, prefix: r.secret_key_prefix ?? '', name: r.secret_key_name ?? '' },
  }));
}
