/** What every part of the bench shares while it runs: its log and notes, and the cleanup run on every exit path. */
import { killAllSync, stopAll } from './procs.js';

export const started = Date.now();
export const log = (line: string) =>
  process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s] ${line}\n`);
export const notes: string[] = [];
export const note = (line: string) => {
  notes.push(line);
  log(`note: ${line}`);
};

// ---------------------------------------------------------------- cleanup, on every exit path
export const cleanups: (() => Promise<void>)[] = [];
let cleaning: Promise<void> | null = null;
export function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    await stopAll();
    for (const fn of cleanups.reverse()) await fn().catch((err: unknown) => log(`cleanup: ${(err as Error).message}`));
  })();
  return cleaning;
}
let signalled = false;
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    if (signalled) {
      killAllSync();
      process.exit(130);
    }
    signalled = true;
    log(`${signal}: stopping every child process and removing the bench store (again to force)`);
    void cleanup().finally(() => process.exit(130));
  });
}
process.on('exit', killAllSync);

/** True once SIGINT, SIGTERM or SIGHUP asked the bench to stop: the rows left are skipped. */
export const stopping = (): boolean => signalled;
