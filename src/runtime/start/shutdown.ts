import cluster from 'node:cluster';
import type { Logger } from 'pino';

/** In-flight requests get this long to finish after SIGTERM before the process exits anyway. */
export const SHUTDOWN_GRACE_MS = 10_000;

/** Stop accepting, let in-flight requests finish, close the store; a second signal forces the exit. */
export function closeOnSignals(running: { close(): Promise<void> }, log: Logger): void {
  let closing = false;
  const shutdown = (signal: NodeJS.Signals) => {
    if (closing) {
      // A cluster worker gets the terminal's or the service manager's signal and its
      // primary's: that is one request to stop, not an impatient second one.
      if (cluster.isWorker) return;
      log.warn({ signal }, 'second signal: exiting now');
      process.exit(1);
    }
    closing = true;
    log.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      log.error('shutdown grace period over: exiting');
      process.exit(1);
    }, SHUTDOWN_GRACE_MS);
    force.unref();
    running.close().then(
      () => {
        log.info('shut down');
        process.exit(0);
      },
      (err: unknown) => {
        log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
}
