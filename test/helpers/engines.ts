import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { loadMigrations, migrate, openDb, storeOver } from '../../src/store/index.js';
import type { Db, Store, StoreTarget } from '../../src/store/index.js';
import { copyEmbeddedTemplate } from './embedded-template.js';

const DEADLOCK_DETECTED = '40P01';
export const DEFAULT_TEST_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';

export interface Engine {
  name: 'embedded' | 'postgres';
  /**
   * A fresh, migrated, isolated store; `cleanup` drops what it made. `upTo`: apply the
   * migrations up to that version only (a store as an earlier version left it).
   */
  open(options?: {
    upTo?: number;
    fromTemplate?: boolean;
  }): Promise<{ store: Store; db: Db; target: StoreTarget; cleanup(): Promise<void> }>;
}

function migrationsUpTo(upTo: number | undefined) {
  const all = loadMigrations();
  return upTo === undefined ? all : all.filter((m) => m.version <= upTo);
}

async function reachable(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

/** The run's migrated embedded folder (test/global-setup.ts), when the run made one. */
function embeddedTemplate(): string | null {
  try {
    return inject('embeddedTemplate') ?? null;
  } catch {
    return null;
  }
}

const embedded: Engine = {
  name: 'embedded',
  async open(options = {}) {
    // Asked for by a file that opens a store per test: a private copy of the run's migrated folder
    // (the migrations still run, and find nothing to do), not an initdb of its own each time. On
    // disk, its queries cost more than in memory: a file with one store for all its tests keeps
    // the in-memory one.
    const template = options.fromTemplate === true && options.upTo === undefined ? embeddedTemplate() : null;
    if (template !== null) {
      const copy = copyEmbeddedTemplate(template);
      const target: StoreTarget = { engine: 'embedded', dataDir: copy.dataDir };
      let store: Store | undefined;
      try {
        const db = await openDb(target);
        store = storeOver(db);
        await migrate(db, migrationsUpTo(undefined));
        const opened = store;
        return {
          store: opened,
          db,
          target,
          async cleanup() {
            await opened.close();
            copy.remove();
          },
        };
      } catch (err) {
        await store?.close();
        copy.remove();
        throw err;
      }
    }
    const target: StoreTarget = { engine: 'embedded', dataDir: null };
    const db = await openDb(target);
    await migrate(db, migrationsUpTo(options.upTo));
    const store = storeOver(db);
    return { store, db, target, cleanup: () => store.close() };
  },
};

/** Each test file gets its own schema on the server, so files run in parallel without sharing rows. */
function postgres(url: string): Engine {
  return {
    name: 'postgres',
    async open(options = {}) {
      const schema = `dunwall_test_${randomBytes(6).toString('hex')}`;
      const admin = new pg.Client({ connectionString: url });
      await admin.connect();
      await admin.query(`CREATE SCHEMA ${schema}`);
      await admin.end();
      const target: StoreTarget = { engine: 'postgres', url, options: `-c search_path=${schema}` };
      const db = await openDb(target);
      await migrate(db, migrationsUpTo(options.upTo));
      const store = storeOver(db);
      return {
        store,
        db,
        target,
        async cleanup() {
          await store.close();
          const c = new pg.Client({ connectionString: url });
          await c.connect();
          await c.query(`DROP SCHEMA ${schema} CASCADE`);
          await c.end();
        },
      };
    },
  };
}

let cached: Promise<Engine[]> | undefined;

/**
 * The engines to run on: always the embedded one; PostgreSQL at TEST_DATABASE_URL (or the local
 * default). In CI an unreachable PostgreSQL fails the run; elsewhere it is skipped, loudly.
 */
export function availableEngines(): Promise<Engine[]> {
  cached ??= (async () => {
    const url = process.env.TEST_DATABASE_URL || DEFAULT_TEST_DATABASE_URL;
    if (await reachable(url)) return [embedded, postgres(url)];
    if (process.env.CI === 'true')
      throw new Error(`PostgreSQL is required in CI and is not reachable at ${new URL(url).host}`);
    process.stderr.write(
      `\n*** PostgreSQL not reachable at ${new URL(url).host}: the PostgreSQL suite is SKIPPED (embedded only). ***\n\n`,
    );
    return [embedded];
  })();
  return cached;
}

/**
 * A fresh schema on the test server, and a URL that puts every connection in it
 * (for tests that start the service as a process would, from a URL alone).
 */
export async function schemaScopedUrl(prefix: string): Promise<{ url: string; drop(): Promise<void> }> {
  const base = process.env.TEST_DATABASE_URL || DEFAULT_TEST_DATABASE_URL;
  const schema = `${prefix}_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  const scoped = new URL(base);
  scoped.searchParams.set('options', `-c search_path=${schema}`);
  return {
    url: scoped.toString(),
    async drop() {
      // A killed service's connections may still be ending, and one of them can deadlock
      // with the drop: it is tried again once they are gone.
      for (let attempt = 1; ; attempt += 1) {
        try {
          await admin.query(`DROP SCHEMA ${schema} CASCADE`);
          break;
        } catch (err) {
          if ((err as { code?: string }).code !== DEADLOCK_DETECTED || attempt === 5) throw err;
          await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
        }
      }
      await admin.end();
    },
  };
}

/** Plain `pg` clients a test opens (other instances, writers it controls), ended together. */
export function pgClients(): { open(url: string): Promise<pg.Client>; endAll(): Promise<void> } {
  const open: pg.Client[] = [];
  return {
    async open(url) {
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      open.push(c);
      return c;
    },
    async endAll() {
      for (const c of open.splice(0)) await c.end().catch(() => {});
    },
  };
}
