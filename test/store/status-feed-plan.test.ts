import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/store/index.js';
import { MAX_FEED_PAGE } from '../../src/http/routes/statuses.js';
import { STATUS_CHANGES_SQL } from '../../src/store/feed/status-feed.js';
import { availableEngines } from '../helpers/engines.js';

/**
 * The status feed's read is planned as the few rows it reads, on a database nobody has
 * analyzed yet (a new deployment's): at the page `@dunwall/node` asks for (the largest), its
 * estimated cost stays under the server's `jit_above_cost`, and running it compiles nothing.
 * Its horizon table's one row was once estimated at 2,200, and every read of the feed was
 * JIT-compiled (0.5 to 1 s before a change reached a follower on another instance).
 * PostgreSQL only: PGlite has no JIT.
 */
const engines = await availableEngines();
const postgres = engines.find((e) => e.name === 'postgres');

interface Explained {
  Plan: { 'Total Cost': number };
  JIT?: unknown;
}

async function explain(db: Db, analyze: boolean, params: unknown[]): Promise<Explained> {
  const [row] = await db.query<{ 'QUERY PLAN': unknown }>(
    `EXPLAIN (${analyze ? 'ANALYZE, ' : ''}FORMAT JSON) ${STATUS_CHANGES_SQL}`,
    params,
  );
  const raw = row?.['QUERY PLAN'];
  const json = (typeof raw === 'string' ? JSON.parse(raw) : raw) as Explained[];
  const first = json[0];
  if (first === undefined) throw new Error('no plan');
  return first;
}

describe.runIf(postgres)('the status feed read on a fresh database (postgres)', () => {
  let db: Db;
  let cleanup: () => Promise<void> = async () => {};
  let jitAboveCost = 0;
  let before = '';
  let after = '';

  beforeAll(async () => {
    if (!postgres) return;
    const opened = await postgres.open();
    db = opened.db;
    cleanup = opened.cleanup;
    const [setting] = await db.query<{ jit_above_cost: string }>('SHOW jit_above_cost');
    jitAboveCost = Number(setting?.jit_above_cost);
    // Positions around a few changes of one tenant, as the feed hands them out; no ANALYZE.
    before = (await db.query<{ s: string }>('SELECT pg_current_snapshot()::text AS s'))[0]?.s ?? '';
    for (let i = 0; i < 3; i += 1) {
      await db.query(
        `INSERT INTO status_changes (tenant_id, processor_customer_id, status, occurred_at) VALUES (1, $1, 'lockout', now())`,
        [`cus_plan_${i}`],
      );
    }
    after = (await db.query<{ s: string }>('SELECT pg_current_snapshot()::text AS s'))[0]?.s ?? '';
  });
  afterAll(async () => {
    await cleanup();
  });

  it.each([
    ['a position', () => [1, before, null, null, MAX_FEED_PAGE + 1]],
    ['a position inside a set a full page ended in', () => [1, before, after, '1', MAX_FEED_PAGE + 1]],
  ])('at %s: costed under jit_above_cost, and run without compiling', async (_what, params) => {
    expect(jitAboveCost).toBeGreaterThan(0);
    const planned = await explain(db, false, params());
    expect(planned.Plan['Total Cost']).toBeLessThan(jitAboveCost);
    const ran = await explain(db, true, params());
    expect(ran.JIT).toBeUndefined();
  });

  it('reads the changes it was asked for', async () => {
    const rows = await db.query<{ processor_customer_id: string | null }>(STATUS_CHANGES_SQL, [
      1,
      before,
      null,
      null,
      MAX_FEED_PAGE + 1,
    ]);
    expect(rows.map((r) => r.processor_customer_id)).toEqual(['cus_plan_0', 'cus_plan_1', 'cus_plan_2']);
  });
});
