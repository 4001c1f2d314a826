import { SecretBox } from '../secrets/cipher.js';
import type { Db } from './db/db.js';
import { forgetForeignLookupChanges } from './changes/lookup-changes.js';
import { forgetForeignStatusChanges } from './feed/status-feed.js';
import { migrate } from './db/migrate.js';
import { openPostgres } from './db/postgres.js';
import { assertSecretKeysKnown } from './maintenance/secrets-at-rest.js';
import { storeOver } from './store.js';
import type { Store } from './store.js';

export type StoreTarget =
  | { engine: 'postgres'; url: string; options?: string; queryTimeoutMs?: number; connectTimeoutMs?: number }
  | { engine: 'embedded'; dataDir: string | null };

export async function openDb(target: StoreTarget): Promise<Db> {
  // Loaded only when used: PGlite costs a PostgreSQL deployment's every process memory.
  if (target.engine === 'embedded') return (await import('./db/embedded.js')).openEmbedded(target.dataDir);
  return openPostgres({
    connectionString: target.url,
    ...(target.options ? { options: target.options } : {}),
    ...(target.queryTimeoutMs !== undefined ? { queryTimeoutMs: target.queryTimeoutMs } : {}),
    ...(target.connectTimeoutMs !== undefined ? { connectTimeoutMs: target.connectTimeoutMs } : {}),
  });
}

export interface StoreOptions {
  /** Seals and opens the stored secrets; default: clear text. */
  secrets?: SecretBox;
}

/**
 * Opens the store and brings its schema up to date. A stored secret sealed under a key the
 * options do not hold fails here, at boot, naming the key id.
 */
export async function openStore(target: StoreTarget, options: StoreOptions = {}): Promise<Store> {
  const secrets = options.secrets ?? SecretBox.clear();
  const db = await openDb(target);
  try {
    await migrate(db);
    await forgetForeignLookupChanges(db);
    await forgetForeignStatusChanges(db);
    await assertSecretKeysKnown(db, secrets);
  } catch (err) {
    await db.close();
    throw err;
  }
  return storeOver(db, { secrets });
}

/** A read replica: the same queries and bounds, no migrations (the primary applies them). */
export async function openReadStore(
  target: Extract<StoreTarget, { engine: 'postgres' }>,
  options: StoreOptions = {},
): Promise<Store> {
  return storeOver(await openDb(target), options);
}
