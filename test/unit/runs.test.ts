import { describe, expect, it } from 'vitest';
import { runChanges } from '../../src/domain/runs.js';
import type { RunEpisode } from '../../src/domain/runs.js';

const ep = (over: Partial<RunEpisode>): RunEpisode => ({
  key: 'sub_1',
  state: 'warning',
  reason: 'soft_decline',
  position: { atMs: 100 },
  dunningStartedAtMs: 100,
  resolvedAtMs: null,
  invoiceId: 'in_1',
  ...over,
});

describe('dunning run changes', () => {
  it('opens a run on a first failure, ends it on a resolution, and a resolved episode alone starts none', () => {
    expect(runChanges([], [ep({})])).toEqual([
      { kind: 'open', episode: 'sub_1', startedAtMs: 100, invoiceId: 'in_1', declineClass: 'soft' },
    ]);
    const paid = ep({ state: 'resolved', reason: 'paid', position: { atMs: 200 }, resolvedAtMs: 200 });
    expect(runChanges([ep({})], [paid])).toEqual([
      { kind: 'close', episode: 'sub_1', startedAtMs: 100, endedAtMs: 200, outcome: 'paid', invoiceId: 'in_1' },
    ]);
    expect(runChanges([], [{ ...paid, dunningStartedAtMs: null }])).toEqual([]);
  });

  it('splits a run when an older resolution arrives late, and ends an open run on removal', () => {
    const before = ep({ reason: 'hard_decline', position: { atMs: 300 }, dunningStartedAtMs: 100 });
    const after = { ...before, dunningStartedAtMs: 300, resolvedAtMs: 200 };
    expect(runChanges([before], [after], [], null, new Map([['sub_1', 'voided']]))).toEqual([
      { kind: 'close', episode: 'sub_1', startedAtMs: 100, endedAtMs: 200, outcome: 'voided', invoiceId: 'in_1' },
      { kind: 'open', episode: 'sub_1', startedAtMs: 300, invoiceId: 'in_1', declineClass: 'hard' },
    ]);
    expect(runChanges([before], [], ['sub_1'], 400)).toEqual([
      { kind: 'close', episode: 'sub_1', startedAtMs: 100, endedAtMs: 400, outcome: 'removed', invoiceId: 'in_1' },
    ]);
  });
});
