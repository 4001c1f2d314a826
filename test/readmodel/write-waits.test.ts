import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Change } from '../../src/domain/stripe/fold.js';
import { ReadModel } from '../../src/readmodel/index.js';
import type { Siblings } from '../../src/readmodel/index.js';
import { positionCovers } from '../../src/store/index.js';
import type { ChangeCause, ChangePosition, Store } from '../../src/store/index.js';
import { availableEngines } from '../helpers/engines.js';
import type { Engine } from '../helpers/engines.js';
import { newTenant } from '../helpers/store-fixtures.js';

const engines = await availableEngines();
const T = new Date('2026-03-01T12:00:00Z');
const admin: ChangeCause = { source: 'admin', eventId: null, eventType: null, declineCode: null, occurredAt: T };
const lockout: Change = { kind: 'set', status: 'lockout', reason: 'manual' };

describe('positionCovers', () => {
  it('is true when every transaction the target sees is seen, whatever else is', () => {
    expect(positionCovers('10:10:', '10:10:')).toBe(true);
    expect(positionCovers('12:15:13', '10:10:')).toBe(true);
    // The target saw 10 (committed before it); a reader with 10 running has not.
    expect(positionCovers('10:12:10', '11:11:')).toBe(false);
    // Behind: 11 committed between them.
    expect(positionCovers('10:11:', '12:12:')).toBe(false);
    // The target's newer ids are all running in it: nothing past 11 seen, as by the reader.
    expect(positionCovers('11:11:', '11:14:11,12,13')).toBe(true);
    expect(positionCovers('11:11:', '11:14:11,13')).toBe(false);
    // A running id of the reader's that the target saw.
    expect(positionCovers('10:14:12', '10:14:')).toBe(false);
    expect(positionCovers('10:14:12', '10:14:12')).toBe(true);
    // Not positions: read again.
    expect(positionCovers('', '10:10:')).toBe(false);
    expect(positionCovers('10:10:', 'x')).toBe(false);
  });
});

/** Siblings that record what they were asked, and answer as told (never: not at all). */
function fakeSiblings(answer: boolean | 'never'): Siblings & { asked: (ChangePosition | null)[] } {
  const asked: (ChangePosition | null)[] = [];
  return {
    asked,
    catchUp(position) {
      asked.push(position);
      return answer === 'never' ? new Promise<boolean>(() => {}) : Promise.resolve(answer);
    },
  };
}

describe.each(engines)("a write's wait for the copies ($name)", (engine: Engine) => {
  let opened: Awaited<ReturnType<Engine['open']>>;
  let store: Store;
  let tenantId: number;
  beforeAll(async () => {
    opened = await engine.open();
    store = opened.store;
    const created = await store.tenants.createTenant(newTenant('waits'), T);
    if (!created.ok) throw new Error(created.error);
    tenantId = created.tenant.id;
  });
  afterAll(() => opened.cleanup());

  it('waits for nothing when the request committed nothing, and for its own copy then the siblings when it did', async () => {
    const siblings = fakeSiblings(true);
    const model = await ReadModel.open(store.changes, { siblings });
    try {
      const idle = model.writeMark();
      expect(model.writesApplied(idle)).toBeNull();
      expect(siblings.asked).toEqual([]);

      const mark = model.writeMark();
      await store.subscribers.applyChange(tenantId, 'cus_wait', lockout, admin, T);
      await model.writesApplied(mark);
      expect(model.status(tenantId, 'cus_wait')).toBe('lockout');
      // The siblings were asked to read at least as far as this copy, which shows the write.
      expect(siblings.asked).toHaveLength(1);
      const position = siblings.asked[0] ?? null;
      expect(position).not.toBeNull();
      expect(model.snapshotStats().writeWaits).toEqual({ total: 1, timedOut: 0 });
    } finally {
      await model.close();
    }
  });

  it('answers at its bound when a sibling does not, or cannot read, and counts it', async () => {
    for (const answer of ['never', false] as const) {
      const model = await ReadModel.open(store.changes, { siblings: fakeSiblings(answer), writeWaitMs: 50 });
      try {
        const mark = model.writeMark();
        await store.subscribers.applyChange(tenantId, `cus_slow_${String(answer)}`, lockout, admin, T);
        await model.writesApplied(mark);
        expect(model.snapshotStats().writeWaits, String(answer)).toEqual({ total: 1, timedOut: 1 });
      } finally {
        await model.close();
      }
    }
  });

  it("as a sibling, reads the log unless it is already past the writer's position", async () => {
    const siblings = fakeSiblings(true);
    const writer = await ReadModel.open(store.changes, { siblings });
    const sibling = await ReadModel.open(store.changes);
    try {
      const mark = writer.writeMark();
      await store.subscribers.applyChange(tenantId, 'cus_sibling', lockout, admin, T);
      await writer.writesApplied(mark);
      const position = siblings.asked[0] ?? null;
      expect(position).not.toBeNull();
      expect(await sibling.catchUpTo(position)).toBe(true);
      expect(sibling.status(tenantId, 'cus_sibling')).toBe('lockout');
      // Closed, it reads no more (a read would answer false): past the position, it answers
      // from what it holds; asked without one, it would have to read.
      await sibling.close();
      expect(await sibling.catchUpTo(position)).toBe(true);
      expect(await sibling.catchUpTo(null)).toBe(false);
    } finally {
      await writer.close();
      await sibling.close();
    }
  });
});
