import pg from 'pg';
import type { Db, ListenHandlers, Queryable } from './db.js';

const LISTEN_RETRY_MIN_MS = 100;
const LISTEN_RETRY_MAX_MS = 5_000;
/** TCP keep-alive finds a listener whose server vanished without closing the connection. */
const LISTEN_KEEPALIVE_MS = 5_000;

/**
 * A dedicated connection LISTENing on `channel`, reconnecting with backoff. Every loss is
 * reported (the caller must assume it missed notifications), every success too.
 */
async function listenOn(opts: PostgresOptions, channel: string, handlers: ListenHandlers): Promise<() => Promise<void>> {
  let stopped = false;
  let client: pg.Client | null = null;
  let retryMs = LISTEN_RETRY_MIN_MS;
  let timer: NodeJS.Timeout | undefined;

  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => void connect(), retryMs);
    timer.unref();
    retryMs = Math.min(retryMs * 2, LISTEN_RETRY_MAX_MS);
  };
  const connect = async () => {
    if (stopped) return;
    const c = new pg.Client({
      connectionString: opts.connectionString,
      connectionTimeoutMillis: opts.connectTimeoutMs ?? 5_000,
      keepAlive: true,
      keepAliveInitialDelayMillis: LISTEN_KEEPALIVE_MS,
      ...(opts.options ? { options: opts.options } : {}),
    });
    c.on('notification', (m) => {
      if (m.channel === channel && m.payload !== undefined) handlers.onNotify(m.payload);
    });
    c.on('error', () => {});
    c.on('end', () => {
      if (client !== c) return;
      client = null;
      handlers.onLost();
      schedule();
    });
    try {
      await c.connect();
      await c.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      client = c;
      retryMs = LISTEN_RETRY_MIN_MS;
      handlers.onReady();
    } catch {
      await c.end().catch(() => {});
      handlers.onLost();
      schedule();
    }
  };
  await connect();
  return async () => {
    stopped = true;
    clearTimeout(timer);
    const c = client;
    client = null;
    await c?.end().catch(() => {});
  };
}

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
      // The pool listens for errors of idle clients only: a checked-out one losing its
      // connection would emit an 'error' nobody handles, and that ends the process. The
      // failed query rejects anyway; the connection is then destroyed, not reused.
      let lost: Error | undefined;
      const onError = (err: Error) => {
        lost = err;
      };
      client.on('error', onError);
      try {
        await client.query('BEGIN');
        const result = await fn(on(client));
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      } finally {
        client.removeListener('error', onError);
        client.release(lost);
      }
    },
    listen: (channel, handlers) => listenOn(opts, channel, handlers),
    async close() {
      await pool.end();
    },
  };
}
