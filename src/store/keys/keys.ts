import type { SecretBox } from '../../secrets/cipher.js';
import type { Commits } from '../changes/commits.js';
import type { Db } from '../db/db.js';
import { credentialChanges, rotateIn } from './credentials.js';
import {
  createSecretKey,
  getSecretKey,
  listSecretKeys,
  markSecretKeysSeenInBrowser,
  revokeSecretKey,
  rotateSecretKey,
  touchSecretKeys,
} from './secret-keys.js';
import type { NewSecretKey, SecretKeyRecord } from './secret-keys.js';
import type { CredentialChange, CredentialKind, CredentialSummary, KeyStore, RecordedCredentialKind } from './types.js';

/** Tenant credentials and secret keys in SQL. */
export class SqlKeys implements KeyStore {
  constructor(
    private readonly db: Db,
    private readonly secrets: SecretBox,
    private readonly commits: Commits,
  ) {}

  async rotateCredential(
    tenantId: number,
    kind: CredentialKind,
    material: string,
    overlapS: number,
    now: Date,
  ): Promise<void> {
    await this.db.transaction((tx) => rotateIn(tx, tenantId, { kind, material, overlapS }, now, this.secrets));
    this.commits.emit();
  }

  async listCredentials(tenantId: number, now: Date): Promise<CredentialSummary[]> {
    const rows = await this.db.query<{ kind: CredentialKind; created_at: Date; expires_at: Date | null }>(
      `SELECT kind, created_at, expires_at FROM tenant_credentials
       WHERE tenant_id = $1 AND kind <> 'webhook_signing_secret' AND (expires_at IS NULL OR expires_at > $2) ORDER BY kind, created_at`,
      [tenantId, now],
    );
    return rows.map((r) => ({
      kind: r.kind,
      createdAt: new Date(r.created_at),
      expiresAt: r.expires_at === null ? null : new Date(r.expires_at),
    }));
  }

  credentialChanges(tenantId: number, kind: RecordedCredentialKind, limit: number): Promise<CredentialChange[]> {
    return credentialChanges(this.db, tenantId, kind, limit);
  }

  async createSecretKey(tenantId: number, key: NewSecretKey, now: Date): Promise<SecretKeyRecord | 'limit'> {
    const created = await createSecretKey(this.db, tenantId, key, now);
    if (created !== 'limit') this.commits.emit();
    return created;
  }

  listSecretKeys(tenantId: number): Promise<SecretKeyRecord[]> {
    return listSecretKeys(this.db, tenantId);
  }

  getSecretKey(tenantId: number, id: string): Promise<SecretKeyRecord | null> {
    return getSecretKey(this.db, tenantId, id);
  }

  async revokeSecretKey(tenantId: number, id: string): Promise<boolean> {
    const gone = await revokeSecretKey(this.db, tenantId, id);
    if (gone) this.commits.emit();
    return gone;
  }

  async rotateSecretKey(
    tenantId: number,
    id: string,
    next: { digest: Buffer; prefix: string },
    overlapS: number,
    now: Date,
  ): Promise<SecretKeyRecord | null> {
    const rotated = await rotateSecretKey(this.db, tenantId, id, next, overlapS, now);
    if (rotated !== null) this.commits.emit();
    return rotated;
  }

  touchSecretKeys(uses: ReadonlyMap<string, Date>): Promise<void> {
    return touchSecretKeys(this.db, uses);
  }

  markSecretKeysSeenInBrowser(seen: ReadonlyMap<string, Date>): Promise<void> {
    return markSecretKeysSeenInBrowser(this.db, seen);
  }
}
