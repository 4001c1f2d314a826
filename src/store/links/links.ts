import type { ChangeCause } from '../../domain/history.js';
import { sweepSpacesAgain } from '../maintenance/sweeps.js';
import { LINK_RENEW_AHEAD_MS } from '../../domain/links.js';
import type { Commits } from '../changes/commits.js';
import type { Db } from '../db/db.js';
import { reanswerCustomer } from '../stripe/episodes.js';
import { relinkNotices } from '../stripe/notices.js';
import { FORGET_AFTER_MS, tokenDigest } from './tokens.js';
import type { CustomerLinks, LinkOpen, ResolvedLink } from './types.js';

/** Pay and card links through Dunwall in SQL (migration 024); their tokens are made in tokens.ts. */

const RENEW_CAUSE = (now: Date): ChangeCause => ({
  source: 'policy',
  eventId: null,
  eventType: null,
  declineCode: null,
  occurredAt: now,
  policyRule: 'policy_changed',
});

export class SqlLinks implements CustomerLinks {
  constructor(
    private readonly db: Db,
    private readonly commits: Commits,
  ) {}

  async resolve(token: string, now: Date): Promise<ResolvedLink | null> {
    const [row] = await this.db.query<{
      tenant_id: number;
      kind: 'pay' | 'card';
      processor_customer_id: string;
      invoice_id: string | null;
      stored_page: string | null;
    }>(
      `SELECT l.tenant_id, l.kind, l.processor_customer_id, l.invoice_id,
         CASE WHEN i.hosted_page_expires_at IS NULL OR i.hosted_page_expires_at > $2 THEN i.hosted_invoice_url END AS stored_page
       FROM customer_links l
       LEFT JOIN stripe_invoices i ON i.tenant_id = l.tenant_id AND i.invoice_id = l.invoice_id
       WHERE l.token_sha256 = $1 AND l.expires_at > $2`,
      [tokenDigest(token), now],
    );
    if (row === undefined) return null;
    return {
      spaceId: Number(row.tenant_id),
      kind: row.kind,
      customerId: row.processor_customer_id,
      invoiceId: row.invoice_id,
      storedPage: row.stored_page,
    };
  }

  async recordOpen(open: LinkOpen): Promise<void> {
    await this.db.query(
      `INSERT INTO customer_link_opens (tenant_id, processor_customer_id, kind, invoice_id, opened_at, sent_to)
       VALUES ($1, $2, $3, $4, $5, $6)`,
      [open.spaceId, open.customerId, open.kind, open.invoiceId, open.at, open.sentTo],
    );
  }

  async setPublicUrl(url: string | null, now: Date): Promise<boolean> {
    const changed = await this.db.transaction(async (tx) => {
      const [row] = await tx.query<{ public_url: string | null }>(
        'SELECT public_url FROM customer_link_settings FOR UPDATE',
      );
      if ((row?.public_url ?? null) === url) return false;
      await tx.query('UPDATE customer_link_settings SET public_url = $1', [url]);
      await sweepSpacesAgain(tx, 'SELECT tenant_id FROM tenant_stripe_api_keys', now);
      return true;
    });
    return changed;
  }

  async anySpaceWithKey(): Promise<boolean> {
    const [row] = await this.db.query('SELECT 1 FROM tenant_stripe_api_keys LIMIT 1');
    return row !== undefined;
  }

  async renewDue(now: Date, limit: number): Promise<number> {
    const renewed = await this.db.transaction(async (tx) => {
      const dueAt = new Date(now.getTime() + LINK_RENEW_AHEAD_MS);
      const due = await tx.query<{ tenant_id: number; processor_customer_id: string }>(
        `SELECT DISTINCT s.tenant_id, s.processor_customer_id
         FROM customer_links l JOIN subscribers s
           ON s.tenant_id = l.tenant_id AND s.processor_customer_id = l.processor_customer_id
             AND (s.pay_url = l.url OR s.card_url = l.url)
         WHERE l.expires_at <= $1
         ORDER BY s.tenant_id, s.processor_customer_id LIMIT $2`,
        [dueAt, limit],
      );
      // Locked in code-unit order, as every taker of several customers' locks does.
      const ordered = [...due].sort((a, b) =>
        a.tenant_id !== b.tenant_id
          ? Number(a.tenant_id) - Number(b.tenant_id)
          : a.processor_customer_id < b.processor_customer_id
            ? -1
            : 1,
      );
      for (const d of ordered)
        await reanswerCustomer(tx, Number(d.tenant_id), d.processor_customer_id, RENEW_CAUSE(now), now);
      // Notices carry a card link too: those about to end are given a new one.
      const notices = await tx.query<{ tenant_id: number; processor_customer_id: string }>(
        `SELECT n.tenant_id, n.processor_customer_id
         FROM customer_links l JOIN card_notices n
           ON n.tenant_id = l.tenant_id AND n.processor_customer_id = l.processor_customer_id AND n.card_url = l.url
         WHERE l.expires_at <= $1 AND n.expires IS NOT NULL
         ORDER BY n.tenant_id, n.processor_customer_id LIMIT $2`,
        [dueAt, limit],
      );
      let relinked = 0;
      for (const n of notices) relinked += await relinkNotices(tx, Number(n.tenant_id), now, [n.processor_customer_id]);
      await tx.query('DELETE FROM customer_links WHERE expires_at < $1', [new Date(now.getTime() - FORGET_AFTER_MS)]);
      return due.length + relinked;
    });
    if (renewed > 0) this.commits.emit();
    return renewed;
  }
}
