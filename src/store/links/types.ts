import type { LinkDestination, LinkKind } from '../../domain/links.js';

/** A token as its link resolves: what it is bound to, and what the fallback may use. */
export interface ResolvedLink {
  /** The data space (the tenants row of the mode whose data the customer is). */
  spaceId: number;
  kind: LinkKind;
  customerId: string;
  /** The invoice of a pay link; null for a card link. */
  invoiceId: string | null;
  /** Stripe's hosted page of the invoice as last stored, unless it is known to have expired by `now`. */
  storedPage: string | null;
}

export interface LinkOpen {
  spaceId: number;
  kind: LinkKind;
  customerId: string;
  invoiceId: string | null;
  at: Date;
  sentTo: LinkDestination;
}

/** Pay and card links through Dunwall (docs/links.md): their tokens, their opens, their renewal. */
export interface CustomerLinks {
  /** The link a token names, valid at `now`; null: unknown, forged or expired. */
  resolve(token: string, now: Date): Promise<ResolvedLink | null>;
  recordOpen(open: LinkOpen): Promise<void>;
  /**
   * Records DUNWALL_PUBLIC_URL (null: unset). When it differs from the address the stored
   * links were made with, every space with links is answered again (a policy sweep), so that
   * the links name the new address. True: it changed.
   */
  setPublicUrl(url: string | null, now: Date): Promise<boolean>;
  /** Whether any space has a Stripe API key (then DUNWALL_PUBLIC_URL must be set). */
  anySpaceWithKey(): Promise<boolean>;
  /**
   * Gives a new link to every subscriber still answered with one that expires within the
   * renewal margin, at most `limit` of them; and forgets links expired a margin ago. Returns how
   * many subscribers got a new link.
   */
  renewDue(now: Date, limit: number): Promise<number>;
}
