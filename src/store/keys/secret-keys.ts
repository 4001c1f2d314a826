import type { Scope } from '../../domain/keys.js';
import type { SecretKeyAuth } from '../../domain/types.js';
import type { Db, Queryable } from '../db/db.js';

/**
 * A tenant's secret keys (migration 013): digests only, found by digest. The read model holds
 * every key's digests (read with the tenant), so no request reads this table; only the
 * management calls below and the coarse record of last use do.
 */

/** A key as shown: never its secret, nor its digest. */
export interface SecretKeyRecord {
  id: string;
  name: string;
  scopes: Scope[];
  /** The first characters of the key in force, to tell keys apart. */
  prefix: string;
  createdAt: Date;
  expiresAt: Date | null;
  lastUsedAt: Date | null;
  /** When the key was last sent from a browser (and refused): a leaked key, to rotate. A rotation clears it. */
  seenInBrowserAt: Date | null;
  /** While a rotation's overlap runs: when the replaced secret stops working. */
  previousExpiresAt: Date | null;
}

export interface NewSecretKey {
  id: string;
  name: string;
  scopes: readonly Scope[];
  prefix: string;
  digest: Buffer;
  expiresAt: Date | null;
}

/** What one tenant may hold at once: enough for a key per service and environment, bounded so that a leaked `keys:write` key cannot fill the table. */
export const MAX_SECRET_KEYS_PER_TENANT = 50;

/** What the secret keys' consumers (admin and tenant API, usage recorder) take of the store. */
export interface SecretKeyStore {
  createSecretKey(tenantId: number, key: NewSecretKey, now: Date): Promise<SecretKeyRecord | 'limit'>;
  listSecretKeys(tenantId: number): Promise<SecretKeyRecord[]>;
  getSecretKey(tenantId: number, id: string): Promise<SecretKeyRecord | null>;
  /** Deletes the key: every instance refuses it once its read model has the change (a second at most). */
  revokeSecretKey(tenantId: number, id: string): Promise<boolean>;
  /** A new digest in force; the replaced one works until `now + overlapS` (or the key's own expiry, if sooner). */
  rotateSecretKey(
    tenantId: number,
    id: string,
    next: { digest: Buffer; prefix: string },
    overlapS: number,
    now: Date,
  ): Promise<SecretKeyRecord | null>;
  /** Records when keys were last used (only ever later): written in batches, never per request. */
  touchSecretKeys(uses: ReadonlyMap<string, Date>): Promise<void>;
  /** Records that keys were sent from a browser at these times (a use too): at most once a minute per key, never per request. */
  markSecretKeysSeenInBrowser(seen: ReadonlyMap<string, Date>): Promise<void>;
}

interface KeyRow {
  id: string;
  name: string;
  scopes: string[];
  prefix: string;
  created_at: Date;
  expires_at: Date | null;
  last_used_at: Date | null;
  seen_in_browser_at: Date | null;
  previous_expires_at: Date | null;
}

const COLUMNS =
  'id, name, scopes, prefix, created_at, expires_at, last_used_at, seen_in_browser_at, previous_expires_at';
const date = (d: Date | string | null): Date | null => (d === null ? null : new Date(d));

function toRecord(row: KeyRow): SecretKeyRecord {
  return {
    id: row.id,
    name: row.name,
    scopes: row.scopes as Scope[],
    prefix: row.prefix,
    createdAt: new Date(row.created_at),
    expiresAt: date(row.expires_at),
    lastUsedAt: date(row.last_used_at),
    seenInBrowserAt: date(row.seen_in_browser_at),
    previousExpiresAt: date(row.previous_expires_at),
  };
}

export async function createSecretKey(
  db: Db,
  tenantId: number,
  key: NewSecretKey,
  now: Date,
): Promise<SecretKeyRecord | 'limit'> {
  return db.transaction(async (tx) => {
    // The tenant's row locked first: two creations at once count one after the other, so the limit holds.
    await tx.query('SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE', [tenantId]);
    const [count] = await tx.query<{ n: string }>('SELECT count(*) AS n FROM tenant_secret_keys WHERE tenant_id = $1', [
      tenantId,
    ]);
    if (Number(count?.n ?? 0) >= MAX_SECRET_KEYS_PER_TENANT) return 'limit';
    const [row] = await tx.query<KeyRow>(
      `INSERT INTO tenant_secret_keys (id, tenant_id, name, scopes, prefix, digest, created_at, expires_at)
       VALUES ($1, $2, $3, $4::text[], $5, $6, $7, $8) RETURNING ${COLUMNS}`,
      [key.id, tenantId, key.name, key.scopes, key.prefix, key.digest, now, key.expiresAt],
    );
    if (!row) throw new Error('secret key insert returned nothing');
    return toRecord(row);
  });
}

export async function listSecretKeys(q: Queryable, tenantId: number): Promise<SecretKeyRecord[]> {
  const rows = await q.query<KeyRow>(
    `SELECT ${COLUMNS} FROM tenant_secret_keys WHERE tenant_id = $1 ORDER BY created_at, id`,
    [tenantId],
  );
  return rows.map(toRecord);
}

export async function getSecretKey(q: Queryable, tenantId: number, id: string): Promise<SecretKeyRecord | null> {
  const [row] = await q.query<KeyRow>(`SELECT ${COLUMNS} FROM tenant_secret_keys WHERE tenant_id = $1 AND id = $2`, [
    tenantId,
    id,
  ]);
  return row ? toRecord(row) : null;
}

export async function revokeSecretKey(q: Queryable, tenantId: number, id: string): Promise<boolean> {
  const rows = await q.query('DELETE FROM tenant_secret_keys WHERE tenant_id = $1 AND id = $2 RETURNING id', [
    tenantId,
    id,
  ]);
  return rows.length > 0;
}

export async function rotateSecretKey(
  q: Queryable,
  tenantId: number,
  id: string,
  next: { digest: Buffer; prefix: string },
  overlapS: number,
  now: Date,
): Promise<SecretKeyRecord | null> {
  const until = new Date(now.getTime() + overlapS * 1000);
  const [row] = await q.query<KeyRow>(
    `UPDATE tenant_secret_keys
     SET previous_digest = CASE WHEN $5::timestamptz > $6 THEN digest END,
         previous_expires_at = CASE WHEN $5::timestamptz > $6 THEN LEAST($5::timestamptz, COALESCE(expires_at, $5::timestamptz)) END,
         digest = $3, prefix = $4,
         -- The leaked secret is replaced: seen again (during the overlap), it is marked again.
         seen_in_browser_at = NULL
     WHERE tenant_id = $1 AND id = $2 RETURNING ${COLUMNS}`,
    [tenantId, id, next.digest, next.prefix, until, now],
  );
  return row ? toRecord(row) : null;
}

export async function touchSecretKeys(q: Queryable, uses: ReadonlyMap<string, Date>): Promise<void> {
  if (uses.size === 0) return;
  await q.query(
    `UPDATE tenant_secret_keys k SET last_used_at = u.at
     FROM unnest($1::text[], $2::timestamptz[]) AS u (id, at)
     WHERE k.id = u.id AND (k.last_used_at IS NULL OR k.last_used_at < u.at)`,
    [[...uses.keys()], [...uses.values()]],
  );
}

export async function markSecretKeysSeenInBrowser(q: Queryable, seen: ReadonlyMap<string, Date>): Promise<void> {
  if (seen.size === 0) return;
  await q.query(
    `UPDATE tenant_secret_keys k
     SET seen_in_browser_at = GREATEST(k.seen_in_browser_at, u.at), last_used_at = GREATEST(k.last_used_at, u.at)
     FROM unnest($1::text[], $2::timestamptz[]) AS u (id, at)
     WHERE k.id = u.id`,
    [[...seen.keys()], [...seen.values()]],
  );
}

/** Every digest of the tenants' keys as the read model holds them: a rotated key's replaced digest until its overlap ends. */
export async function readSecretKeyAuth(
  q: Queryable,
  tenantIds: readonly number[],
): Promise<Map<number, SecretKeyAuth[]>> {
  const rows = await q.query<{
    id: string;
    tenant_id: number;
    scopes: string[];
    digest: Uint8Array;
    previous_digest: Uint8Array | null;
    previous_expires_at: Date | null;
    expires_at: Date | null;
  }>(
    'SELECT id, tenant_id, scopes, digest, previous_digest, previous_expires_at, expires_at FROM tenant_secret_keys WHERE tenant_id = ANY($1::int[])',
    [tenantIds],
  );
  const byTenant = new Map<number, SecretKeyAuth[]>();
  for (const row of rows) {
    const scopes = new Set(row.scopes as Scope[]);
    const expiresAtMs = row.expires_at === null ? null : new Date(row.expires_at).getTime();
    const list = byTenant.get(row.tenant_id) ?? [];
    list.push({ id: row.id, digest: Buffer.from(row.digest), scopes, expiresAtMs });
    if (row.previous_digest !== null && row.previous_expires_at !== null) {
      list.push({
        id: row.id,
        digest: Buffer.from(row.previous_digest),
        scopes,
        expiresAtMs: new Date(row.previous_expires_at).getTime(),
      });
    }
    byTenant.set(row.tenant_id, list);
  }
  return byTenant;
}
