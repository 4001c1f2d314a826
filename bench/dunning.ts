/**
 * The bench's customers in dunning (issue: a gate the customer can pay through): lookups
 * whose answers carry `lockout_at` and `pay_url` (built once per customer, then kept), the memory each
 * such customer adds to the read model, and a policy change going through a tenant of a
 * million subscribers while lookups are served.
 */
import { createHash } from 'node:crypto';
import { formatLockoutAt } from '../src/domain/policy.js';
import { openDb } from '../src/store/index.js';
import type { Db, StoreTarget } from '../src/store/index.js';
import { benchTenant, expectedBody, seededStatus } from './data.js';
import type { BenchRequest, Entitlements, RequestFactory } from './data.js';

/** A hosted invoice page as long as Stripe's (about 150 characters), distinct per customer. */
export function benchPayUrl(customerId: string): string {
  const token = createHash('sha256').update(`dunwall-bench/invoice/${customerId}`).digest('base64url');
  return `https://invoice.stripe.com/i/acct_1BenchAccount00000/live_${token}${token.slice(0, 40)}?s=ap`;
}

/**
 * A pay link through Dunwall (docs/links.md) as a service at a public address makes it:
 * `{DUNWALL_PUBLIC_URL}/pay/{32 letters and digits}`, distinct per customer.
 */
export function benchDunwallPayUrl(customerId: string): string {
  const token = createHash('sha256')
    .update(`dunwall-bench/link/${customerId}`)
    .digest('base64url')
    .replace(/[-_]/g, '0')
    .slice(0, 32);
  return `https://billing.example.com/pay/${token}`;
}

export interface DunningSet {
  requests: BenchRequest[];
  /** The scheduled lockout every warning of the set carries (epoch seconds). */
  lockoutAtS: number;
  /** Each customer's pay link. */
  payUrl: (customerId: string) => string;
}

/**
 * `count` known subscribers seeded warning or lockout, none of them in `exclude`, each
 * signed: their answers carry the pay link, and a warning's its scheduled lockout.
 */
export function dunningSet(
  factory: RequestFactory,
  tiers: Entitlements,
  count: number,
  exclude: ReadonlySet<string>,
  nowMs: number,
  payUrl: (customerId: string) => string = benchPayUrl,
): DunningSet {
  const lockoutAtS = Math.floor(nowMs / 1000) + 30 * 86_400;
  const requests: BenchRequest[] = [];
  for (const r of factory.hot(factory.total, 11)) {
    if (requests.length >= count) break;
    const n = Number(r.customerId.split('_').at(-1));
    const status = seededStatus(n);
    if (status === 'active' || exclude.has(r.customerId)) continue;
    const plain = JSON.parse(expectedBody(benchTenant(r.tenant), status, tiers)) as Record<string, unknown>;
    const body = {
      ...plain,
      ...(status === 'warning' ? { lockout_at: formatLockoutAt(lockoutAtS * 1000) } : {}),
      pay_url: payUrl(r.customerId),
    };
    requests.push({ ...r, expected: JSON.stringify(body) });
  }
  return { requests, lockoutAtS, payUrl };
}

/** Seeding a million subscribers runs longer than the service's bound on a query. */
const BENCH_QUERY_TIMEOUT_MS = 600_000;

async function withDb<T>(target: StoreTarget, fn: (db: Db) => Promise<T>): Promise<T> {
  const db = await openDb(
    target.engine === 'postgres' ? { ...target, queryTimeoutMs: BENCH_QUERY_TIMEOUT_MS } : target,
  );
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

/** Gives the set's subscribers their pay link and scheduled lockout (`set` null: takes them away again). */
export async function setDunningExtras(
  target: StoreTarget,
  requests: readonly BenchRequest[],
  set: DunningSet | null,
): Promise<void> {
  await withDb(target, async (db) => {
    await db.query(
      `UPDATE subscribers s SET pay_url = x.pay_url,
         lockout_at = CASE WHEN $4::bigint IS NOT NULL AND s.status = 'warning' THEN to_timestamp($4::bigint) END
       FROM unnest($1::text[], $2::text[], $3::text[]) AS x (slug, customer, pay_url)
       JOIN tenants t ON t.slug = x.slug
       WHERE s.tenant_id = t.id AND s.processor_customer_id = x.customer`,
      [
        requests.map((r) => benchTenant(r.tenant).slug),
        requests.map((r) => r.customerId),
        requests.map((r) => (set === null ? null : set.payUrl(r.customerId))),
        set?.lockoutAtS ?? null,
      ],
    );
  });
}

/** The tenant the policy row changes: a million subscribers, one in `DUNNING_EVERY` gated. */
export const POLICY_TENANT = 'bench-policy';
export const POLICY_SUBSCRIBERS = 1_000_000;
const DUNNING_EVERY = 50;

/**
 * Seeds the policy row's tenant (once; a reused store keeps it): every subscriber an admin's
 * status, one in fifty `lockout`, the rest `active`, so that a change to `banner_only`
 * answers 20,000 of them again and reads none of the others.
 */
export async function seedPolicyTenant(target: StoreTarget): Promise<{ subscribers: number; gated: number }> {
  return withDb(target, async (db) => {
    const [exists] = await db.query<{ id: number }>('SELECT id FROM tenants WHERE slug = $1', [POLICY_TENANT]);
    if (!exists) {
      await db.transaction(async (tx) => {
        await tx.exec("SET LOCAL statement_timeout = '0'");
        // As the main seed does: a superuser skips the change log's triggers (no service runs yet).
        const [su] = await tx.query<{ on: boolean }>("SELECT current_setting('is_superuser') = 'on' AS on");
        if (su?.on) await tx.exec('SET LOCAL session_replication_role = replica');
        const [t] = await tx.query<{ id: number }>(
          `INSERT INTO tenants (slug, tier, created_at, updated_at) VALUES ($1, 'growth', now(), now()) RETURNING id`,
          [POLICY_TENANT],
        );
        await tx.query(
          `INSERT INTO subscribers (tenant_id, processor_customer_id, status, derived_status, reason, status_at, overridden_at, updated_at)
           SELECT $1, 'cus_p' || g, s, s, 'manual', now(), now(), now()
           FROM generate_series(1, $2::int) AS g, LATERAL (SELECT CASE WHEN g % $3 = 0 THEN 'lockout' ELSE 'active' END AS s) x`,
          [t?.id, POLICY_SUBSCRIBERS, DUNNING_EVERY],
        );
      });
    } else {
      // A reused store: the policy as the seed left it.
      await db.query(`UPDATE tenants SET policy_enforcement = 'gate' WHERE id = $1`, [exists.id]);
      await db.query(
        `UPDATE subscribers SET status = derived_status WHERE tenant_id = $1 AND status <> derived_status`,
        [exists.id],
      );
    }
    const [row] = await db.query<{ n: number; gated: number }>(
      `SELECT count(*)::int AS n, count(*) FILTER (WHERE status = 'lockout')::int AS gated FROM subscribers s JOIN tenants t ON t.id = s.tenant_id WHERE t.slug = $1`,
      [POLICY_TENANT],
    );
    return { subscribers: row?.n ?? 0, gated: row?.gated ?? 0 };
  });
}

/** Subscribers of the policy tenant still answered `lockout`, and whether its sweep is still under way. */
export async function policyProgress(target: StoreTarget): Promise<{ lockout: number; sweeping: boolean }> {
  return withDb(target, async (db) => {
    const [row] = await db.query<{ lockout: number; sweeping: boolean }>(
      `SELECT (SELECT count(*)::int FROM subscribers s WHERE s.tenant_id = t.id AND s.status = 'lockout') AS lockout,
              EXISTS (SELECT 1 FROM policy_sweeps p WHERE p.tenant_id = t.id) AS sweeping
       FROM tenants t WHERE t.slug = $1`,
      [POLICY_TENANT],
    );
    return { lockout: row?.lockout ?? 0, sweeping: row?.sweeping ?? false };
  });
}
