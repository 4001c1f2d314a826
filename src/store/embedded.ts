import { PGlite } from '@electric-sql/pglite';
import type { Db, Queryable } from './db.js';

interface PgliteLike {
  query<T>(sql: string, params?: unknown[]): Promise<{ rows: T[] }>;
  exec(sql: string): Promise<unknown>;
}

/**
 * PostgreSQL compiled to WebAssembly, in `dataDir` (persisted on disk) or in memory when
 * `dataDir` is null. One process owns the folder.
 */
export async function openEmbedded(dataDir: string | null): Promise<Db> {
  const pglite = dataDir === null ? new PGlite() : new PGlite(dataDir);
  await pglite.waitReady;

  const on = (client: PgliteLike): Queryable => ({
    async query<T>(sql: string, params?: readonly unknown[]) {
      const result = await client.query<T>(sql, params as unknown[] | undefined);
      return result.rows;
    },
    async exec(sql: string) {
      await client.exec(sql);
    },
  });

  return {
    engine: 'embedded',
    ...on(pglite),
    transaction: (fn) => pglite.transaction((tx) => fn(on(tx))),
    async close() {
      if (!pglite.closed) await pglite.close();
    },
  };
}
