import type { Db } from './db.js';
import { openEmbedded } from './embedded.js';
import { migrate } from './migrate.js';
import { openPostgres } from './postgres.js';
import { SqlStore } from './sql-store.js';
import type { Store } from './store.js';

export type StoreTarget = { engine: 'postgres'; url: string; options?: string } | { engine: 'embedded'; dataDir: string | null };

export async function openDb(target: StoreTarget): Promise<Db> {
  return target.engine === 'postgres'
    ? openPostgres({ connectionString: target.url, ...(target.options ? { options: target.options } : {}) })
    : openEmbedded(target.dataDir);
}

/** Opens the store and brings its schema up to date. */
export async function openStore(target: StoreTarget): Promise<Store> {
  const db = await openDb(target);
  try {
    await migrate(db);
  } catch (err) {
    await db.close();
    throw err;
  }
  return new SqlStore(db);
}

/** A read replica: the same queries, no migrations (the primary applies them). */
export async function openReadStore(url: string): Promise<Store> {
  return new SqlStore(await openDb({ engine: 'postgres', url }));
}
