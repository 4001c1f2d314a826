import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../../package-root.js';
import type { Db } from './db.js';

const MIGRATION_FILE_RE = /^(\d{3})_[a-z0-9_]+\.sql$/;
/** Serialises migrations across instances starting at once; any constant unique to Dunwall. */
const MIGRATION_LOCK_KEY = 0x64756e77; // "dunw"

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** The package's `migrations/` folder. */
export function migrationsDir(): string {
  return join(packageRoot(), 'migrations');
}

export function loadMigrations(dir = migrationsDir()): Migration[] {
  return readdirSync(dir)
    .filter((file) => MIGRATION_FILE_RE.test(file))
    .sort()
    .map((file) => ({
      version: Number(MIGRATION_FILE_RE.exec(file)?.[1]),
      name: file,
      sql: readFileSync(join(dir, file), 'utf8'),
    }));
}

/**
 * Applies every migration not applied yet, in version order, in one transaction under a
 * transaction-scoped advisory lock: a second instance starting at the same moment waits,
 * then finds nothing left to do. Returns the names applied.
 */
export async function migrate(db: Db, migrations = loadMigrations()): Promise<string[]> {
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    await tx.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version integer PRIMARY KEY,
      name text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const rows = await tx.query<{ version: number }>('SELECT version FROM schema_migrations');
    const applied = new Set(rows.map((r) => r.version));
    const done: string[] = [];
    for (const m of migrations) {
      if (applied.has(m.version)) continue;
      await tx.exec(m.sql);
      await tx.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
      done.push(m.name);
    }
    return done;
  });
}
