import pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import type { Db, ListenHandlers, Queryable } from './db.js';
import { raceEnd, remainingMs, storeCallEnd, StoreTimeoutError, withinEnd } from './deadline.js';

/** Defaults of the bounds on every wait for the server (DUNWALL_DB_*_TIMEOUT_MS). */
export const DEFAULT_DB_QUERY_TIMEOUT_MS = 10_000;
export const DEFAULT_DB_CONNECT_TIMEOUT_MS = 5_000;
/** The server's own statement timeout fires first; the client's, this much later, only when the server cannot answer. */
const CLIENT_TIMEOUT_MARGIN_MS = 1_000;
/**
 * TCP keep-alive on pooled connections, so that the kernel in time drops a connection to a
 * host that vanished. Not a bound by itself (the probes' schedule is the system's): the
 * query and connect timeouts are.
 */
const POOL_KEEPALIVE_MS = 5_000;

const LISTEN_RETRY_MIN_MS = 100;
const LISTEN_RETRY_MAX_MS = 5_000;
/** TCP keep-alive finds a listener whose server vanished without closing the connection. */
const LISTEN_KEEPALIVE_MS = 5_000;

/**
 * A dedicated connection LISTENing on `channel`, reconnecting with backoff. Every loss is
 * reported (the caller must assume it missed notifications), every success too.
 */
async function listenOn(
  opts: PostgresOptions,
  channel: string,
  handlers: ListenHandlers,
): Promise<() => Promise<void>> {
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
      connectionTimeoutMillis: opts.connectTimeoutMs ?? DEFAULT_DB_CONNECT_TIMEOUT_MS,
      // LISTEN itself must not wait on a frozen server: a timeout is a lost listener, retried.
      query_timeout: (opts.queryTimeoutMs ?? DEFAULT_DB_QUERY_TIMEOUT_MS) + CLIENT_TIMEOUT_MARGIN_MS,
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
      if (stopped) {
        // Stopped while connecting: this connection is nobody's.
        await c.end().catch(() => {});
        return;
      }
      client = c;
      retryMs = LISTEN_RETRY_MIN_MS;
      handlers.onReady();
    } catch {
      await c.end().catch(() => {});
      if (stopped) return;
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
  /**
   * Bounds every query. The server stops a statement at this time (statement_timeout);
   * the client gives up a little later by itself (query_timeout), since a frozen or
   * unreachable server enforces nothing.
   */
  queryTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** Extra server options, e.g. `-c search_path=...` (the test suite isolates itself with it). */
  options?: string;
}

/** The error `pg` raises when the client's query_timeout runs out (the query may still be running on the server). */
const CLIENT_TIMEOUT_MESSAGE = 'Query read timeout';
function isClientTimeout(err: unknown): boolean {
  return err instanceof Error && err.message === CLIENT_TIMEOUT_MESSAGE;
}

/**
 * Streams a `COPY ... TO STDOUT` (text format) in chunks of whole rows. A stream that
 * brings nothing for `idleMs` is destroyed with a client timeout, whose connection the
 * transaction then drops.
 */
async function copyOut(
  client: pg.PoolClient,
  sql: string,
  onRows: (rows: Buffer) => void,
  idleMs: number,
): Promise<void> {
  const stream = client.query(copyTo(sql));
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => stream.destroy(new Error(CLIENT_TIMEOUT_MESSAGE)), idleMs);
  };
  let partial: Buffer | null = null;
  let done = false;
  try {
    arm();
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      arm();
      const data: Buffer = partial === null ? chunk : Buffer.concat([partial, chunk]);
      const end = data.lastIndexOf(10);
      if (end < 0) {
        partial = data;
        continue;
      }
      partial = end + 1 < data.length ? data.subarray(end + 1) : null;
      onRows(data.subarray(0, end + 1));
    }
    done = true;
    if (partial !== null) onRows(partial);
  } finally {
    clearTimeout(timer);
    // Left mid-stream (the reader threw, or the watchdog fired): the server is still
    // sending, so the connection is not one to roll back and reuse.
    if (!done) unusable.add(client);
  }
}

/** Connections a COPY left mid-stream: their transaction drops them instead of rolling back. */
const unusable = new WeakSet<pg.PoolClient>();

/** A query with the client's read bound of its own (pg reads `query_timeout` from a query's config too). */
type TimedQuery = pg.QueryConfig & { query_timeout: number };

export function openPostgres(opts: PostgresOptions): Db {
  const queryTimeoutMs = opts.queryTimeoutMs ?? DEFAULT_DB_QUERY_TIMEOUT_MS;
  const clientTimeoutMs = queryTimeoutMs + CLIENT_TIMEOUT_MARGIN_MS;
  const pool = new pg.Pool({
    connectionString: opts.connectionString,
    max: opts.maxConnections ?? 10,
    connectionTimeoutMillis: opts.connectTimeoutMs ?? DEFAULT_DB_CONNECT_TIMEOUT_MS,
    statement_timeout: queryTimeoutMs,
    query_timeout: clientTimeoutMs,
    keepAlive: true,
    keepAliveInitialDelayMillis: POOL_KEEPALIVE_MS,
    idleTimeoutMillis: 30_000,
    ...(opts.options ? { options: opts.options } : {}),
  });
  // An idle client losing its connection must not crash the process; the next query reconnects.
  pool.on('error', () => {});

  /**
   * One statement on a checked-out connection. Within a request's bound (`end`), the client
   * waits no longer than what is left of it: a frozen server holds the request until its
   * deadline, never for the store's own, longer bound.
   */
  const send = async (client: pg.PoolClient, text: string, end: number | null, values?: readonly unknown[]) => {
    if (end === null) return client.query(text, values as unknown[] | undefined);
    const timed: TimedQuery = {
      text,
      values: values as unknown[] | undefined,
      query_timeout: Math.min(clientTimeoutMs, remainingMs(end)),
    };
    return client.query(timed);
  };

  /**
   * A connection checked out for `fn`, waited for no longer than `end` (one that comes
   * later goes straight back). The pool listens for errors of idle clients only: a
   * checked-out one losing its connection would emit an 'error' nobody handles, and that
   * ends the process. A connection `fn` marks lost is destroyed, not reused.
   */
  const withClient = async <T>(
    end: number | null,
    fn: (client: pg.PoolClient, lose: (err: unknown) => void) => Promise<T>,
  ): Promise<T> => {
    const client = end === null ? await pool.connect() : await raceEnd(pool.connect(), end, (late) => late.release());
    let lost: Error | undefined;
    const onError = (err: Error) => {
      lost = err;
    };
    client.on('error', onError);
    try {
      return await fn(client, (err) => {
        lost ??= err instanceof Error ? err : new Error('connection lost');
      });
    } finally {
      client.removeListener('error', onError);
      client.release(lost);
    }
  };

  /** Failures after which a connection may still be waiting on the server: dropped, never rolled back and reused. */
  const leavesConnectionBusy = (client: pg.PoolClient, err: unknown) =>
    isClientTimeout(err) || err instanceof StoreTimeoutError || unusable.has(client);

  const inTransaction = (client: pg.PoolClient): Queryable => ({
    async query<T>(sql: string, params?: readonly unknown[]) {
      const result = await send(client, sql, storeCallEnd(), params);
      return result.rows as T[];
    },
    async exec(sql: string) {
      await send(client, sql, storeCallEnd());
    },
    async copyRows(select: string, onRows: (rows: Buffer) => void) {
      // A COPY runs as long as its table is big: the server's bound is lifted for it, the
      // client's (no data for the query timeout) holds.
      await client.query('SET LOCAL statement_timeout = 0');
      await copyOut(client, `COPY (${select}) TO STDOUT`, onRows, clientTimeoutMs);
    },
  });

  /** A statement on whichever pooled connection is free. */
  const pooled = async <T>(sql: string, params?: readonly unknown[]): Promise<T[]> => {
    const end = storeCallEnd();
    if (end === null) return (await pool.query(sql, params as unknown[] | undefined)).rows as T[];
    const work = withClient(end, async (client, lose) => {
      try {
        return (await send(client, sql, end, params)).rows as T[];
      } catch (err) {
        if (leavesConnectionBusy(client, err)) lose(err);
        throw err;
      }
    });
    return raceEnd(work, end);
  };

  return {
    engine: 'postgres',
    query: pooled,
    async exec(sql: string) {
      await pooled(sql);
    },
    async copyRows() {
      throw new Error('copyRows runs inside a transaction');
    },
    async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      const end = storeCallEnd();
      const run = () =>
        withClient(end, async (client, lose) => {
          try {
            // Within a request's bound the server stops each statement by the deadline too, so
            // that a slow (not frozen) server does not go on working for nobody.
            await send(
              client,
              end === null ? 'BEGIN' : `BEGIN; SET LOCAL statement_timeout = ${remainingMs(end)}`,
              end,
            );
            const result = await fn(inTransaction(client));
            await send(client, 'COMMIT', end);
            return result;
          } catch (err) {
            if (leavesConnectionBusy(client, err)) lose(err);
            else
              await send(client, 'ROLLBACK', end).catch((rollbackErr: unknown) => {
                // A ROLLBACK that fails leaves the session unfinished: not a connection to reuse.
                lose(rollbackErr);
              });
            throw err;
          }
        });
      // The queries inside share the transaction's end; the race is the net under them.
      return end === null ? run() : raceEnd(withinEnd(end, run), end);
    },
    listen: (channel, handlers) => listenOn(opts, channel, handlers),
    async close() {
      await pool.end();
    },
  };
}
