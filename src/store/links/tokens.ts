import { createHash, randomInt } from 'node:crypto';
import { LINK_RENEW_AHEAD_MS, LINK_TOKEN_LENGTH, LINK_TTL_MS, linkUrl } from '../../domain/links.js';
import type { LinkKind } from '../../domain/links.js';
import type { Queryable } from '../db/db.js';

/**
 * Pay and card links through Dunwall in SQL (migration 024). A link is made on the write that
 * answers its subscriber (episodes.ts reads invoice pages through `payLinks`), never on a
 * lookup: the read model then holds the link as it holds a stored hosted invoice URL, and the
 * lookup's bytes are built once per change.
 *
 * The token is 32 characters drawn uniformly from 62 by the CSPRNG (190 bits). It is looked up
 * by its SHA-256 digest, so the database's index compares digests, not the token; the link's
 * text is kept beside it so that the next write of the same customer and invoice hands out the
 * same link (the answer does not change for nothing). That text is worth what the stored
 * hosted invoice URL beside it is worth: a way to a page where this customer pays.
 */

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** Forgotten this long after they expired: a late open still finds the 410 page either way. */
export const FORGET_AFTER_MS = 30 * 86_400_000;

function newToken(): string {
  let token = '';
  for (let i = 0; i < LINK_TOKEN_LENGTH; i += 1) token += BASE62[randomInt(62)];
  return token;
}

export function tokenDigest(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest();
}

/** Whether the space has a Stripe API key (its set and removal start the rewrite of the space's links). */
export async function spaceHasStripeKey(tx: Queryable, spaceId: number): Promise<boolean> {
  const [row] = await tx.query('SELECT 1 FROM tenant_stripe_api_keys WHERE tenant_id = $1', [spaceId]);
  return row !== undefined;
}

/** The public address links of the space are made with; null: its links are the stored pages. */
export async function spaceLinkBase(tx: Queryable, spaceId: number): Promise<string | null> {
  const [row] = await tx.query<{ public_url: string | null }>('SELECT public_url FROM customer_link_settings');
  const base = row?.public_url ?? null;
  if (base === null) return null;
  return (await spaceHasStripeKey(tx, spaceId)) ? base : null;
}

/**
 * The pay link of the customer's invoice at `now`: the one already made when it has more than
 * the renewal margin left and names the current address, else a new one.
 */
export function payLink(
  tx: Queryable,
  spaceId: number,
  customerId: string,
  invoiceId: string,
  base: string,
  now: Date,
): Promise<string> {
  return customerLink(tx, spaceId, customerId, 'pay', invoiceId, base, now);
}

/** The customer's card link at `now` (bound to no invoice), kept or made as a pay link is. */
export function cardLink(tx: Queryable, spaceId: number, customerId: string, base: string, now: Date): Promise<string> {
  return customerLink(tx, spaceId, customerId, 'card', null, base, now);
}

async function customerLink(
  tx: Queryable,
  spaceId: number,
  customerId: string,
  kind: LinkKind,
  invoiceId: string | null,
  base: string,
  now: Date,
): Promise<string> {
  const [current] = await tx.query<{ url: string }>(
    `SELECT url FROM customer_links
     WHERE tenant_id = $1 AND processor_customer_id = $2 AND kind = $3 AND invoice_id IS NOT DISTINCT FROM $4
       AND expires_at > $5 AND starts_with(url, $6)
     ORDER BY expires_at DESC LIMIT 1`,
    [spaceId, customerId, kind, invoiceId, new Date(now.getTime() + LINK_RENEW_AHEAD_MS), `${base}/${kind}/`],
  );
  if (current !== undefined) return current.url;
  const token = newToken();
  const url = linkUrl(base, kind, token);
  await tx.query(
    `INSERT INTO customer_links (tenant_id, token_sha256, url, kind, processor_customer_id, invoice_id, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [spaceId, tokenDigest(token), url, kind, customerId, invoiceId, now, new Date(now.getTime() + LINK_TTL_MS)],
  );
  return url;
}
