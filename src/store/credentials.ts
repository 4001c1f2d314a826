import type { SecretBox } from '../secrets/cipher.js';
import type { Queryable } from './db.js';
import type { CredentialRotation } from './store.js';

/** A rotation of a tenant credential, or of one downstream webhook endpoint's signing secret. */
export type Rotation = CredentialRotation | { kind: 'webhook_signing_secret'; material: string; overlapS: number; endpointId: number };

/**
 * Adds a credential, in the caller's transaction, and makes every current one it replaces
 * (the tenant's of the same kind, or the endpoint's) expire `overlapS` seconds from `now`.
 * Two at most are in force during a rotation: the new one, and the one it replaces for the
 * overlap; one already on its way out (a rotation in progress) ends now.
 */
export async function rotateIn(tx: Queryable, tenantId: number, rotation: Rotation, now: Date, secrets: SecretBox): Promise<void> {
  const endpointId = 'endpointId' in rotation ? rotation.endpointId : null;
  await tx.query(
    `UPDATE tenant_credentials
     SET expires_at = CASE WHEN expires_at IS NULL THEN $3::timestamptz + make_interval(secs => $4) ELSE $3::timestamptz END
     WHERE tenant_id = $1 AND kind = $2 AND endpoint_id IS NOT DISTINCT FROM $5::integer AND (expires_at IS NULL OR expires_at > $3)`,
    [tenantId, rotation.kind, now, rotation.overlapS, endpointId],
  );
  // Publishable keys are kept as their digests; the other kinds must stay usable: sealed.
  const isHash = rotation.kind === 'publishable_key';
  await tx.query('INSERT INTO tenant_credentials (tenant_id, kind, key_hash, secret, endpoint_id, created_at) VALUES ($1, $2, $3, $4, $5, $6)', [
    tenantId,
    rotation.kind,
    isHash ? rotation.material : null,
    rotation.kind === 'publishable_key' ? null : secrets.seal(rotation.material, { tenantId, kind: rotation.kind }),
    endpointId,
    now,
  ]);
}
