import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPostgres } from '../../src/store/postgres.js';
import type { Db } from '../../src/store/db.js';
import { proxiedSchema } from '../helpers/cuttable-proxy.js';
import type { CuttableProxy } from '../helpers/cuttable-proxy.js';
import { availableEngines } from '../helpers/engines.js';

/**
 * The PostgreSQL engine's bounds when the server freezes (SIGSTOP: nothing answers, nothing
 * resets), through a relay that freezes instead of the shared server.
 */
const engines = await availableEngines();
const QUERY_TIMEOUT_MS = 300;

describe.skipIf(!engines.some((e) => e.name === 'postgres'))('PostgreSQL engine, frozen server', () => {
  let schema: Awaited<ReturnType<typeof proxiedSchema>>;
  let proxy: CuttableProxy;
  let db: Db;
  let direct: pg.Client;

  beforeAll(async () => {
    schema = await proxiedSchema('dunwall_bounds');
    proxy = schema.proxy;
    direct = new pg.Client({ connectionString: schema.direct });
    await direct.connect();
    await direct.query('CREATE TABLE marks (x int)');
    const via = new URL(schema.url);
    const options = via.searchParams.get('options') ?? undefined;
    via.searchParams.delete('options');
    // One connection: what a transaction leaves on it, the next query meets.
    db = openPostgres({ connectionString: via.toString(), maxConnections: 1, queryTimeoutMs: QUERY_TIMEOUT_MS, connectTimeoutMs: 300, ...(options ? { options } : {}) });
  });

  afterAll(async () => {
    proxy?.thaw();
    await db?.close().catch(() => {});
    await direct?.end();
    await schema?.close();
  });

  it('gives up a query the server cannot answer, and the next writes commit after the thaw', async () => {
    await db.query('SELECT 1');
    proxy.freeze();
    const cut = await db.transaction((tx) => tx.query('INSERT INTO marks VALUES (0)')).catch((err: unknown) => err);
    expect(cut).toBeInstanceOf(Error);
    expect((cut as Error).message).toMatch(/timeout/i);
    proxy.thaw();
    const seen = async () => (await direct.query<{ x: number }>('SELECT x FROM marks ORDER BY x')).rows.map((r) => r.x);
    // A plain write first: on a connection the cut transaction left open it would run
    // inside that transaction, and no other client would ever see it.
    await db.query('INSERT INTO marks VALUES (1)');
    expect(await seen()).toEqual([1]);
    await db.transaction((tx) => tx.query('INSERT INTO marks VALUES (2)'));
    expect(await seen()).toEqual([1, 2]);
  });

  it('bounds LISTEN too: a frozen server is a lost listener, not a wait', async () => {
    proxy.freeze();
    const events: string[] = [];
    const started = Date.now();
    const stop = await db.listen('dunwall_bounds_test', { onNotify: () => {}, onReady: () => events.push('ready'), onLost: () => events.push('lost') });
    const waited = Date.now() - started;
    proxy.thaw();
    await stop();
    expect(events[0]).toBe('lost');
    // The connect bound or the query bound ended it, whichever the freeze met: never the freeze itself.
    expect(waited).toBeLessThan(QUERY_TIMEOUT_MS + 1_000 + 2_000);
  });
});
