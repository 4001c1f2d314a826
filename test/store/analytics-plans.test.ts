import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/store/index.js';
import { IMPACT_SQL, RECOVERY_SQL } from '../../src/store/analytics/analytics.js';
import { availableEngines } from '../helpers/engines.js';

/**
 * The analytics statements keep reading through the indexes on PostgreSQL: over a seeded,
 * VACUUMed and ANALYZEd store where the tenant asked for holds a tenth of the runs, the plan of each
 * tenant-scoped statement (EXPLAIN, FORMAT JSON, with the parameters the store passes)
 * reads no table sequentially, reads the index it was written for, and groups the runs
 * into groups the planner knows to be few. A later edit of a
 * statement or a migration that loses one fails here rather than on a large tenant
 * (docs/operations.md, analytics). PostgreSQL only: PGlite's planner is the same, but the
 * figures that matter are a server's.
 */
const engines = await availableEngines();
const postgres = engines.find((e) => e.name === 'postgres');

/** Subscribers of the tenant asked for, and of the three others. */
const MEASURED = 20_000;
const OTHERS = [60_000, 60_000, 60_000];
const BIG_TABLES = ['dunning_runs', 'subscriber_episodes', 'subscribers'];
const ANCHOR = '2026-01-01T00:00:00Z';
const FROM = new Date('2025-01-01T00:00:00Z');
const TO = new Date(ANCHOR);

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Plan Rows'?: number;
  Plans?: PlanNode[];
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

async function plan(db: Db, sql: string, params: unknown[]): Promise<PlanNode[]> {
  const [row] = await db.query<{ 'QUERY PLAN': unknown }>(`EXPLAIN (FORMAT JSON) ${sql}`, params);
  const raw = row?.['QUERY PLAN'];
  const json = (typeof raw === 'string' ? JSON.parse(raw) : raw) as { Plan: PlanNode }[];
  const root = json[0]?.Plan;
  if (root === undefined) throw new Error('no plan');
  return nodes(root);
}

const seqScans = (all: PlanNode[]) =>
  all
    .filter((n) => n['Node Type'].includes('Seq Scan') && BIG_TABLES.includes(n['Relation Name'] ?? ''))
    .map((n) => n['Relation Name']);
/**
 * Groupings of runs the planner expects to be many: it sorts (on disk, at a million) what it
 * takes for as many groups as runs, where hashing a few groups is one pass in memory.
 */
const MAX_GROUPS = 100;
const reads = (n: PlanNode, relation: string): boolean =>
  n['Relation Name'] === relation || (n.Plans ?? []).some((c) => reads(c, relation));
const manyGroups = (all: PlanNode[]) =>
  all
    .filter((n) => n['Node Type'] === 'Aggregate' && reads(n, 'dunning_runs') && (n['Plan Rows'] ?? 0) > MAX_GROUPS)
    .map((n) => n['Plan Rows']);
/** How each large table is read: the scan's type and its index. */
const scans = (all: PlanNode[]) =>
  all
    .filter((n) => n['Index Name'] !== undefined)
    .map((n) => `${n['Node Type']} ${n['Index Name'] ?? ''}`)
    .sort();
const indexes = (all: PlanNode[]) =>
  [...new Set(all.map((n) => n['Index Name']).filter((i): i is string => i !== undefined))].sort();

describe.runIf(postgres)('analytics plans (postgres)', () => {
  let db: Db;
  let tenantId = 0;
  let cleanup: () => Promise<void> = async () => {};

  beforeAll(async () => {
    if (!postgres) return;
    const opened = await postgres.open();
    db = opened.db;
    cleanup = opened.cleanup;
    // Set-based, as the bench seeds: 3% of each tenant's subscribers in dunning (an open run,
    // an unresolved episode), 60% with one or two ended runs over the year, the tenants'
    // runs interleaved in the table by their start.
    await db.transaction(async (tx) => {
      await tx.exec('SET LOCAL session_replication_role = replica');
      const sizes = [MEASURED, ...OTHERS];
      const ids: number[] = [];
      for (const [i] of sizes.entries()) {
        const [t] = await tx.query<{ id: number }>(
          `INSERT INTO tenants (slug, tier, created_at, updated_at) VALUES ($1, 'growth', $2, $2) RETURNING id`,
          [`plans-${i}`, ANCHOR],
        );
        ids.push(t?.id ?? 0);
      }
      tenantId = ids[0] ?? 0;
      await tx.query(
        `INSERT INTO subscribers (tenant_id, processor_customer_id, status, derived_status, reason, status_at, overridden_at, updated_at)
         SELECT t.id, 'cus_' || n, x.s, x.s, 'manual', $3::timestamptz, CASE WHEN n % 1000 = 999 THEN $3::timestamptz END, $3::timestamptz
         FROM unnest($1::int[], $2::int[]) AS t (id, size), generate_series(1, t.size) AS n,
           LATERAL (SELECT CASE WHEN n % 1000 = 999 OR n % 100 = 2 THEN 'lockout' WHEN n % 100 < 2 THEN 'warning' ELSE 'active' END AS s) x`,
        [ids, sizes, ANCHOR],
      );
      await tx.query(
        `INSERT INTO dunning_runs (tenant_id, processor_customer_id, episode, started_at, ended_at, outcome, amount, currency, decline_class)
         SELECT tenant_id, 'cus_' || n, 'sub_' || n, started_at, ended_at, outcome, 500 + n % 100 * 100,
           (ARRAY['usd', 'eur', 'gbp'])[1 + n % 3], (ARRAY['soft', 'authentication', 'exhausted', 'hard'])[1 + n % 4]
         FROM (
           SELECT t.id AS tenant_id, n, $3::timestamptz - (n % 30) * interval '1 day' AS started_at, NULL::timestamptz AS ended_at, NULL AS outcome
           FROM unnest($1::int[], $2::int[]) AS t (id, size), generate_series(1, t.size) AS n WHERE n % 100 < 3
           UNION ALL
           SELECT t.id, n, s.at, s.at + (1 + n % 20) * interval '1 day',
             (ARRAY['paid', 'paid', 'paid', 'paid', 'voided', 'subscription_ended', 'removed'])[1 + (n + k) % 7]
           FROM unnest($1::int[], $2::int[]) AS t (id, size), generate_series(1, t.size) AS n,
             generate_series(1, CASE WHEN n % 10 < 4 THEN 1 WHEN n % 10 = 4 THEN 2 ELSE 0 END) AS k,
             LATERAL (SELECT $3::timestamptz - interval '380 days' + ((n * 7919 + k * 104729) % 358) * interval '1 day' AS at) s
         ) r ORDER BY started_at`,
        [ids, sizes, ANCHOR],
      );
      await tx.query(
        `INSERT INTO subscriber_episodes (tenant_id, processor_customer_id, episode, state, reason, at, rank, event_id, updated_at, dunning_started_at, resolved_at)
         SELECT DISTINCT ON (r.tenant_id, r.processor_customer_id) r.tenant_id, r.processor_customer_id, r.episode,
           CASE WHEN r.ended_at IS NOT NULL THEN 'resolved' WHEN s.derived_status = 'lockout' THEN 'lockout' ELSE 'warning' END,
           'soft_decline', COALESCE(r.ended_at, r.started_at), 0, 'evt_' || r.id, $1::timestamptz, r.started_at, r.ended_at
         FROM dunning_runs r JOIN subscribers s ON s.tenant_id = r.tenant_id AND s.processor_customer_id = r.processor_customer_id
         ORDER BY r.tenant_id, r.processor_customer_id, r.ended_at DESC NULLS FIRST`,
        [ANCHOR],
      );
    });
    // As autovacuum leaves a settled table: the visibility map set, so that the planner counts
    // on reading a covering index alone.
    await db.exec('VACUUM ANALYZE subscribers, subscriber_episodes, dunning_runs');
  }, 120_000);

  afterAll(() => cleanup());

  it('holds the tenant asked for as a tenth of the runs, some of them open', async () => {
    const [row] = await db.query<{ mine: number; all: number; open: number }>(
      `SELECT count(*) FILTER (WHERE tenant_id = $1)::int AS mine, count(*)::int AS all,
         count(*) FILTER (WHERE tenant_id = $1 AND ended_at IS NULL)::int AS open FROM dunning_runs`,
      [tenantId],
    );
    expect(row?.open).toBe(600);
    expect((row?.mine ?? 0) / (row?.all ?? 1)).toBeCloseTo(0.1, 2);
  });

  const recovery: [string, string, (t: number) => unknown[], string[]][] = [
    ['at risk', RECOVERY_SQL.atRisk, (t) => [t], ['dunning_runs_open']],
    ['recovered by week', RECOVERY_SQL.ended, (t) => [t, FROM, TO, 'week'], ['dunning_runs_ended']],
    ['recovered by month', RECOVERY_SQL.ended, (t) => [t, FROM, TO, 'month'], ['dunning_runs_ended']],
    // Either run index holds the tenant's runs with both times: the planner takes the one it costs lower.
    ['time to recover', RECOVERY_SQL.times, (t) => [t, FROM, TO], ['dunning_runs_ended', 'dunning_runs_started']],
    ['outcomes, decline mix and cohorts', RECOVERY_SQL.started, (t) => [t, FROM, TO], ['dunning_runs_started']],
  ];
  it.each(recovery)(
    '%s: read through its index, no table read whole, its runs in few groups',
    async (_name, sql, params, allowed) => {
      const all = await plan(db, sql, params(tenantId));
      expect(seqScans(all)).toEqual([]);
      expect(manyGroups(all)).toEqual([]);
      const used = indexes(all);
      expect(used).toHaveLength(1);
      expect(allowed).toContain(used[0]);
    },
  );

  it('policy impact: the non-active subscribers and their unresolved episodes from their partial indexes alone', async () => {
    const cutoffs = ['2025-12-25T00:00:00Z', '2025-12-18T00:00:00Z', 'infinity', 'infinity'];
    const all = await plan(db, IMPACT_SQL, [tenantId, ...cutoffs]);
    expect(seqScans(all)).toEqual([]);
    // Both indexes cover the columns the statement takes (019): no heap page read per customer.
    expect(scans(all)).toEqual([
      'Index Only Scan subscriber_episodes_unresolved',
      'Index Only Scan subscribers_not_active',
    ]);
  });
});
