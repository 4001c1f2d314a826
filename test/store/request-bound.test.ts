import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReadModel } from '../../src/readmodel/index.js';
import {
  StoreBound,
  StoreTimeoutError,
  isStoreUnavailable,
  outsideRequestBounds,
  storeCallEnd,
  withStoreBound,
} from '../../src/store/index.js';
import type { ChangeCause } from '../../src/store/index.js';
import { availableEngines } from '../helpers/engines.js';
import type { Engine } from '../helpers/engines.js';
import { newTenant } from '../helpers/store-fixtures.js';

/**
 * A request's bound on its store calls, as both engines apply it. A bound already over
 * stands for a store that did not answer in time: no clock is waited on.
 */
const engines = await availableEngines();
const T = new Date('2026-03-01T12:00:00Z');
const admin: ChangeCause = { source: 'admin', eventId: null, eventType: null, declineCode: null, occurredAt: T };
/** A bound whose end has passed: any call under it must fail at once. */
const over = () => new StoreBound(1_000, 'fixed', 0);

describe('StoreBound', () => {
  it('gives a request one end, from its first call on, and each call of a batch its own', () => {
    const request = new StoreBound(100, 'request');
    expect([request.endFor(1_000), request.endFor(1_050), request.endFor(5_000)]).toEqual([1_100, 1_100, 1_100]);
    const call = new StoreBound(100, 'call');
    expect([call.endFor(1_000), call.endFor(1_050)]).toEqual([1_100, 1_150]);
  });

  it('is seen by the calls of the context it runs, and not outside it', async () => {
    expect(storeCallEnd()).toBeNull();
    await withStoreBound(new StoreBound(100, 'fixed', 42), async () => {
      await Promise.resolve();
      expect(storeCallEnd()).toBe(42);
      expect(outsideRequestBounds(() => storeCallEnd())).toBeNull();
    });
    expect(storeCallEnd()).toBeNull();
  });
});

describe.each(engines)('a request bound on the store ($name)', (engine: Engine) => {
  let opened: Awaited<ReturnType<Engine['open']>>;
  beforeAll(async () => {
    opened = await engine.open();
  });
  afterAll(() => opened.cleanup());

  it('refuses a query and a transaction past the bound, as the store being unavailable, and the next call works', async () => {
    const { db } = opened;
    const query = await withStoreBound(over(), () => db.query('SELECT 1')).catch((err: unknown) => err);
    expect(query).toBeInstanceOf(StoreTimeoutError);
    expect(isStoreUnavailable(query)).toBe(true);
    const tx = await withStoreBound(over(), () => db.transaction((t) => t.query('SELECT 1'))).catch(
      (err: unknown) => err,
    );
    expect(tx).toBeInstanceOf(StoreTimeoutError);
    // Under a bound with time left, the same calls run.
    const bound = new StoreBound(10_000, 'request');
    expect(await withStoreBound(bound, () => db.query<{ one: number }>('SELECT 1 AS one'))).toEqual([{ one: 1 }]);
    expect(
      await withStoreBound(bound, () => db.transaction((t) => t.query<{ two: number }>('SELECT 2 AS two'))),
    ).toEqual([{ two: 2 }]);
    expect(await db.query<{ three: number }>('SELECT 3 AS three')).toEqual([{ three: 3 }]);
  });

  it("runs what a commit sets off (the read model's catch-up, deliveries) outside the bound of the request that committed", async () => {
    const { store } = opened;
    const created = await store.tenants.createTenant(newTenant('bound'), T);
    if (!created.ok) throw new Error(created.error);
    const model = await ReadModel.open(store.changes);
    try {
      const seen: (number | null)[] = [];
      const stop = store.changes.onCommit(() => seen.push(storeCallEnd()));
      await withStoreBound(new StoreBound(10_000, 'request'), () =>
        store.subscribers.applyChange(
          created.tenant.id,
          'cus_bound',
          { kind: 'set', status: 'lockout', reason: 'manual' },
          admin,
          T,
        ),
      );
      stop();
      expect(seen).toEqual([null]);
      // A catch-up asked for from inside a request whose bound is over still reads.
      const failedBefore = model.snapshotStats().catchUps.failed;
      await withStoreBound(over(), () => model.catchUp());
      expect(model.snapshotStats().catchUps.failed).toBe(failedBefore);
      expect(model.status(created.tenant.id, 'cus_bound')).toBe('lockout');
    } finally {
      await model.close();
    }
  });
});
