/**
 * Stripe events across two instances to `@dunwall/node` (the `stripefeed` row): what the
 * `sdkfeed` row measures with admin changes, with signed Stripe events instead. A copy in the
 * bench's process follows instance B with a tenant's secret key; Stripe's deliveries go to
 * instance A (`POST /webhooks/stripe/:slug`, signed with the tenant's signing secret as
 * Stripe signs them), and the delay runs from the moment a delivery is sent to A to the
 * copy's `status()` answering what the event decides: the event's transaction on A (the
 * event, its episode, the subscriber, the change log and the feed row), the change log's
 * NOTIFY, B's read model, B's long poll woken and answered, the copy applying the page.
 *
 * Each trial is one customer of its own: an `invoice.payment_failed` whose retries are
 * exhausted (`lockout`), then, once the copy shows it, the `invoice.paid` of the same
 * invoice (`active`), each timed. The events are `stripe send-sample`'s
 * (`src/cli/stripe-samples.ts`), one event a delivery.
 */
import { Agent } from 'node:http';
import { randomBytes } from 'node:crypto';
import type { SubscriberStatus } from '../src/domain/types.js';
import { randomId, sampleEvents, sampleIds } from '../src/cli/stripe-samples.js';
import type { SampleScenario } from '../src/cli/stripe-samples.js';
import { signStripePayload } from '../src/domain/stripe/signature.js';
import type { Dunwall } from '../packages/node/src/types.js';
import { call } from './http.js';
import { copyFollowing } from './sdk-feed.js';
import { percentile } from './invalidation.js';

const TRIAL_TIMEOUT_MS = 5_000;

/** One kind of event's delays, from the delivery sent to A to the copy answering its status. */
export interface StripeFeedSeries {
  event: string;
  status: SubscriberStatus;
  trials: number;
  timeouts: number;
  delaysMs: number[];
  p50Ms: number | null;
  p99Ms: number | null;
  maxMs: number | null;
  /** The same from A's 200 (the event committed and A's own copy shows it): may be negative. */
  afterAnswerMs: number[];
}

export interface StripeFeedResult {
  series: StripeFeedSeries[];
  /** Both kinds together: the row's figure. */
  p50Ms: number | null;
  p99Ms: number | null;
  maxMs: number | null;
  timeouts: number;
  errors: string[];
}

const STEPS: readonly { scenario: SampleScenario; event: string; status: SubscriberStatus }[] = [
  { scenario: 'retries_exhausted', event: 'invoice.payment_failed', status: 'lockout' },
  { scenario: 'paid', event: 'invoice.paid', status: 'active' },
];

function summary(values: readonly number[]): { p50Ms: number | null; p99Ms: number | null; maxMs: number | null } {
  const sorted = [...values].sort((x, y) => x - y);
  return { p50Ms: percentile(sorted, 50), p99Ms: percentile(sorted, 99), maxMs: sorted.at(-1) ?? null };
}

export async function measureStripeFeed(opts: {
  a: string;
  b: string;
  adminToken: string;
  slug: string;
  /** Customers (each one failure, then its payment). */
  trials: number;
  log: (line: string) => void;
}): Promise<StripeFeedResult> {
  const a = new URL(opts.a);
  const agentA = new Agent({ keepAlive: true, maxSockets: 1 });
  const admin = { authorization: `Bearer ${opts.adminToken}` };
  const series = STEPS.map((s) => ({
    event: s.event,
    status: s.status,
    delays: [] as number[],
    afterAnswer: [] as number[],
    timeouts: 0,
  }));
  const errors: string[] = [];
  const run = randomBytes(4).toString('hex');
  let dunwall: Dunwall | null = null;
  const watch: { onAnswer: (() => void) | null } = { onAnswer: null };
  try {
    // The tenant's signing secret: set through A, as the tenant sets it.
    const signingSecret = `whsec_bench${randomBytes(24).toString('hex')}`;
    const patched = await call(
      agentA,
      a,
      'PATCH',
      `/admin/v1/tenants/${opts.slug}`,
      admin,
      JSON.stringify({ stripe_webhook_secret: signingSecret }),
    );
    if (patched.status !== 200)
      throw new Error(`stripe signing secret for ${opts.slug}: ${patched.status} ${patched.body.slice(0, 200)}`);
    dunwall = await copyFollowing({
      a,
      agentA,
      admin,
      b: opts.b,
      slug: opts.slug,
      keyName: 'bench stripe',
      errors,
      watch,
    });
    await dunwall.ready(30_000);
    const copy = dunwall;

    for (let i = 0; i < opts.trials; i += 1) {
      const customer = `cus_bench_stripe_${run}_${i}`;
      const ids = sampleIds(opts.slug, customer);
      for (const [k, step] of STEPS.entries()) {
        const s = series[k];
        if (s === undefined) continue;
        // The failure a second before its payment: events of one second rank a payment first.
        const nowS = Math.floor(Date.now() / 1000) + k;
        const event = sampleEvents({
          scenario: step.scenario,
          shape: 'basil',
          tenant: opts.slug,
          customer,
          ids,
          nowS,
          newId: randomId,
        }).find((e) => e.type === step.event);
        if (event === undefined) throw new Error(`no ${step.event} among the ${step.scenario} sample's events`);
        const payload = JSON.stringify(event);
        const signature = signStripePayload(payload, signingSecret, Math.floor(Date.now() / 1000));
        const seen: { at: number | null } = { at: null };
        const applied = new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, TRIAL_TIMEOUT_MS);
          watch.onAnswer = () => {
            if (copy.status(customer).status !== step.status) return;
            seen.at = performance.now();
            clearTimeout(timer);
            resolve();
          };
        });
        const sent = performance.now();
        const res = await call(
          agentA,
          a,
          'POST',
          `/webhooks/stripe/${opts.slug}`,
          { 'stripe-signature': signature },
          payload,
        );
        const answered = performance.now();
        if (res.status !== 200) {
          errors.push(`trial ${i}: ${step.event} on A answered ${res.status} ${res.body.slice(0, 200)}`);
          watch.onAnswer = null;
          break;
        }
        watch.onAnswer?.();
        await applied;
        watch.onAnswer = null;
        if (seen.at === null) {
          s.timeouts += 1;
          break;
        }
        s.delays.push(seen.at - sent);
        s.afterAnswer.push(seen.at - answered);
      }
      if ((i + 1) % 10 === 0) opts.log(`stripefeed: ${i + 1}/${opts.trials} customers`);
    }
  } finally {
    watch.onAnswer = null;
    await dunwall?.close();
    agentA.destroy();
  }
  const all = series.flatMap((s) => s.delays);
  return {
    series: series.map((s) => ({
      event: s.event,
      status: s.status,
      trials: opts.trials,
      timeouts: s.timeouts,
      delaysMs: s.delays,
      ...summary(s.delays),
      afterAnswerMs: s.afterAnswer,
    })),
    ...summary(all),
    timeouts: series.reduce((n, s) => n + s.timeouts, 0),
    errors,
  };
}
