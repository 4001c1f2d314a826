import { UnknownEncryptionKeyError, sealedKeyId } from '../../secrets/cipher.js';
import type { SealedKind, SecretBox } from '../../secrets/cipher.js';
import type { Db, Queryable } from '../db/db.js';

/** How the stored secrets are kept: how many in clear, how many under each key id. */
export interface SecretCensus {
  clear: number;
  byKeyId: Map<string, number>;
  /** Values that start like sealed ones but are not in a known format. */
  unreadable: number;
}

/** Counts only: no secret leaves the database for this. */
export async function secretCensus(q: Queryable): Promise<SecretCensus> {
  const rows = await q.query<{ sealed: boolean; key_id: string | null; n: number }>(
    `SELECT secret LIKE 'enc:%' AS sealed, substring(secret from '^enc:v1:([0-9a-f]{8}):') AS key_id, count(*)::int AS n
     FROM (SELECT secret FROM tenant_credentials WHERE secret IS NOT NULL
           UNION ALL SELECT secret FROM tenant_stripe_api_keys) AS stored
     GROUP BY 1, 2`,
  );
  const census: SecretCensus = { clear: 0, byKeyId: new Map(), unreadable: 0 };
  for (const row of rows) {
    if (!row.sealed) census.clear += row.n;
    else if (row.key_id === null) census.unreadable += row.n;
    else census.byKeyId.set(row.key_id, (census.byKeyId.get(row.key_id) ?? 0) + row.n);
  }
  return census;
}

/**
 * Fails at boot, naming the key ids, when a stored secret is sealed under a key that is not
 * configured: better than every request of that tenant failing later.
 */
export async function assertSecretKeysKnown(q: Queryable, secrets: SecretBox): Promise<SecretCensus> {
  const census = await secretCensus(q);
  if (census.unreadable > 0)
    throw new Error(
      `${census.unreadable} stored secret(s) are in an unknown format (a newer version of Dunwall wrote them?)`,
    );
  const unknown = [...census.byKeyId.keys()].filter((id) => !secrets.knows(id)).sort();
  if (unknown.length > 0) throw new UnknownEncryptionKeyError(unknown);
  return census;
}

export interface ReencryptCounts {
  /** The key every secret is now sealed under. */
  keyId: string;
  /** Clear values sealed for the first time. */
  encrypted: number;
  /** Values moved from a previous key to the current one. */
  reencrypted: number;
  /** Values already under the current key (each checked to open). */
  unchanged: number;
}

interface StoredSecretRow {
  /** The row's id in its table: tenant_credentials' id, or the space's id for a Stripe API key. */
  id: number;
  tenant_id: number;
  kind: SealedKind;
  secret: string;
}

/**
 * Seals every stored secret under the current key, in one transaction: clear ones and those
 * under a previous key are rewritten; any that does not open aborts the whole run.
 */
export async function reencryptSecrets(db: Db, secrets: SecretBox): Promise<ReencryptCounts> {
  const keyId = secrets.currentKeyId;
  if (keyId === null) throw new Error('re-encrypting needs a current key (DUNWALL_ENCRYPTION_KEY)');
  return db.transaction(async (tx) => {
    const credentials = await tx.query<StoredSecretRow>(
      `SELECT id, tenant_id, kind, secret FROM tenant_credentials
       WHERE secret IS NOT NULL AND kind IN ('hmac_secret', 'stripe_webhook_secret', 'webhook_signing_secret') ORDER BY id FOR UPDATE`,
    );
    const stripeApiKeys = await tx.query<StoredSecretRow>(
      `SELECT tenant_id AS id, tenant_id, 'stripe_api_key' AS kind, secret FROM tenant_stripe_api_keys ORDER BY tenant_id FOR UPDATE`,
    );
    const rows = [...credentials, ...stripeApiKeys];
    const sealed = rows.map((row) => {
      const owner = { tenantId: row.tenant_id, kind: row.kind };
      return { row, owner, from: sealedKeyId(row.secret, owner) };
    });
    // Every missing key is named at once, before anything is written.
    const unknown = new Set<string>();
    for (const { from } of sealed) if (from !== null && !secrets.knows(from)) unknown.add(from);
    if (unknown.size > 0) throw new UnknownEncryptionKeyError([...unknown].sort());

    const counts: ReencryptCounts = { keyId, encrypted: 0, reencrypted: 0, unchanged: 0 };
    for (const { row, owner, from } of sealed) {
      const secret = secrets.open(row.secret, owner);
      if (from === keyId) {
        counts.unchanged += 1;
        continue;
      }
      await tx.query(
        row.kind === 'stripe_api_key'
          ? 'UPDATE tenant_stripe_api_keys SET secret = $2 WHERE tenant_id = $1'
          : 'UPDATE tenant_credentials SET secret = $2 WHERE id = $1',
        [row.id, secrets.seal(secret, owner)],
      );
      if (from === null) counts.encrypted += 1;
      else counts.reencrypted += 1;
    }
    return counts;
  });
}
