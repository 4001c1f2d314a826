import { describe, expect, it } from 'vitest';
import type { DownstreamTarget } from '../../src/domain/downstream.js';
import type { StoredEpisode, StoredSubscriber } from '../../src/domain/effect.js';
import { DEFAULT_POLICY } from '../../src/domain/policy.js';
import { decideStripeEvent, eventInvoiceIds, olderEventRun } from '../../src/domain/stripe/decide.js';
import type {
  ApplicableDerivation,
  InvoiceContext,
  StoredInvoice,
  StripeEvent,
  StripeEventState,
} from '../../src/domain/stripe/decide.js';
import type { InvoiceLink } from '../../src/domain/stripe/derive.js';
import { RANKS } from '../../src/domain/stripe/fold.js';
import type { EpisodeState } from '../../src/domain/stripe/fold.js';

/**
 * decideStripeEvent as a table: what the store read, one event, and the whole effect. No
 * database: the routes' tests (test/routes/stripe-episodes.test.ts) run the same rules
 * through the webhook and both engines.
 */

const NOW = new Date('2026-05-01T12:00:00Z');
const T = Date.parse('2026-04-30T12:00:00Z');
const H = 3_600_000;
const CUS = 'cus_1';

function episode(
  key: string,
  state: EpisodeState,
  reason: string,
  atMs: number,
  over: Partial<StoredEpisode> = {},
): StoredEpisode {
  return {
    key,
    state,
    reason,
    declineCode: null,
    position: { atMs, rank: RANKS[state], eventId: `evt_${atMs}` },
    dunningStartedAtMs: state === 'resolved' ? null : atMs,
    resolvedAtMs: state === 'resolved' ? atMs : null,
    invoiceId: 'in_1',
    ...over,
  };
}

function subscriber(over: Partial<StoredSubscriber> = {}): StoredSubscriber {
  return {
    status: 'warning',
    derivedStatus: 'warning',
    reason: 'soft_decline',
    overriddenAtMs: null,
    lockoutAtMs: null,
    lockoutRule: null,
    payUrl: null,
    ...over,
  };
}

const target: DownstreamTarget = {
  slug: 'acme',
  livemode: true,
  endpoints: [{ key: 1, enabled: true, eventTypes: null }],
  lastSequence: 0,
  messageId: 'msg_test',
};

function state(over: Partial<StripeEventState> = {}): StripeEventState {
  return {
    customerId: CUS,
    subscriber: null,
    episodes: [],
    tombstone: null,
    policy: DEFAULT_POLICY,
    invoices: new Map(),
    downstream: target,
    invoice: null,
    ...over,
  };
}

const storedInvoice = (over: Partial<StoredInvoice> = {}): StoredInvoice => ({
  invoiceId: 'in_1',
  customerId: CUS,
  episode: 'sub_1',
  autoCollected: true,
  firstInvoice: false,
  ...over,
});

function context(over: Partial<InvoiceContext> = {}): InvoiceContext {
  return { invoice: storedInvoice(), latestDeclines: [], failures: [], ownDeclineAtFailure: null, ...over };
}

const link: InvoiceLink = {
  invoiceId: 'in_1',
  episode: 'sub_1',
  autoCollected: true,
  firstInvoice: false,
  paymentIds: ['pi_1'],
  money: { amountDue: 2900, amountRemaining: 2900, currency: 'usd', hostedInvoiceUrl: null, status: 'open' },
};

function stripeEvent(eventType: string, derivation: ApplicableDerivation, atMs = T, eventId = 'evt_new'): StripeEvent {
  return {
    eventId,
    eventType,
    created: new Date(atMs),
    declineCode: derivation.kind === 'change' ? derivation.declineCode : null,
    derivation,
  };
}

const pastDue = stripeEvent('customer.subscription.updated', {
  kind: 'change',
  customerId: CUS,
  change: {
    kind: 'episode',
    episode: 'sub_1',
    outcome: { state: 'warning', reason: 'subscription_past_due' },
    invoiceId: 'in_1',
  },
  invoice: null,
  declineCode: null,
  facts: {},
});

const paymentFailed = (nextAttempt: number | null, atMs = T) =>
  stripeEvent(
    'invoice.payment_failed',
    {
      kind: 'change',
      customerId: CUS,
      change: {
        kind: 'episode',
        episode: 'sub_1',
        outcome:
          nextAttempt === null
            ? { state: 'lockout', reason: 'retries_exhausted' }
            : { state: 'warning', reason: 'soft_decline' },
        failure: { nextAttempt, payloadHard: null },
      },
      invoice: link,
      declineCode: null,
      facts: {},
    },
    atMs,
  );

const decline = (hard: boolean, atMs = T, eventId = 'evt_decline') =>
  stripeEvent(
    'payment_intent.payment_failed',
    {
      kind: 'change',
      customerId: CUS,
      change: {
        kind: 'decline',
        decline: { hard, code: hard ? 'lost_card' : 'insufficient_funds', paymentIds: ['pi_1'], invoiceId: null },
      },
      invoice: null,
      declineCode: hard ? 'lost_card' : 'insufficient_funds',
      facts: {},
    },
    atMs,
    eventId,
  );

const paid = stripeEvent('invoice.paid', {
  kind: 'change',
  customerId: CUS,
  change: { kind: 'episode', episode: 'sub_1', outcome: { state: 'resolved', reason: 'paid' } },
  invoice: link,
  declineCode: null,
  facts: {},
});

const deleted = stripeEvent('customer.deleted', {
  kind: 'change',
  customerId: CUS,
  change: { kind: 'delete' },
  invoice: null,
  declineCode: null,
  facts: {},
});

const ignoredInvoiceEvent = stripeEvent('invoice.payment_action_required', {
  kind: 'ignored',
  customerId: CUS,
  why: 'send_invoice',
  invoice: link,
  facts: {},
});

describe('decideStripeEvent', () => {
  it.each<{ name: string; given: StripeEventState; event: StripeEvent; expected: Record<string, unknown> }>([
    {
      name: 'a subscription past due, customer unknown: its episode starts a run, the record, an entry and a message',
      given: state(),
      event: pastDue,
      expected: {
        outcome: 'applied',
        before: null,
        after: { status: 'warning', reason: 'subscription_past_due' },
        effect: {
          episodes: [
            {
              key: 'sub_1',
              state: 'warning',
              position: { atMs: T, rank: RANKS.warning, eventId: 'evt_new' },
              dunningStartedAtMs: T,
              resolvedAtMs: null,
              invoiceId: 'in_1',
            },
          ],
          subscriber: { kind: 'write', row: { status: 'warning', statusChanged: true } },
          history: { effect: 'changed', episode: 'sub_1', cause: { source: 'stripe', eventId: 'evt_new' } },
          message: { type: 'subscriber.status_changed', sequence: 1 },
        },
      },
    },
    {
      name: "an event older than its episode's: stale; it moves the run's start earlier, the record stays",
      given: state({ episodes: [episode('sub_1', 'warning', 'soft_decline', T + H)], subscriber: subscriber() }),
      event: pastDue,
      expected: {
        outcome: 'stale',
        after: { status: 'warning', reason: 'soft_decline' },
        effect: {
          episodes: [{ key: 'sub_1', reason: 'soft_decline', dunningStartedAtMs: T, position: { atMs: T + H } }],
          subscriber: null,
          history: null,
          message: null,
        },
      },
    },
    {
      name: 'an event older than the customer removal: stale, nothing written',
      given: state({ tombstone: { atMs: T + H, rank: RANKS.removed, eventId: 'evt_del' } }),
      event: pastDue,
      expected: {
        outcome: 'stale',
        after: null,
        effect: { episodes: [], subscriber: null, history: null, message: null },
      },
    },
    {
      name: "a payment resolves the episode: active, the run's start kept, its resolution set",
      given: state({ episodes: [episode('sub_1', 'warning', 'soft_decline', T - H)], subscriber: subscriber() }),
      event: paid,
      expected: {
        outcome: 'applied',
        after: { status: 'active', reason: 'paid' },
        effect: {
          episodes: [{ state: 'resolved', dunningStartedAtMs: T - H, resolvedAtMs: T }],
          message: { payload: { data: { from: 'warning', to: 'active' } } },
        },
      },
    },
    {
      name: 'a decline no invoice links yet: pending, kept in the history only',
      given: state({ subscriber: subscriber() }),
      event: decline(true),
      expected: {
        outcome: 'pending',
        effect: {
          episodes: [],
          subscriber: null,
          history: { effect: 'none', status: 'warning', episode: null, cause: { eventId: 'evt_decline' } },
          message: null,
        },
      },
    },
    {
      name: "a decline linked to another customer's invoice: pending",
      given: state({ invoice: context({ invoice: storedInvoice({ customerId: 'cus_other' }) }) }),
      event: decline(true),
      expected: { outcome: 'pending', effect: { episodes: [], history: { effect: 'none' } } },
    },
    {
      name: 'a decline of an invoice paid by hand: ignored, nothing written',
      given: state({ invoice: context({ invoice: storedInvoice({ autoCollected: false }) }) }),
      event: decline(true),
      expected: { outcome: 'ignored', effect: { episodes: [], subscriber: null, history: null } },
    },
    {
      name: "a hard decline linked to the customer's invoice: a lockout of the invoice's episode",
      given: state({ invoice: context() }),
      event: decline(true),
      expected: {
        outcome: 'applied',
        after: { status: 'lockout', reason: 'hard_decline' },
        effect: {
          episodes: [{ key: 'sub_1', state: 'lockout', declineCode: 'lost_card', invoiceId: 'in_1' }],
          history: { episode: 'sub_1' },
        },
      },
    },
    {
      name: "a subscription's first invoice: a decline is a warning",
      given: state({ invoice: context({ invoice: storedInvoice({ firstInvoice: true }) }) }),
      event: decline(true),
      expected: { outcome: 'applied', after: { status: 'warning', reason: 'first_payment_failed' } },
    },
    {
      name: 'a payment failure with Stripe retrying, its linked decline hard: a lockout, the decline code in the entry',
      given: state({ invoice: context({ ownDeclineAtFailure: { hard: true, code: 'stolen_card' } }) }),
      event: paymentFailed(T + 3 * 86_400),
      expected: {
        outcome: 'applied',
        after: { status: 'lockout', reason: 'hard_decline' },
        effect: {
          episodes: [{ state: 'lockout', declineCode: 'stolen_card' }],
          history: { cause: { declineCode: 'stolen_card' } },
        },
      },
    },
    {
      name: 'a payment failure with Stripe retrying and no hard decline linked: a warning',
      given: state({ invoice: context({ ownDeclineAtFailure: { hard: false, code: 'insufficient_funds' } }) }),
      event: paymentFailed(T + 3 * 86_400),
      expected: {
        outcome: 'applied',
        after: { status: 'warning', reason: 'soft_decline' },
        effect: { history: { cause: { declineCode: null } } },
      },
    },
    {
      name: 'the retries exhausted: a lockout',
      given: state({ invoice: context() }),
      event: paymentFailed(null),
      expected: { outcome: 'applied', after: { status: 'lockout', reason: 'retries_exhausted' } },
    },
    {
      name: 'an invoice event that changes nothing by itself applies the decline it links: ignored, the episode set',
      given: state({
        invoice: context({
          latestDeclines: [{ eventId: 'evt_d', createdMs: T - H, hard: false, declineCode: 'insufficient_funds' }],
        }),
      }),
      event: ignoredInvoiceEvent,
      expected: {
        outcome: 'ignored',
        after: { status: 'warning', reason: 'soft_decline' },
        effect: {
          episodes: [{ key: 'sub_1', position: { atMs: T - H, eventId: 'evt_d' } }],
          history: { episode: 'sub_1' },
        },
      },
    },
    {
      name: 'an invoice event that links no decline and changes nothing: ignored, nothing written',
      given: state({ invoice: context() }),
      event: ignoredInvoiceEvent,
      expected: { outcome: 'ignored', effect: { episodes: [], subscriber: null, history: null, message: null } },
    },
    {
      name: 'a hard decline arriving after the failure it caused: the failure is weighed again and restated in place',
      given: state({
        episodes: [
          episode('sub_1', 'warning', 'soft_decline', T + H, {
            position: { atMs: T + H, rank: RANKS.warning, eventId: 'evt_failed' },
          }),
        ],
        subscriber: subscriber(),
        invoice: context({
          failures: [
            {
              eventId: 'evt_failed',
              createdMs: T + H,
              facts: { invoice: 'in_1', next_payment_attempt: 1_790_000_000 },
              declineAtFailure: { hard: true, code: 'lost_card' },
            },
          ],
        }),
      }),
      event: decline(true, T),
      expected: {
        outcome: 'stale',
        after: { status: 'lockout', reason: 'hard_decline' },
        effect: {
          episodes: [
            {
              state: 'lockout',
              reason: 'hard_decline',
              declineCode: 'lost_card',
              dunningStartedAtMs: T,
              position: { atMs: T + H, rank: RANKS.lockout, eventId: 'evt_failed' },
            },
          ],
          message: { payload: { data: { from: 'warning', to: 'lockout' } } },
        },
      },
    },
    {
      name: 'a soft decline of a later attempt, linked after the failure: the failure restated in place as soft, below its hard outcome',
      given: state({
        episodes: [
          episode('sub_1', 'lockout', 'hard_decline', T + H, {
            position: { atMs: T + H, rank: RANKS.lockout, eventId: 'evt_failed' },
            declineCode: 'lost_card',
          }),
        ],
        subscriber: subscriber({ status: 'lockout', derivedStatus: 'lockout', reason: 'hard_decline' }),
        invoice: context({
          failures: [
            {
              eventId: 'evt_failed',
              createdMs: T + H,
              facts: { invoice: 'in_1', next_payment_attempt: 1_790_000_000 },
              declineAtFailure: { hard: false, code: 'insufficient_funds' },
            },
          ],
        }),
      }),
      event: decline(false, T, 'evt_soft'),
      expected: {
        outcome: 'stale',
        after: { status: 'warning', reason: 'soft_decline' },
        effect: {
          episodes: [
            {
              state: 'warning',
              reason: 'soft_decline',
              declineCode: null,
              position: { atMs: T + H, rank: RANKS.warning, eventId: 'evt_failed' },
            },
          ],
        },
      },
    },
    {
      name: "an event of a later second ends an admin's override",
      given: state({
        episodes: [episode('sub_1', 'warning', 'soft_decline', T - H)],
        subscriber: subscriber({
          status: 'active',
          derivedStatus: 'active',
          reason: 'manual',
          overriddenAtMs: T - 1000,
        }),
      }),
      event: paid,
      expected: {
        outcome: 'applied',
        after: { status: 'active', reason: 'paid' },
        effect: { subscriber: { row: { overriddenAtMs: null } } },
      },
    },
    {
      name: "an event of the override's second leaves it standing",
      given: state({
        episodes: [episode('sub_1', 'warning', 'soft_decline', T - H)],
        subscriber: subscriber({
          status: 'lockout',
          derivedStatus: 'lockout',
          reason: 'manual',
          overriddenAtMs: T + 500,
        }),
      }),
      event: paid,
      expected: {
        outcome: 'applied',
        after: { status: 'lockout', reason: 'manual' },
        effect: { subscriber: null, history: null },
      },
    },
    {
      name: 'the customer deleted: its older episodes go, the tombstone is set, the record goes',
      given: state({
        episodes: [
          episode('sub_1', 'warning', 'soft_decline', T - H),
          episode('sub_2', 'warning', 'soft_decline', T + H),
        ],
        subscriber: subscriber(),
      }),
      event: deleted,
      expected: {
        outcome: 'applied',
        after: { status: 'warning', reason: 'soft_decline' },
        effect: {
          removedEpisodes: ['sub_1'],
          tombstone: { atMs: T, rank: RANKS.removed, eventId: 'evt_new' },
          subscriber: null,
        },
      },
    },
  ])('$name', ({ given, event, expected }) => {
    expect(decideStripeEvent(given, event, NOW)).toMatchObject(expected);
  });

  it('names the invoices whose page it may show: the event’s own, the one its subscription names, the one linked', () => {
    expect(eventInvoiceIds(pastDue, null)).toEqual(['in_1']);
    expect(eventInvoiceIds(decline(true), storedInvoice({ invoiceId: 'in_9' }))).toEqual(['in_9']);
    expect(eventInvoiceIds(deleted, null)).toEqual([]);
  });
});

describe('olderEventRun', () => {
  const run = (state: EpisodeState, startMs: number | null, resolvedMs: number | null) =>
    episode('sub_1', state, 'x', T, { dunningStartedAtMs: startMs, resolvedAtMs: resolvedMs });

  it.each([
    {
      name: 'a failure before the run started: the run starts at it',
      row: run('warning', T, null),
      state: 'warning',
      at: T - H,
      expected: { startMs: T - H, resolvedMs: null },
    },
    {
      name: 'a failure within the run: nothing to change',
      row: run('warning', T - 2 * H, null),
      state: 'lockout',
      at: T - H,
      expected: null,
    },
    {
      name: 'a failure before the last resolution: nothing to change',
      row: run('warning', T, T - H),
      state: 'warning',
      at: T - 2 * H,
      expected: null,
    },
    {
      name: 'a failure of a resolved episode: nothing to change',
      row: run('resolved', null, T),
      state: 'warning',
      at: T - H,
      expected: null,
    },
    {
      name: 'a resolution within the run ends it: the run began at the failure that set the state',
      row: run('lockout', T - 2 * H, null),
      state: 'resolved',
      at: T - H,
      expected: { startMs: T, resolvedMs: T - H },
    },
    {
      name: 'a resolution after the last known one: it is the last resolution',
      row: run('resolved', null, T - 2 * H),
      state: 'resolved',
      at: T - H,
      expected: { startMs: null, resolvedMs: T - H },
    },
    {
      name: 'a resolution before the last known one, the run begun after it: nothing to change',
      row: run('warning', T, T - H),
      state: 'resolved',
      at: T - 2 * H,
      expected: null,
    },
  ] as const)('$name', ({ row, state, at, expected }) => {
    expect(olderEventRun(row, state, at)).toEqual(expected);
  });
});
