import pg from 'pg';
import type { Db, Queryable } from './db.js';

export interface PostgresOptions {
  connectionString: string;
  maxConnections?: number;
  /** Bounds every statement so that a stuck server never holds a request forever. */
  statementTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** Extra server options, e.g. `-c search_path=...` (the test suite isolates itself with it). */
  options?: string;
}

export function openPostgres(opts: PostgresOptions): Db {
  const pool = new pg.Pool({
    connectionString: opts.connectionString,
    max: opts.maxConnections ?? 10,
    connectionTimeoutMillis: opts.connectTimeoutMs ?? 5_000,
    statement_timeout: opts.statementTimeoutMs ?? 10_000,
    idleTimeoutMillis: 30_000,
    ...(opts.options ? { options: opts.options } : {}),
  });
  // An idle client losing its connection must not crash the process; the next query reconnects.
  pool.on('error', () => {});

  const on = (client: pg.Pool | pg.PoolClient): Queryable => ({
    async query<T>(sql: string, params?: readonly unknown[]) {
      const result = await client.query(sql, params as unknown[] | undefined);
      return result.rows as T[];
    },
    async exec(sql: string) {
      await client.query(sql);
    },
  });

  return {
    engine: 'postgres',
    ...on(pool),
    async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const result = await fn(on(client));
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      } finally {
        client.release();
      }
    },
    async close() {
      await pool.end();
    },
  };
}
