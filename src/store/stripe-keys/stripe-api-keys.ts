import type { SecretBox } from '../../secrets/cipher.js';
import type { Commits } from '../changes/commits.js';
import type { Db } from '../db/db.js';
import { sweepSpacesAgain } from '../maintenance/sweeps.js';
import { recordChange } from '../keys/credentials.js';
import type { CredentialActor } from '../keys/types.js';
import type { StripeApiKeyStore, StripeApiKeySummary } from './types.js';

const KIND = 'stripe_api_key' as const;

/** The spaces' Stripe API keys in SQL, sealed by the store's SecretBox (bound to the space row and the kind). */
export class SqlStripeApiKeys implements StripeApiKeyStore {
  constructor(
    private readonly db: Db,
    private readonly secrets: SecretBox,
    private readonly commits: Commits,
  ) {}

  async setStripeApiKey(
    spaceId: number,
    key: string,
    prefix: string,
    now: Date,
    by: CredentialActor,
  ): Promise<boolean> {
    const sealed = this.secrets.seal(key, { tenantId: spaceId, kind: KIND });
    const done = await this.db.transaction(async (tx) => {
      // The space row is locked so that a tenant deleted meanwhile is not given a key (the insert would fail on it).
      const [space] = await tx.query<{ id: number }>('SELECT id FROM tenants WHERE id = $1 FOR UPDATE', [spaceId]);
      if (space === undefined) return false;
      await tx.query(
        `INSERT INTO tenant_stripe_api_keys (tenant_id, secret, prefix, set_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (tenant_id) DO UPDATE SET secret = EXCLUDED.secret, prefix = EXCLUDED.prefix, set_at = EXCLUDED.set_at`,
        [spaceId, sealed, prefix, now],
      );
      await recordChange(tx, spaceId, KIND, by, now);
      // Whether a space has a key decides what its answers carry: every subscriber is answered anew.
      await sweepSpacesAgain(tx, 'SELECT $2::int AS tenant_id', now, [spaceId]);
      return true;
    });
    if (done) this.commits.emit();
    return done;
  }

  async deleteStripeApiKey(spaceId: number, now: Date, by: CredentialActor): Promise<boolean> {
    const done = await this.db.transaction(async (tx) => {
      const rows = await tx.query('DELETE FROM tenant_stripe_api_keys WHERE tenant_id = $1 RETURNING tenant_id', [
        spaceId,
      ]);
      if (rows.length === 0) return false;
      await recordChange(tx, spaceId, KIND, by, now);
      // Whether a space has a key decides what its answers carry: every subscriber is answered anew.
      await sweepSpacesAgain(tx, 'SELECT $2::int AS tenant_id', now, [spaceId]);
      return true;
    });
    if (done) this.commits.emit();
    return done;
  }

  async stripeApiKeyOf(spaceId: number): Promise<StripeApiKeySummary | null> {
    const [row] = await this.db.query<{ prefix: string; set_at: Date }>(
      'SELECT prefix, set_at FROM tenant_stripe_api_keys WHERE tenant_id = $1',
      [spaceId],
    );
    return row === undefined ? null : { prefix: row.prefix, setAt: new Date(row.set_at) };
  }

  async openStripeApiKey(spaceId: number): Promise<string | null> {
    const [row] = await this.db.query<{ secret: string }>(
      'SELECT secret FROM tenant_stripe_api_keys WHERE tenant_id = $1',
      [spaceId],
    );
    return row === undefined ? null : this.secrets.open(row.secret, { tenantId: spaceId, kind: KIND });
  }
}
