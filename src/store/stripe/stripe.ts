import type { StripeIntakeCount } from '../../domain/stripe/intake.js';
import type { Mode } from '../../domain/types.js';
import type { SecretBox } from '../../secrets/cipher.js';
import type { Commits } from '../changes/commits.js';
import type { Db, Queryable } from '../db/db.js';
import { credential } from '../tenants/rows.js';
import { applyStripeEvent, lockCustomer, storedStatus } from './episodes.js';
import { addStripeIntake, readStripeIntake } from './intake.js';
import { recordCardFact } from './notices.js';
import type { CardFact } from '../../domain/notices.js';
import type {
  CardNoticeChange,
  StripeEventInput,
  StripeEventResult,
  StripeIntakeSummary,
  StripeSigning,
  StripeStore,
} from './types.js';

function sameStatus(a: StripeEventResult['before'], b: StripeEventResult['after']): boolean {
  return a?.status === b?.status && a?.reason === b?.reason;
}

/**
 * Keeps the event and applies it, in the caller's transaction: a redelivery finds the
 * row and changes nothing, so the event and its effect commit together or not at all.
 */
async function recordIn(
  tx: Queryable,
  tenantId: number,
  { event, derivation }: StripeEventInput,
  now: Date,
): Promise<StripeEventResult> {
  const inserted = await tx.query(
    `INSERT INTO stripe_events (tenant_id, event_id, event_type, processor_customer_id, created, facts, outcome, received_at)
     VALUES ($1, $2, $3, $4, $5, $6, 'ignored', $7) ON CONFLICT (tenant_id, event_id) DO NOTHING RETURNING 1`,
    [tenantId, event.eventId, event.eventType, event.customerId, event.created, JSON.stringify(event.facts), now],
  );
  const customerId = derivation.customerId;
  if (inserted.length === 0) {
    // A redelivery changes nothing: before and after are what the store holds now.
    const current = customerId === null ? null : await storedStatus(tx, tenantId, customerId);
    return { outcome: 'duplicate', customerId, before: current, after: current };
  }
  if (customerId === null) return { outcome: 'ignored', customerId, before: null, after: null };
  const facts = {
    eventId: event.eventId,
    eventType: event.eventType,
    created: event.created,
    declineCode: event.declineCode,
  };
  const result = await applyStripeEvent(tx, tenantId, customerId, facts, derivation, now);
  if (result.outcome !== 'ignored') {
    await tx.query('UPDATE stripe_events SET outcome = $3 WHERE tenant_id = $1 AND event_id = $2', [
      tenantId,
      event.eventId,
      result.outcome,
    ]);
  }
  return { ...result, customerId };
}

/** Rolls a dry run's transaction back, carrying what it would have done. */
class DryRun extends Error {
  constructor(readonly results: StripeEventResult[]) {
    super('dry run');
  }
}

/** The Stripe intake in SQL: signing secrets, events and their effects, the intake's counters. */
export class SqlStripe implements StripeStore {
  constructor(
    private readonly db: Db,
    private readonly secrets: SecretBox,
    private readonly commits: Commits,
  ) {}

  async getStripeSigningSecrets(slug: string): Promise<StripeSigning | null> {
    const rows = await this.db.query<{
      tenant_id: number;
      id: number;
      mode: Mode;
      secret: string | null;
      expires_at: Date | null;
    }>(
      `SELECT t.id AS tenant_id, s.id, s.mode, c.secret, c.expires_at FROM tenants t
       JOIN tenants s ON s.id = t.id OR s.mode_of = t.id
       LEFT JOIN tenant_credentials c ON c.tenant_id = s.id AND c.kind = 'stripe_webhook_secret'
       WHERE t.slug = $1 AND t.mode_of IS NULL ORDER BY c.id`,
      [slug],
    );
    const first = rows[0];
    if (!first) return null;
    const space = (mode: Mode) => {
      const own = rows.filter((r) => r.mode === mode);
      const spaceId = own[0]?.id;
      if (spaceId === undefined) throw new Error(`tenant ${first.tenant_id} has no ${mode} space`);
      return {
        spaceId,
        secrets: own
          .filter((r) => r.secret !== null)
          .map((r) =>
            credential(
              this.secrets.open(r.secret ?? '', { tenantId: r.id, kind: 'stripe_webhook_secret' }),
              r.expires_at,
            ),
          ),
      };
    };
    return { tenantId: first.tenant_id, spaces: { live: space('live'), test: space('test') } };
  }

  async recordStripeEvent(tenantId: number, input: StripeEventInput, now: Date): Promise<StripeEventResult> {
    const result = await this.db.transaction((tx) => recordIn(tx, tenantId, input, now));
    if (result.customerId !== null && !sameStatus(result.before, result.after)) this.commits.emit();
    return result;
  }

  async recordStripeEvents(
    tenantId: number,
    inputs: readonly StripeEventInput[],
    now: Date,
    options: { dryRun?: boolean } = {},
  ): Promise<StripeEventResult[]> {
    if (options.dryRun !== true) {
      const results: StripeEventResult[] = [];
      for (const input of inputs) results.push(await this.recordStripeEvent(tenantId, input, now));
      return results;
    }
    try {
      await this.db.transaction(async (tx) => {
        // One transaction holds every customer of the batch: their locks are taken up front,
        // in one order, so that two dry runs naming the same customers cannot deadlock.
        const customers = [
          ...new Set(inputs.flatMap((i) => (i.derivation.customerId === null ? [] : [i.derivation.customerId]))),
        ].sort();
        for (const customerId of customers) await lockCustomer(tx, tenantId, customerId);
        const results: StripeEventResult[] = [];
        for (const input of inputs) results.push(await recordIn(tx, tenantId, input, now));
        throw new DryRun(results);
      });
    } catch (err) {
      if (err instanceof DryRun) return err.results;
      throw err;
    }
    throw new Error('a dry run must roll back');
  }

  async recordCardFact(
    spaceId: number,
    fact: Extract<CardFact, { kind: 'expiring' | 'ended' }>,
    event: { eventId: string; created: Date },
    now: Date,
  ): Promise<CardNoticeChange> {
    const change = await this.db.transaction((tx) => recordCardFact(tx, spaceId, fact, event, now));
    if (change === 'started' || change === 'ended') this.commits.emit();
    return change;
  }

  async addStripeIntake(counts: readonly StripeIntakeCount[]): Promise<void> {
    await addStripeIntake(this.db, counts);
  }

  async stripeIntake(tenantId: number, since: Date): Promise<StripeIntakeSummary> {
    return readStripeIntake(this.db, tenantId, since);
  }
}
