/**
 * The bench store: a fresh PostgreSQL database (or an embedded folder), migrated with the
 * project's own runner, then filled with set-based SQL (generate_series, unnest): never
 * one row per statement.
 */
import pg from 'pg';
import { sha256 } from '../src/domain/keys.js';
import { migrate, openDb } from '../src/store/index.js';
import type { Db, StoreTarget } from '../src/store/index.js';
import { SQL_CARD_URL, SQL_SLUG, SQL_STATUS, SQL_TIER, benchTenant } from './data.js';
import type { Entitlements, Sizes } from './data.js';

/** Tenants per INSERT of subscribers: progress shows, and no statement holds a million rows at once. */
const TENANTS_PER_CHUNK = 100;

export function databaseUrlFor(serverUrl: string, database: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

async function onServer<T>(serverUrl: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: serverUrl, connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

const DB_NAME_RE = /^dunwall_bench_[a-z0-9_]+$/;

export async function createDatabase(serverUrl: string, name: string): Promise<string> {
  if (!DB_NAME_RE.test(name)) throw new Error(`refusing to create ${name}: bench databases are named dunwall_bench_*`);
  await onServer(serverUrl, (c) => c.query(`CREATE DATABASE "${name}"`));
  return databaseUrlFor(serverUrl, name);
}

/** Drops only databases the bench names (dunwall_bench_*), whoever is still connected. */
export async function dropDatabase(serverUrl: string, name: string): Promise<void> {
  if (!DB_NAME_RE.test(name)) throw new Error(`refusing to drop ${name}: not a bench database`);
  await onServer(serverUrl, (c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
}

async function readTiers(db: Db): Promise<Entitlements> {
  const rows = await db.query<{ name: string; entitlements: Record<string, boolean> | string }>(
    'SELECT name, entitlements FROM tiers',
  );
  return Object.fromEntries(
    rows.map((r) => [r.name, typeof r.entitlements === 'string' ? JSON.parse(r.entitlements) : r.entitlements]),
  );
}

export interface SeedResult {
  sizes: Sizes;
  tiers: Entitlements;
  seconds: number;
  migrated: string[];
}

/** A seed of a million rows runs statements longer than the service's bound on a query. */
const SEED_QUERY_TIMEOUT_MS = 600_000;

export async function seed(target: StoreTarget, sizes: Sizes, log: (line: string) => void): Promise<SeedResult> {
  const started = performance.now();
  const db = await openDb(target.engine === 'postgres' ? { ...target, queryTimeoutMs: SEED_QUERY_TIMEOUT_MS } : target);
  try {
    const migrated = await migrate(db);
    log(`migrations applied: ${migrated.join(', ') || 'none'}`);

    // One transaction. A superuser skips the triggers (003_invalidation.sql notifies per row:
    // a million notifications nobody listens to yet) and the foreign key checks; both are
    // known to hold here.
    const [su] = await db.query<{ on: boolean }>("SELECT current_setting('is_superuser') = 'on' AS on");
    await db.transaction(async (tx) => {
      // Bounded by SEED_QUERY_TIMEOUT_MS, on the server and on the client, not the service's 10 s.
      if (su?.on) await tx.exec('SET LOCAL session_replication_role = replica');
      await tx.query(
        `INSERT INTO tenants (slug, tier, card_update_url, hmac_required, suspended, created_at, updated_at)
         SELECT ${SQL_SLUG('i')}, ${SQL_TIER('i')}, ${SQL_CARD_URL(SQL_SLUG('i'))}, false, false, now(), now()
         FROM generate_series(1, $1::int) AS i`,
        [sizes.tenants],
      );
      // Keys and secrets come from Node (the bench must know them), in one statement per kind.
      const tenants = Array.from({ length: sizes.tenants }, (_, i) => benchTenant(i + 1));
      await tx.query(
        `INSERT INTO tenant_credentials (tenant_id, kind, key_hash, secret, created_at)
         SELECT t.id, 'publishable_key', c.key_hash, NULL, now()
         FROM unnest($1::text[], $2::text[]) AS c(slug, key_hash) JOIN tenants t ON t.slug = c.slug`,
        [tenants.map((t) => t.slug), tenants.map((t) => sha256(t.publishableKey).toString('hex'))],
      );
      await tx.query(
        `INSERT INTO tenant_credentials (tenant_id, kind, key_hash, secret, created_at)
         SELECT t.id, 'hmac_secret', NULL, c.secret, now()
         FROM unnest($1::text[], $2::text[]) AS c(slug, secret) JOIN tenants t ON t.slug = c.slug`,
        [tenants.map((t) => t.slug), tenants.map((t) => t.hmacSecret)],
      );
      log(`${sizes.tenants} tenants with their keys and secrets`);

      for (let from = 1; from <= sizes.tenants; from += TENANTS_PER_CHUNK) {
        const to = Math.min(sizes.tenants, from + TENANTS_PER_CHUNK - 1);
        await tx.query(
          `INSERT INTO subscribers (tenant_id, processor_customer_id, status, derived_status, reason, status_at, overridden_at, updated_at)
           SELECT t.id, 'cus_b' || g.i || '_' || n.n, ${SQL_STATUS('n.n')}, ${SQL_STATUS('n.n')}, 'manual', now(), now(), now()
           FROM generate_series($1::int, $2::int) AS g(i)
           JOIN tenants t ON t.slug = ${SQL_SLUG('g.i')}
           CROSS JOIN generate_series(1, $3::int) AS n(n)`,
          [from, to, sizes.perTenant],
        );
        log(
          `subscribers: ${(to * sizes.perTenant).toLocaleString('en-US')} / ${(sizes.tenants * sizes.perTenant).toLocaleString('en-US')}`,
        );
      }
    });
    // Fresh statistics and no autovacuum or checkpoint in the middle of a measured run.
    if (target.engine === 'postgres') {
      await onServer(target.url, async (c) => {
        await c.query('VACUUM ANALYZE');
        // Superusers (and pg_checkpoint members) only: a nicety.
        await c.query('CHECKPOINT').catch(() => undefined);
      });
    } else {
      await db.exec('VACUUM ANALYZE');
    }
    const tiers = await readTiers(db);
    return { sizes, tiers, seconds: (performance.now() - started) / 1000, migrated };
  } finally {
    await db.close();
  }
}

/** The sizes and tiers of a store seeded earlier (`--reuse`). */
export async function inspect(target: StoreTarget): Promise<{ sizes: Sizes; tiers: Entitlements }> {
  const db = await openDb(target);
  try {
    await migrate(db);
    const [row] = await db.query<{ tenants: number; subscribers: number }>(
      // A tenant's test mode is a row of its own (mode_of): the tenants are the rows that are no mode of another.
      `SELECT (SELECT count(*)::int FROM tenants WHERE slug LIKE 'bench-t%' AND mode_of IS NULL) AS tenants,
              (SELECT count(*)::int FROM subscribers WHERE processor_customer_id LIKE 'cus_b%') AS subscribers`,
    );
    const tenants = row?.tenants ?? 0;
    if (tenants === 0) throw new Error('this store holds no bench tenants: seed it first (drop --reuse)');
    return { sizes: { tenants, perTenant: Math.floor((row?.subscribers ?? 0) / tenants) }, tiers: await readTiers(db) };
  } finally {
    await db.close();
  }
}

/** The server processes (backends) connected to the bench database: their CPU is the database's work. */
export async function backendPids(serverUrl: string, database: string): Promise<number[]> {
  return onServer(serverUrl, async (c) => {
    const res = await c.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
      [database],
    );
    return res.rows.map((r) => r.pid);
  });
}
