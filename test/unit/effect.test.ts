import { describe, expect, it } from 'vitest';
import { downstreamMessage } from '../../src/domain/downstream.js';
import type { DownstreamTarget } from '../../src/domain/downstream.js';
import { decideAdminChange, decideDueLockout, decideReanswer, settle } from '../../src/domain/effect.js';
import type { CustomerState, StoredEpisode, StoredSubscriber } from '../../src/domain/effect.js';
import type { ChangeCause } from '../../src/domain/history.js';
import { DEFAULT_POLICY } from '../../src/domain/policy.js';
import type { Policy } from '../../src/domain/policy.js';
import { RANKS } from '../../src/domain/stripe/fold.js';
import type { EpisodeState, Override } from '../../src/domain/stripe/fold.js';

const NOW = new Date('2026-05-01T12:00:00Z');
const T = NOW.getTime();
const DAY = 86_400_000;
const PAY_URL = 'https://invoice.stripe.com/i/acct_1/in_1';

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
    position: { atMs, rank: RANKS[state], eventId: `evt_${key}_${atMs}` },
    dunningStartedAtMs: state === 'resolved' ? null : atMs,
    resolvedAtMs: state === 'resolved' ? atMs : null,
    invoiceId: null,
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

function target(over: Partial<DownstreamTarget> = {}): DownstreamTarget {
  return {
    slug: 'acme',
    livemode: true,
    endpoints: [{ key: 7, enabled: true, eventTypes: null }],
    lastSequence: 4,
    messageId: 'msg_test',
    ...over,
  };
}

function state(over: Partial<CustomerState> = {}): CustomerState {
  return {
    customerId: 'cus_1',
    subscriber: null,
    episodes: [],
    tombstone: null,
    policy: DEFAULT_POLICY,
    invoices: new Map(),
    downstream: null,
    ...over,
  };
}

const stripeCause = (occurredAt = NOW): ChangeCause => ({
  source: 'stripe',
  eventId: 'evt_1',
  eventType: 'invoice.payment_failed',
  declineCode: null,
  occurredAt,
});
const adminCause = (occurredAt = NOW): ChangeCause => ({
  source: 'admin',
  eventId: 'adm_1',
  eventType: null,
  declineCode: null,
  occurredAt,
});
const policy = (over: Partial<Policy>): Policy => ({ ...DEFAULT_POLICY, ...over });

describe('settle', () => {
  const warning = episode('sub_1', 'warning', 'soft_decline', T - DAY, { invoiceId: 'in_1' });
  const lockout = episode('sub_1', 'lockout', 'retries_exhausted', T - DAY, { invoiceId: 'in_1' });

  it.each<{
    name: string;
    given: CustomerState;
    episodes: StoredEpisode[];
    override?: Override;
    cause?: ChangeCause;
    expected: Record<string, unknown>;
  }>([
    {
      name: 'no episode and no record: nothing is written',
      given: state({ downstream: target() }),
      episodes: [],
      expected: { before: null, after: null, subscriber: null, history: null, message: null },
    },
    {
      name: "no episode and no record, an admin's action: kept in the history, changing nothing",
      given: state(),
      episodes: [],
      cause: adminCause(),
      expected: { subscriber: null, history: { status: null, derivedStatus: null, effect: 'none' }, message: null },
    },
    {
      name: 'no episode left and a record: the record goes, with its history entry and a deleted message',
      given: state({ subscriber: subscriber(), downstream: target() }),
      episodes: [],
      expected: {
        before: { status: 'warning', reason: 'soft_decline' },
        after: null,
        subscriber: { kind: 'delete' },
        history: { status: null, effect: 'removed' },
        message: {
          type: 'subscriber.deleted',
          sequence: 5,
          payload: { data: { from: 'warning', previous_reason: 'soft_decline' } },
        },
      },
    },
    {
      name: 'a first warning: the record, a changed entry and a status_changed message from unknown',
      given: state({ downstream: target() }),
      episodes: [warning],
      expected: {
        before: null,
        after: { status: 'warning', reason: 'soft_decline' },
        subscriber: {
          kind: 'write',
          row: {
            status: 'warning',
            derivedStatus: 'warning',
            statusChanged: true,
            statusAt: NOW,
            lockoutAtMs: null,
            payUrl: null,
          },
        },
        history: { status: 'warning', derivedStatus: 'warning', effect: 'changed' },
        message: {
          type: 'subscriber.status_changed',
          sequence: 5,
          endpointKeys: [7],
          payload: { data: { from: null, to: 'warning', reason: 'soft_decline' } },
        },
      },
    },
    {
      name: 'the record as it is: nothing is written',
      given: state({ subscriber: subscriber(), downstream: target() }),
      episodes: [warning],
      expected: { subscriber: null, history: null, message: null },
    },
    {
      name: "the record as it is, an admin's action: only its history entry",
      given: state({ subscriber: subscriber({ overriddenAtMs: T }) }),
      episodes: [warning],
      override: { status: 'warning', reason: 'soft_decline', atMs: T },
      cause: adminCause(),
      expected: { subscriber: null, history: { status: 'warning', effect: 'none' }, message: null },
    },
    {
      name: 'a grace: a derived lockout is answered warning until the dunning start plus the grace, with its rule',
      given: state({ policy: policy({ grace_days: 3 }), downstream: target() }),
      episodes: [lockout],
      expected: {
        after: { status: 'warning', reason: 'retries_exhausted' },
        subscriber: {
          row: { status: 'warning', derivedStatus: 'lockout', lockoutAtMs: T + 2 * DAY, lockoutRule: 'grace_ended' },
        },
        history: { status: 'warning', derivedStatus: 'lockout', lockoutAtMs: T + 2 * DAY },
        message: { payload: { data: { to: 'warning', lockout_at: '2026-05-03T12:00:00Z' } } },
      },
    },
    {
      name: 'monitor: the derived status changes, the answer does not; a history entry and no message',
      given: state({
        subscriber: subscriber({ status: 'active', derivedStatus: 'warning', reason: 'retries_exhausted' }),
        policy: policy({ enforcement: 'monitor' }),
        downstream: target(),
      }),
      episodes: [lockout],
      expected: {
        after: { status: 'active', reason: 'retries_exhausted' },
        subscriber: { row: { status: 'active', derivedStatus: 'lockout', statusChanged: true } },
        history: { effect: 'changed' },
        message: null,
      },
    },
    {
      name: 'the open invoice behind the worst episode gives the pay link; only it changed: the record, no entry, no message',
      given: state({
        subscriber: subscriber(),
        invoices: new Map([['in_1', { hostedInvoiceUrl: PAY_URL, status: 'open' }]]),
        downstream: target(),
      }),
      episodes: [warning],
      expected: { subscriber: { row: { payUrl: PAY_URL, statusChanged: false } }, history: null, message: null },
    },
    {
      name: 'a paid invoice gives no pay link',
      given: state({ invoices: new Map([['in_1', { hostedInvoiceUrl: PAY_URL, status: 'paid' }]]) }),
      episodes: [warning],
      expected: { subscriber: { row: { payUrl: null } } },
    },
    {
      name: 'the worst episode is shown: a lockout before a later warning',
      given: state(),
      episodes: [
        episode('sub_2', 'warning', 'payment_action_required', T - 60_000),
        episode('sub_1', 'lockout', 'hard_decline', T - DAY),
      ],
      expected: { after: { status: 'lockout', reason: 'hard_decline' } },
    },
    {
      name: 'no endpoint: no message',
      given: state(),
      episodes: [warning],
      expected: { message: null },
    },
  ])('$name', ({ given, episodes, override, cause, expected }) => {
    expect(settle(given, episodes, override ?? null, cause ?? stripeCause(), 'sub_1', NOW)).toMatchObject(expected);
  });
});

describe('decideAdminChange', () => {
  const set = { kind: 'set', status: 'lockout', reason: 'manual' } as const;
  const del = { kind: 'delete' } as const;
  const warning = episode('sub_1', 'warning', 'soft_decline', T - DAY);

  it.each([
    {
      name: 'a status over the episodes: applied, as an override of now',
      given: state({ episodes: [warning], subscriber: subscriber() }),
      change: set,
      expected: {
        outcome: 'applied',
        after: { status: 'lockout', reason: 'manual' },
        effect: {
          subscriber: { row: { derivedStatus: 'lockout', overriddenAtMs: T } },
          history: { effect: 'changed', cause: { adminAction: 'set_status' } },
        },
      },
    },
    {
      name: 'a status when an event of a later second has spoken: stale, nothing written',
      given: state({ episodes: [episode('sub_1', 'warning', 'soft_decline', T + 2000)] }),
      change: set,
      expected: { outcome: 'stale', effect: { subscriber: null, history: null, episodes: [], tombstone: null } },
    },
    {
      name: 'a status before a later removal: stale',
      given: state({ tombstone: { atMs: T + 1000, rank: RANKS.removed, eventId: 'evt_del' } }),
      change: set,
      expected: { outcome: 'stale', effect: { subscriber: null, history: null } },
    },
    {
      name: 'a removal: the older episodes go, the tombstone is set, the record goes',
      given: state({ episodes: [warning], subscriber: subscriber(), downstream: target() }),
      change: del,
      expected: {
        outcome: 'applied',
        after: null,
        effect: {
          removedEpisodes: ['sub_1'],
          tombstone: { atMs: T, rank: RANKS.removed, eventId: 'adm_1' },
          subscriber: { kind: 'delete' },
          history: { effect: 'removed', cause: { adminAction: 'delete' } },
          message: { type: 'subscriber.deleted', payload: { data: { cause: { source: 'admin', action: 'delete' } } } },
        },
      },
    },
    {
      name: 'a removal when an event dated after now keeps its episode: stale',
      given: state({ episodes: [episode('sub_1', 'warning', 'soft_decline', T + 1)], subscriber: subscriber() }),
      change: del,
      expected: { outcome: 'stale', effect: { removedEpisodes: [], tombstone: null, subscriber: null } },
    },
    {
      name: 'a removal older than the last one: stale',
      given: state({ tombstone: { atMs: T + 1000, rank: RANKS.removed, eventId: 'evt_del' } }),
      change: del,
      expected: { outcome: 'stale', effect: { tombstone: null } },
    },
  ])('$name', ({ given, change, expected }) => {
    expect(decideAdminChange(given, change, adminCause(), NOW)).toMatchObject(expected);
  });
});

describe('decideDueLockout and decideReanswer', () => {
  const lockout = episode('sub_1', 'lockout', 'retries_exhausted', T - 4 * DAY);
  const graced = subscriber({
    status: 'warning',
    derivedStatus: 'lockout',
    reason: 'retries_exhausted',
    lockoutAtMs: T - DAY,
    lockoutRule: 'grace_ended',
  });

  it.each([
    {
      name: 'no record: nothing due',
      given: state(),
      expected: { outcome: 'not_due', effect: { subscriber: null, history: null } },
    },
    {
      name: 'a lockout still ahead: nothing due',
      given: state({ subscriber: { ...graced, lockoutAtMs: T + 1 } }),
      expected: { outcome: 'not_due', effect: { subscriber: null } },
    },
    {
      name: 'a grace that ended: recorded as of its time, with its rule',
      given: state({
        episodes: [lockout],
        subscriber: graced,
        policy: policy({ grace_days: 3 }),
        downstream: target(),
      }),
      expected: {
        outcome: 'recorded',
        after: { status: 'lockout', reason: 'retries_exhausted' },
        effect: {
          subscriber: { row: { status: 'lockout', lockoutAtMs: null, statusAt: new Date(T - DAY) } },
          history: {
            status: 'lockout',
            cause: { source: 'policy', policyRule: 'grace_ended', occurredAt: new Date(T - DAY) },
          },
          message: {
            payload: {
              data: {
                from: 'warning',
                to: 'lockout',
                cause: { source: 'policy', rule: 'grace_ended' },
                occurred_at: '2026-04-30T12:00:00.000Z',
              },
            },
          },
        },
      },
    },
  ])('due lockout: $name', ({ given, expected }) => {
    expect(decideDueLockout(given, NOW)).toMatchObject(expected);
  });

  const changed: ChangeCause = {
    source: 'policy',
    eventId: null,
    eventType: null,
    declineCode: null,
    occurredAt: new Date(T - 60_000),
    policyRule: 'policy_changed',
  };
  it.each([
    {
      name: 'no record: unknown, nothing written',
      given: state({ episodes: [lockout] }),
      expected: { outcome: 'unknown', effect: { subscriber: null, history: null } },
    },
    {
      name: 'banner_only: a lockout is answered warning',
      given: state({
        episodes: [lockout],
        subscriber: subscriber({ status: 'lockout', derivedStatus: 'lockout', reason: 'retries_exhausted' }),
        policy: policy({ enforcement: 'banner_only' }),
      }),
      expected: {
        outcome: 'answered',
        after: { status: 'warning' },
        effect: {
          subscriber: { row: { status: 'warning', derivedStatus: 'lockout' } },
          history: { cause: { policyRule: 'policy_changed' } },
        },
      },
    },
    {
      name: 'an override stands through a policy change',
      given: state({
        episodes: [lockout],
        subscriber: subscriber({
          status: 'active',
          derivedStatus: 'active',
          reason: 'manual',
          overriddenAtMs: T - DAY,
        }),
      }),
      expected: {
        outcome: 'answered',
        after: { status: 'active', reason: 'manual' },
        effect: { subscriber: null, history: null },
      },
    },
  ])('reanswer: $name', ({ given, expected }) => {
    expect(decideReanswer(given, changed, NOW)).toMatchObject(expected);
  });
});

describe('downstreamMessage', () => {
  const change = {
    type: 'subscriber.status_changed',
    before: { status: 'active', reason: 'paid' },
    after: { status: 'warning', reason: 'soft_decline' },
    lockoutAtMs: null,
  } as const;

  it('is the whole message: envelope, sequence, cause and data, in the order sent', () => {
    const message = downstreamMessage(target(), 'cus_1', change, stripeCause(new Date(T - 1000)), NOW);
    expect(message).toEqual({
      id: 'msg_test',
      type: 'subscriber.status_changed',
      sequence: 5,
      endpointKeys: [7],
      payload: {
        id: 'msg_test',
        tenant: 'acme',
        livemode: true,
        timestamp: '2026-05-01T12:00:00.000Z',
        type: 'subscriber.status_changed',
        data: {
          processor_customer_id: 'cus_1',
          sequence: 5,
          cause: { source: 'stripe', stripe_event_id: 'evt_1', stripe_event_type: 'invoice.payment_failed' },
          occurred_at: '2026-05-01T11:59:59.000Z',
          from: 'active',
          to: 'warning',
          reason: 'soft_decline',
          previous_reason: 'paid',
        },
      },
    });
    expect(JSON.stringify(message?.payload)).toBe(
      '{"id":"msg_test","tenant":"acme","livemode":true,"timestamp":"2026-05-01T12:00:00.000Z","type":"subscriber.status_changed","data":{"processor_customer_id":"cus_1","sequence":5,"cause":{"source":"stripe","stripe_event_id":"evt_1","stripe_event_type":"invoice.payment_failed"},"occurred_at":"2026-05-01T11:59:59.000Z","from":"active","to":"warning","reason":"soft_decline","previous_reason":"paid"}}',
    );
  });

  it.each([
    { name: 'no target: none', given: null, expected: null },
    { name: 'a target with no endpoint: none', given: target({ endpoints: [] }), expected: null },
    {
      name: 'only enabled endpoints that take the type get a delivery; the message is kept for the others',
      given: target({
        endpoints: [
          { key: 1, enabled: true, eventTypes: null },
          { key: 2, enabled: false, eventTypes: null },
          { key: 3, enabled: true, eventTypes: ['subscriber.deleted'] },
          { key: 4, enabled: true, eventTypes: ['subscriber.status_changed'] },
        ],
      }),
      expected: { sequence: 5, endpointKeys: [1, 4] },
    },
    {
      name: 'every endpoint disabled: kept, delivered to none',
      given: target({ endpoints: [{ key: 2, enabled: false, eventTypes: null }], lastSequence: 0 }),
      expected: { sequence: 1, endpointKeys: [] },
    },
  ])('$name', ({ given, expected }) => {
    const message = downstreamMessage(given, 'cus_1', change, stripeCause(), NOW);
    if (expected === null) expect(message).toBeNull();
    else expect(message).toMatchObject(expected);
  });

  it.each([
    [
      {
        source: 'admin',
        eventId: null,
        eventType: null,
        declineCode: null,
        occurredAt: NOW,
        adminAction: 'delete',
      } as ChangeCause,
      { source: 'admin', action: 'delete' },
    ],
    [
      { source: 'admin', eventId: null, eventType: null, declineCode: null, occurredAt: NOW } as ChangeCause,
      { source: 'admin', action: 'set_status' },
    ],
    [
      {
        source: 'policy',
        eventId: null,
        eventType: null,
        declineCode: null,
        occurredAt: NOW,
        policyRule: 'escalated',
      } as ChangeCause,
      { source: 'policy', rule: 'escalated' },
    ],
  ])('tells the cause %j as %j', (cause, told) => {
    expect(
      downstreamMessage(
        target(),
        'cus_1',
        { type: 'subscriber.deleted', before: { status: 'lockout', reason: 'manual' } },
        cause,
        NOW,
      )?.payload.data.cause,
    ).toEqual(told);
  });
});
