import type { Mode } from '../../domain/types.js';
import type { SecretKeyStore } from './secret-keys.js';

export type CredentialKind = 'publishable_key' | 'hmac_secret' | 'stripe_webhook_secret';
/** What a change is recorded of (tenant_credential_changes): a credential, or the Stripe API key (migration 023). */
export type RecordedCredentialKind = CredentialKind | 'stripe_api_key';

/** A new credential; the current ones of its kind expire `overlapS` seconds later. */
export interface CredentialRotation {
  kind: CredentialKind;
  /** A SHA-256 hex digest for publishable keys, the secret itself otherwise. */
  material: string;
  overlapS: number;
  /** Who made it: recorded beside it (tenant_credential_changes, migration 021) when given. */
  by?: CredentialActor;
  /** A credential of one mode (the Stripe signing secret): the space it goes to; absent: the tenant's own row. */
  mode?: Mode;
}

/** The operator, or the tenant's secret key (by its id) that made a change. */
export type CredentialActor = { kind: 'operator' } | { kind: 'key'; keyId: string };

/** One recorded change of a credential: when, and the operator or the key (as it was then) that made it. */
export interface CredentialChange {
  kind: RecordedCredentialKind;
  at: Date;
  by: { kind: 'operator' } | { kind: 'key'; id: string; prefix: string; name: string };
}

/** What a tenant's credentials look like to an operator: never their material. */
export interface CredentialSummary {
  kind: CredentialKind;
  createdAt: Date;
  /** Null: current with no end; else it stops working then (a replaced key in its overlap). */
  expiresAt: Date | null;
}

/** A tenant's credentials (publishable key, HMAC secret, Stripe signing secret): rotated, listed, their changes recorded. */
export interface CredentialStore {
  /**
   * Adds a credential and makes every current one of the same kind expire `overlapS` seconds
   * from `now` (a rotation). The material is a hash for publishable keys, a secret otherwise.
   */
  rotateCredential(
    tenantId: number,
    kind: CredentialKind,
    material: string,
    overlapS: number,
    now: Date,
  ): Promise<void>;
  /** The tenant's credentials still in force at `now` (expired ones are left out). */
  listCredentials(tenantId: number, now: Date): Promise<CredentialSummary[]>;
  /** The tenant's recorded changes of credentials of `kind`, the latest first, `limit` at most. */
  credentialChanges(tenantId: number, kind: RecordedCredentialKind, limit: number): Promise<CredentialChange[]>;
}

/** What a tenant authenticates with: its credentials and its secret keys. */
export interface KeyStore extends CredentialStore, SecretKeyStore {}
