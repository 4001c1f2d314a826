import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  answerCustomer,
  dunningStartCutoffs,
  ENFORCEMENTS,
  MAX_ESCALATE_AFTER_DAYS,
  MAX_GRACE_DAYS,
  PolicyImpactTally,
} from '../../src/domain/policy.js';
import type { EpisodeInterval, Policy, PolicyEpisode } from '../../src/domain/policy.js';
import type { SubscriberStatus } from '../../src/domain/types.js';

/**
 * The tally behind the policy impact (docs/tenant-api.md): each customer answered twice by
 * `answerCustomer`, and the store's shortcut (customers grouped by override, or by the set of
 * their episodes' (state, interval of dunning start among the cutoffs), one answer per group)
 * giving exactly the counts of answering every customer one by one, whatever the policies,
 * the starts (on a cutoff to the millisecond included) and the overrides.
 */
const NOW = Date.parse('2026-03-01T12:00:00Z');
const DAY = 86_400_000;

const policy = fc.record<Policy>({
  enforcement: fc.constantFrom(...ENFORCEMENTS),
  grace_days: fc.integer({ min: 0, max: MAX_GRACE_DAYS }),
  escalate_after_days: fc.option(fc.integer({ min: 1, max: MAX_ESCALATE_AFTER_DAYS }), { nil: null }),
});

/** Starts on and around every day boundary a policy can name, and unknown ones. */
const start = fc.option(
  fc
    .tuple(fc.integer({ min: 0, max: 130 }), fc.constantFrom(-1, 0, 1, 3_600_000))
    .map(([days, offset]) => NOW - days * DAY + offset),
  { nil: null },
);
const episode = fc.record<PolicyEpisode>({
  state: fc.constantFrom('warning' as const, 'lockout' as const),
  dunningStartMs: start,
});
const customer = fc.record({
  override: fc.option(fc.constantFrom<SubscriberStatus>('active', 'warning', 'lockout'), { nil: null }),
  episodes: fc.array(episode, { maxLength: 3 }),
});

describe('policy impact tally', () => {
  it('counts a constructed case: grace, escalation, an override, a customer left active', () => {
    const tally = new PolicyImpactTally(
      { enforcement: 'gate', grace_days: 0, escalate_after_days: null },
      { enforcement: 'gate', grace_days: 5, escalate_after_days: 10 },
      NOW,
    );
    tally.add([{ state: 'lockout', dunningStartMs: NOW - 2 * DAY }], null); // in its new grace: released
    tally.add([{ state: 'lockout', dunningStartMs: NOW - 6 * DAY }], null); // past it: still locked out
    tally.add([{ state: 'warning', dunningStartMs: NOW - 10 * DAY }], null); // escalates, to the millisecond
    tally.add([{ state: 'warning', dunningStartMs: NOW - 10 * DAY + 1 }], null); // one millisecond short
    tally.add([{ state: 'warning', dunningStartMs: null }], null); // start unknown: never escalated
    tally.add([{ state: 'warning', dunningStartMs: NOW - 30 * DAY }], 'lockout'); // an override stands
    tally.add([], null);
    expect(tally.result()).toEqual({
      current: { warning: 3, lockout: 3 },
      proposed: { warning: 3, lockout: 3 },
      newlyGated: 1,
      released: 1,
    });
  });

  it('places cutoffs where answerEpisode turns', () => {
    expect(dunningStartCutoffs({ enforcement: 'gate', grace_days: 3, escalate_after_days: 2 }, NOW)).toEqual([
      NOW - 3 * DAY,
      NOW - 2 * DAY,
    ]);
    expect(dunningStartCutoffs({ enforcement: 'monitor', grace_days: 0, escalate_after_days: null }, NOW)).toEqual([]);
  });

  it('answers customers grouped by (state, interval of start) exactly as one by one', () => {
    fc.assert(
      fc.property(policy, policy, fc.array(customer, { maxLength: 40 }), (current, proposed, customers) => {
        const one = new PolicyImpactTally(current, proposed, NOW);
        const grouped = new PolicyImpactTally(current, proposed, NOW);
        const groups = new Map<string, { override: SubscriberStatus | null; episodes: EpisodeInterval[]; n: number }>();
        for (const c of customers) {
          one.add(c.episodes, c.override);
          const kinds =
            c.override !== null
              ? []
              : c.episodes.map((e) => ({ state: e.state, interval: grouped.interval(e.dunningStartMs) }));
          const unique = [...new Map(kinds.map((k) => [`${k.state}${k.interval}`, k])).values()];
          const key = `${c.override}|${unique.map((k) => `${k.state}${k.interval}`).sort()}`;
          const g = groups.get(key) ?? { override: c.override, episodes: unique, n: 0 };
          g.n += 1;
          groups.set(key, g);
        }
        for (const g of groups.values()) grouped.addAlike(g.override, g.episodes, g.n);
        expect(grouped.result()).toEqual(one.result());
        // And one by one is answerCustomer's own answer, twice.
        const lockouts = (p: Policy) =>
          customers.filter((c) => answerCustomer(c.episodes, c.override, p, NOW).status === 'lockout').length;
        expect(one.result().current.lockout).toBe(lockouts(current));
        expect(one.result().proposed.lockout).toBe(lockouts(proposed));
      }),
      { numRuns: 500 },
    );
  });
});
