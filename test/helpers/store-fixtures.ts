import { sha256 } from '../../src/domain/keys.js';
import type { NewTenant } from '../../src/store/store.js';

/** A tenant as the store takes it: the starter tier, no options, a key and secret derived from the slug. */
export function newTenant(slug: string, extra: Partial<NewTenant> = {}): NewTenant {
  return {
    slug,
    tier: 'starter',
    cardUpdateUrl: null,
    hmacRequired: false,
    allowedOrigins: null,
    publishableKeyHash: sha256(`pk_${slug}_key_0000000000000000000`).toString('hex'),
    hmacSecret: `secret-${slug}`,
    ...extra,
  };
}
