import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import type { Db, Queryable } from './db.js';
import { raceEnd, remainingMs, storeCallEnd, withinEnd } from './deadline.js';

interface PgliteLike {
  query<T>(sql: string, params?: unknown[]): Promise<{ rows: T[]; blob?: Blob }>;
  exec(sql: string): Promise<unknown>;
}

export class DataDirInUseError extends Error {
  constructor(dataDir: string, pid: number) {
    super(`the embedded store in ${dataDir} is in use by process ${pid}: stop that process first, or use DATABASE_URL`);
    this.name = 'DataDirInUseError';
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Folders this process holds: a second open in the same process is refused too. */
const HELD = new Set<string>();

/**
 * PGlite has no lock of its own, and two processes writing one folder would corrupt it: a
 * pid file beside the folder keeps a second owner out. A file naming a dead process is
 * stale, and so is one naming this very process when this process does not hold the
 * folder: a container's server is often pid 1 again after an unclean stop.
 */
function lockDataDir(dataDir: string): () => void {
  const path = `${dataDir}.lock`;
  if (HELD.has(path)) throw new DataDirInUseError(dataDir, process.pid);
  try {
    writeFileSync(path, String(process.pid), { flag: 'wx', mode: 0o600 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    const owner = Number.parseInt(readFileSync(path, 'utf8'), 10);
    if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && isAlive(owner))
      throw new DataDirInUseError(dataDir, owner);
    writeFileSync(path, String(process.pid), { mode: 0o600 });
  }
  HELD.add(path);
  return () => {
    HELD.delete(path);
    rmSync(path, { force: true });
  };
}

/**
 * PostgreSQL compiled to WebAssembly, in `dataDir` (persisted on disk) or in memory when
 * `dataDir` is null. One process owns the folder.
 */
export async function openEmbedded(dataDir: string | null): Promise<Db> {
  const unlock = dataDir === null ? () => {} : lockDataDir(dataDir);
  let pglite: PGlite;
  try {
    pglite = dataDir === null ? new PGlite() : new PGlite(dataDir);
    await pglite.waitReady;
  } catch (err) {
    unlock();
    throw err;
  }

  // PGlite runs in this process and has no socket to freeze; a request's bound still holds
  // (a call past it is not started, one under way is raced), so the engines answer alike.
  const bounded = async <T>(work: () => Promise<T>, end = storeCallEnd()): Promise<T> => {
    if (end === null) return work();
    remainingMs(end);
    return raceEnd(work(), end);
  };

  const on = (client: PgliteLike): Queryable => ({
    query<T>(sql: string, params?: readonly unknown[]) {
      return bounded(async () => (await client.query<T>(sql, params as unknown[] | undefined)).rows);
    },
    exec(sql: string) {
      return bounded(async () => {
        await client.exec(sql);
      });
    },
    async copyRows(select: string, onRows: (rows: Buffer) => void) {
      // PGlite's COPY goes to a blob, in memory: one buffer, parsed at once.
      const result = await client.query(`COPY (${select}) TO '/dev/blob'`);
      if (result.blob) onRows(Buffer.from(await result.blob.arrayBuffer()));
    },
  });

  return {
    engine: 'embedded',
    ...on(pglite),
    transaction: (fn) => {
      const end = storeCallEnd();
      if (end === null) return pglite.transaction((tx) => fn(on(tx)));
      return bounded(() => withinEnd(end, () => pglite.transaction((tx) => fn(on(tx)))), end);
    },
    // In-process: the notifications of this very database, delivered as its queries complete.
    async listen(channel, handlers) {
      const unlisten = await pglite.listen(channel, (payload) => handlers.onNotify(payload));
      handlers.onReady();
      return unlisten;
    },
    async close() {
      if (!pglite.closed) await pglite.close();
      unlock();
    },
  };
}
