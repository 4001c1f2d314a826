import { noticeBody } from '../domain/lookup.js';
import type { TenantAuth } from '../domain/types.js';
import type { CardNoticeExtra } from '../store/index.js';

/**
 * The card-expiring notices that hold (docs/notices.md), by tenant (space) and customer. Few
 * customers have one at a time, so a plain map beside the index, whose state byte says which
 * subscribers have one: a lookup of any other subscriber never reads this.
 *
 * A notice's answer bytes are built at its first signed lookup and kept until they could
 * change: the notice is set again, its tenant is prepared again (a change of policy or
 * branding: another `TenantAuth`), or the clock passes the notice's end.
 */
interface Entry {
  readonly expires: string;
  readonly untilMs: number;
  readonly cardUrl: string | null;
  tenant: TenantAuth | null;
  body: Buffer | null;
}

const keyOf = (tenantId: number, customerId: string): string => `${tenantId}\t${customerId}`;

export class CardNotices {
  private readonly byKey = new Map<string, Entry>();

  get size(): number {
    return this.byKey.size;
  }

  has(tenantId: number, customerId: string): boolean {
    return this.byKey.size > 0 && this.byKey.has(keyOf(tenantId, customerId));
  }

  /** Sets (or, with null, clears) a customer's notice. */
  set(tenantId: number, customerId: string, notice: CardNoticeExtra | null): void {
    // Most changes are of subscribers without a notice: nothing to forget, no key to make.
    if (notice === null && this.byKey.size === 0) return;
    const key = keyOf(tenantId, customerId);
    if (notice === null) this.byKey.delete(key);
    else
      this.byKey.set(key, {
        expires: notice.expires,
        untilMs: notice.untilS * 1000,
        cardUrl: notice.cardUrl ?? null,
        tenant: null,
        body: null,
      });
  }

  /**
   * The signed answer of an active customer with a notice at `nowMs`; null once the notice
   * has ended (the clock passed it), so that the caller answers as without one.
   */
  answer(tenant: TenantAuth, customerId: string, nowMs: number): Buffer | null {
    const entry = this.byKey.get(keyOf(tenant.id, customerId));
    if (entry === undefined || nowMs >= entry.untilMs) return null;
    if (entry.tenant !== tenant || entry.body === null) {
      entry.body = noticeBody(tenant, entry.expires, entry.cardUrl);
      entry.tenant = tenant;
    }
    return entry.body;
  }
}
