import { eventShapeProblem, isStripeEvent } from '../../domain/stripe/event.js';
import { zeroOutcomeCounts } from '../../domain/stripe/outcomes.js';
import type { StripeEventLike } from '../../domain/stripe/derive.js';
import type { CustomerStatus } from '../../domain/stripe/fold.js';
import { takeInStripeEvents } from '../../services/stripe-events.js';
import type { NoticeIntake } from '../../services/stripe-events.js';
import type { StripeEventStore, TenantStore } from '../../store/index.js';
import type { App } from '../app-instance.js';
import { MAX_REPLAY_EVENTS, ReplayAnswer, ReplayBody } from '../schemas.js';
import { doc, ERRORS, paramsOf, tenantOf, tenantRecord } from './common.js';
import type { StripeIntake } from '../stripe-intake.js';

/**
 * The operator's backfill of a tenant's Stripe events (/admin/v1/tenants/:slug/stripe-events):
 * events replayed through the webhook's derivation, without signatures (the admin token
 * vouches for them). The Stripe webhook itself is stripe-webhook.ts, beside it.
 */
export interface StripeEventRoutesOptions {
  tenants: Pick<TenantStore, 'getTenant'>;
  stripe: StripeEventStore;
  now: () => number;
  /** The tenant's intake counters: the events a replay took are `replayed`; absent: not counted. */
  intake?: StripeIntake | null;
  /** The notices the events tell of (docs/notices.md); absent: not learned. */
  notices?: NoticeIntake | null;
}

/** A replay batch: the CLI sends at most 500 events and 4 MiB at a time. */
const REPLAY_BODY_LIMIT_BYTES = 8 * 1024 * 1024;

export async function stripeEventRoutes(app: App, opts: StripeEventRoutesOptions): Promise<void> {
  const { tenants, stripe } = opts;
  const now = () => new Date(opts.now());

  app.post(
    '/stripe-events',
    {
      bodyLimit: REPLAY_BODY_LIMIT_BYTES,
      // Up to 500 events, each its own transaction: each is bounded, not the batch.
      config: { storeBound: 'call' },
      schema: {
        ...doc('operator', 'replayStripeEvents', '', 'admin'),
        summary: "Replay Stripe events through the webhook's derivation (a backfill)",
        description: `Up to ${MAX_REPLAY_EVENTS} events, applied in the order given; the order does not change the result. No signature: the admin token vouches for them.`,
        params: paramsOf('operator', {}),
        body: ReplayBody,
        response: { 200: ReplayAnswer, ...ERRORS },
      },
    },
    async (req) => {
      await tenantRecord(tenants, req);
      const dryRun = req.body.dry_run === true;
      const outcomes = zeroOutcomeCounts();
      const invalid: { index: number; detail: string }[] = [];
      const events: StripeEventLike[] = [];
      const at = now();
      for (const [index, candidate] of req.body.events.entries()) {
        if (isStripeEvent(candidate, at.getTime())) events.push(candidate);
        else invalid.push({ index, detail: eventShapeProblem(candidate, at.getTime()) ?? 'not a Stripe event' });
      }
      // Into the space of the mode asked for (`?mode=test`): an event of the other mode is `livemode_mismatch`.
      const space = tenantOf(req);
      const results = await takeInStripeEvents(
        stripe,
        { id: space.id, livemode: space.mode === 'live' },
        events,
        at,
        dryRun,
        opts.notices ?? null,
      );
      // What the tenant's health shows as its last sync: the events taken, not a dry run's.
      if (!dryRun) opts.intake?.count(space.id, 'replayed', at.getTime(), events.length);
      const invalidAt = new Set(invalid.map((i) => i.index));
      let next = 0;
      const perEvent = req.body.events.map((_, index) =>
        invalidAt.has(index) ? 'invalid' : (results[next++]?.outcome ?? 'invalid'),
      );
      // Each customer's status before its first event of the batch and after its last.
      const customers = new Map<string, { before: CustomerStatus | null; after: CustomerStatus | null }>();
      for (const r of results) {
        outcomes[r.outcome] += 1;
        if (r.customerId === null) continue;
        const first = customers.get(r.customerId);
        customers.set(r.customerId, { before: first === undefined ? r.before : first.before, after: r.after });
      }
      const answer = [...customers].map(([customerId, { before, after }]) => ({
        processor_customer_id: customerId,
        status_before: before?.status ?? null,
        status: after?.status ?? null,
        reason: after?.reason ?? null,
      }));
      req.log.info(
        { tenant: tenantOf(req).slug, mode: tenantOf(req).mode, dryRun, ...outcomes, invalid: invalid.length },
        'stripe events replayed',
      );
      return {
        received: req.body.events.length,
        dry_run: dryRun,
        outcomes,
        invalid,
        results: perEvent,
        customers: answer,
      };
    },
  );
}
