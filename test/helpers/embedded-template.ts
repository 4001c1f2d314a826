import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadMigrations, migrate, openDb } from '../../src/store/index.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The embedded store's folder with every migration applied, made once for the run; null when it is not made. */
    embeddedTemplate: string | null;
  }
}

/**
 * An embedded store's folder (PGlite's data directory) with every migration applied, closed
 * cleanly: a store copied from it is what a fresh store migrated in place would be, without the
 * seconds PGlite's initdb takes each time.
 */
export async function buildEmbeddedTemplate(): Promise<{ dataDir: string; remove(): void }> {
  const root = mkdtempSync(join(tmpdir(), 'dunwall-template-'));
  const dataDir = join(root, 'pgdata');
  const db = await openDb({ engine: 'embedded', dataDir });
  try {
    await migrate(db, loadMigrations());
  } finally {
    await db.close();
  }
  return { dataDir, remove: () => rmSync(root, { recursive: true, force: true }) };
}

/** A private copy of the template in a folder of its own; `remove` deletes it (the store closed first). */
export function copyEmbeddedTemplate(template: string): { dataDir: string; remove(): void } {
  const root = mkdtempSync(join(tmpdir(), 'dunwall-store-'));
  const dataDir = join(root, 'pgdata');
  cpSync(template, dataDir, { recursive: true });
  return { dataDir, remove: () => rmSync(root, { recursive: true, force: true }) };
}
