import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Retention } from '../../src/runtime/retention.js';
import type { Db } from '../../src/store/index.js';
import { tryDeploymentLock } from '../../src/store/db/db.js';
import { RETENTION_LOCK_KEYS } from '../../src/store/maintenance/maintenance.js';
import { availableEngines } from '../helpers/engines.js';
import type { Engine } from '../helpers/engines.js';
import { newTenant } from '../helpers/store-fixtures.js';

const engines = await availableEngines();
const DAY_MS = 86_400_000;
const NOW = Date.parse('2026-06-01T00:00:00Z');
const silent = { info() {}, warn() {} };

describe.each(engines)('retention of Stripe events and history ($name)', (engine) => {
  let opened: Awaited<ReturnType<Engine['open']>>;
  let tenantId = 0;

  beforeAll(async () => {
    opened = await engine.open();
    const created = await opened.store.tenants.createTenant(newTenant('acme'), new Date(NOW - 400 * DAY_MS));
    if (!created.ok) throw new Error('tenant');
    tenantId = created.tenant.id;
    // Stripe events received 1 to 60 days ago (one a day), and history entries recorded
    // 1 to 500 days ago for three customers, the newest of cus_old 450 days old.
    for (let d = 1; d <= 60; d += 1) {
      const at = new Date(NOW - d * DAY_MS);
      await opened.db.query(
        `INSERT INTO stripe_events (tenant_id, event_id, event_type, processor_customer_id, created, facts, outcome, received_at)
         VALUES ($1, $2, 'invoice.paid', 'cus_1', $3, '{}', 'applied', $3)`,
        [tenantId, `evt_${d}`, at],
      );
    }
    const history = async (customer: string, daysAgo: number) =>
      opened.db.query(
        `INSERT INTO subscriber_history (tenant_id, processor_customer_id, status, reason, source, occurred_at, recorded_at) VALUES ($1, $2, 'warning', 'soft_decline', 'admin', $3, $3)`,
        [tenantId, customer, new Date(NOW - daysAgo * DAY_MS)],
      );
    for (const d of [500, 480, 450]) await history('cus_old', d);
    for (const d of [500, 300, 10]) await history('cus_mixed', d);
    for (const d of [20, 5]) await history('cus_new', d);
    // Stripe intake counters of the days 91, 90 and 89 days ago: kept 90 days.
    await opened.store.stripe.addStripeIntake(
      [91, 90, 89].map((d) => ({
        tenantId,
        day: new Date(NOW - d * DAY_MS).toISOString().slice(0, 10),
        kind: 'received',
        count: 1,
        lastAt: new Date(NOW - d * DAY_MS),
      })),
    );
  });
  afterAll(() => opened?.cleanup());

  const count = async (sql: string) => Number((await opened.db.query<{ n: number }>(sql))[0]?.n ?? -1);

  it("prunes in batches what is past its retention, keeps the rest and every subscriber's newest entry", async () => {
    const sleeps: number[] = [];
    const retention = new Retention({
      maintenance: opened.store.maintenance,
      stripeEventsDays: 30,
      historyDays: 400,
      downstreamDays: 30,
      now: () => NOW,
      log: silent,
      batch: 7,
      sleep: async (ms) => void sleeps.push(ms),
    });
    const run = await retention.runOnce();
    // Events received more than 30 days ago: days 31 to 60.
    expect(run.stripe_events).toBe(30);
    expect(await count('SELECT count(*)::int AS n FROM stripe_events')).toBe(30);
    expect(
      await count(
        `SELECT count(*)::int AS n FROM stripe_events WHERE received_at < '${new Date(NOW - 30 * DAY_MS).toISOString()}'`,
      ),
    ).toBe(0);
    // Batches of 7: 30 rows are 5 batches, with a pause after each full one.
    expect(sleeps.length).toBe(4);
    // History older than 400 days: cus_old's 500 and 480 (its newest, 450, stays) and cus_mixed's 500.
    expect(run.subscriber_history).toBe(3);
    const left = await opened.db.query<{ processor_customer_id: string; n: number }>(
      'SELECT processor_customer_id, count(*)::int AS n FROM subscriber_history GROUP BY processor_customer_id ORDER BY processor_customer_id',
    );
    expect(left.map((r) => [r.processor_customer_id, Number(r.n)])).toEqual([
      ['cus_mixed', 2],
      ['cus_new', 2],
      ['cus_old', 1],
    ]);
    // The intake counters' days before the one 90 days ago.
    expect(run.stripe_intake).toBe(1);
    expect(await count('SELECT count(*)::int AS n FROM stripe_intake')).toBe(2);
    // Nothing left to do: a second run deletes nothing.
    expect(await retention.runOnce()).toEqual({
      stripe_events: 0,
      subscriber_history: 0,
      webhook_events: 0,
      webhook_attempts: 0,
      status_changes: 0,
      stripe_intake: 0,
    });
    expect(retention.deleted).toEqual({
      stripe_events: 30,
      subscriber_history: 3,
      webhook_events: 0,
      webhook_attempts: 0,
      status_changes: 0,
      stripe_intake: 1,
    });
  });

  it('keeps the history for ever with historyDays 0', async () => {
    const before = await count('SELECT count(*)::int AS n FROM subscriber_history');
    const retention = new Retention({
      maintenance: opened.store.maintenance,
      stripeEventsDays: 7,
      historyDays: 0,
      downstreamDays: 30,
      now: () => NOW + 10_000 * DAY_MS,
      log: silent,
      sleep: async () => {},
    });
    const run = await retention.runOnce();
    expect(run.subscriber_history).toBe(0);
    expect(await count('SELECT count(*)::int AS n FROM subscriber_history')).toBe(before);
    expect(await count('SELECT count(*)::int AS n FROM stripe_events')).toBe(0);
  });
});

describe.skipIf(!engines.some((e) => e.name === 'postgres'))(
  'retention across deployments sharing one database (postgres)',
  () => {
    const postgres = engines.find((e) => e.name === 'postgres') as Engine;
    const oldEvent = async (db: Db, tenant: number, id: string) =>
      db.query(
        `INSERT INTO stripe_events (tenant_id, event_id, event_type, processor_customer_id, created, facts, outcome, received_at)
       VALUES ($1, $2, 'invoice.paid', 'cus_1', $3, '{}', 'applied', $3)`,
        [tenant, id, new Date(NOW - 90 * DAY_MS)],
      );

    it('lets one instance of a deployment prune a table at a time, and never holds back a deployment in another schema', async () => {
      const one = await postgres.open();
      const other = await postgres.open();
      let release = () => {};
      const released = new Promise<void>((resolve) => (release = resolve));
      try {
        const ids: number[] = [];
        for (const { store, db } of [one, other]) {
          const created = await store.tenants.createTenant(newTenant('acme'), new Date(NOW - 400 * DAY_MS));
          if (!created.ok) throw new Error('tenant');
          ids.push(created.tenant.id);
          await oldEvent(db, created.tenant.id, 'evt_old');
        }
        // An instance of the first deployment is pruning stripe_events: it holds the table's lock.
        let held = (_: boolean) => {};
        const holding = new Promise<boolean>((resolve) => (held = resolve));
        const pruning = one.db.transaction(async (tx) => {
          held(await tryDeploymentLock(tx, RETENTION_LOCK_KEYS.stripe_events));
          await released;
        });
        expect(await holding).toBe(true);
        // Another instance of it finds the lock taken and leaves the round to it...
        expect(await one.store.maintenance.pruneOld('stripe_events', new Date(NOW), 10)).toBe(0);
        // ...another table is not held back...
        await one.db.query(
          `INSERT INTO subscriber_history (tenant_id, processor_customer_id, status, reason, source, occurred_at, recorded_at) VALUES ($1, 'cus_1', 'warning', 'soft_decline', 'admin', $2, $2), ($1, 'cus_1', 'active', NULL, 'admin', $3, $3)`,
          [ids[0], new Date(NOW - 90 * DAY_MS), new Date(NOW - DAY_MS)],
        );
        expect(await one.store.maintenance.pruneOld('subscriber_history', new Date(NOW - 30 * DAY_MS), 10)).toBe(1);
        // ...and the deployment in the other schema prunes its own rows.
        expect(await other.store.maintenance.pruneOld('stripe_events', new Date(NOW), 10)).toBe(1);
        release();
        await pruning;
        expect(await one.store.maintenance.pruneOld('stripe_events', new Date(NOW), 10)).toBe(1);
      } finally {
        release();
        await one.cleanup();
        await other.cleanup();
      }
    });
  },
);
