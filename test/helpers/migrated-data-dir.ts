import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { inject } from 'vitest';

/**
 * A service's data folder (DUNWALL_DATA_DIR) whose embedded store is already there: a copy of
 * the run's migrated folder (test/global-setup.ts) as `pgdata`. The service opens it, finds every
 * migration applied and the store empty, and goes on as on a first start (admin token file,
 * demo), without the seconds PGlite's initdb takes. A test of the first start itself (the
 * store's folder created) uses an empty folder. Without a migrated folder (a run without the
 * global setup), the folder is left empty and the service makes its store as ever.
 */
export function withMigratedStore(dataDir: string): string {
  const template = migratedFolder();
  if (template !== null) cpSync(template, join(dataDir, 'pgdata'), { recursive: true });
  return dataDir;
}

function migratedFolder(): string | null {
  try {
    return inject('embeddedTemplate') ?? null;
  } catch {
    return null;
  }
}
