import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/store/index.js';
import { openPostgres } from '../../src/store/db/postgres.js';
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
    db = openPostgres({
      connectionString: via.toString(),
      maxConnections: 1,
      queryTimeoutMs: QUERY_TIMEOUT_MS,
      connectTimeoutMs: 300,
      ...(options ? { options } : {}),
    });
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
    const stop = await db.listen('dunwall_bounds_test', {
      onNotify: () => {},
      onReady: () => events.push('ready'),
      onLost: () => events.push('lost'),
    });
    const waited = Date.now() - started;
    proxy.thaw();
    await stop();
    expect(events[0]).toBe('lost');
    // The connect bound or the query bound ended it, whichever the freeze met: never the freeze itself.
    expect(waited).toBeLessThan(QUERY_TIMEOUT_MS + 1_000 + 2_000);
  });
});

describe.skipIf(!engines.some((e) => e.name === 'postgres'))('PostgreSQL engine, a COPY left mid-stream', () => {
  let schema: Awaited<ReturnType<typeof proxiedSchema>>;
  let db: Db;

  beforeAll(async () => {
    schema = await proxiedSchema('dunwall_copy');
    const url = new URL(schema.direct);
    const options = url.searchParams.get('options') ?? undefined;
    url.searchParams.delete('options');
    // A long query bound, one connection: a connection rolled back while the server still
    // sends would hold the next query until the bound; dropped, it does not.
    db = openPostgres({
      connectionString: url.toString(),
      maxConnections: 1,
      queryTimeoutMs: 120_000,
      ...(options ? { options } : {}),
    });
  });

  afterAll(async () => {
    await db?.close().catch(() => {});
    await schema?.close();
  });

  it(
    'drops the connection when its reader throws, and the next query runs at once on a new one',
    { timeout: 20_000 },
    async () => {
      const rows = 'SELECT i, md5(i::text) FROM generate_series(1, 500000) AS i';
      const failed = await db
        .transaction((tx) =>
          tx.copyRows(rows, () => {
            throw new Error('the reader gave up');
          }),
        )
        .catch((err: unknown) => err);
      expect((failed as Error).message).toBe('the reader gave up');
      // Within the test's 20 s, far below the 120 s bound a reused connection would wait for.
      expect(await db.query<{ one: number }>('SELECT 1 AS one')).toEqual([{ one: 1 }]);
      let parsed = 0;
      await db.transaction((tx) =>
        tx.copyRows(rows, (chunk) => (parsed += chunk.toString('latin1').split('\n').length - 1)),
      );
      expect(parsed).toBe(500_000);
    },
  );
});
