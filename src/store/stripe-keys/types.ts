import type { CredentialActor } from '../keys/types.js';

/** What is shown of a space's Stripe API key: never the key. */
export interface StripeApiKeySummary {
  /** Its first characters (`rk_live_51Ab`), to tell keys apart. */
  prefix: string;
  setAt: Date;
}

/**
 * The Stripe API key of each data space (migration 023): sealed at rest, opened only to ask
 * Stripe. `spaceId` is the row whose subscribers are of the key's mode. Every set and removal
 * is recorded with who made it, beside the other credentials' changes.
 */
export interface StripeApiKeyStore {
  /** Sets or replaces the space's key; false: no such space. */
  setStripeApiKey(spaceId: number, key: string, prefix: string, now: Date, by: CredentialActor): Promise<boolean>;
  /** Removes the space's key; false: it had none. */
  deleteStripeApiKey(spaceId: number, now: Date, by: CredentialActor): Promise<boolean>;
  /** The prefix and date of the space's key; null: none. */
  stripeApiKeyOf(spaceId: number): Promise<StripeApiKeySummary | null>;
  /** The key itself, to call Stripe with; null: none. Never logged, never answered. */
  openStripeApiKey(spaceId: number): Promise<string | null>;
}
