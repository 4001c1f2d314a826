import type { App } from '../app-instance.js';
import { sendProblem } from '../problems.js';
import type { ReadModel } from '../../readmodel/index.js';
import type { Maintenance } from '../../store/index.js';

/** /readyz fails instead of hanging when the store does not answer in time. */
export const READY_TIMEOUT_MS = 2_000;

/**
 * A successful store check is reused for this long: a flood of /readyz (a public route)
 * costs the database at most one query at a time and about twenty a second, and readiness
 * still follows the database within a moment.
 */
export const READY_REUSE_MS = 50;

/** This instance's clock against the database's (the policy clock measures it). */
export interface ClockSkewReading {
  /** The instance's minus the database's, in seconds; null until measured. */
  skewSeconds: number | null;
  boundSeconds: number;
  /** False when the skew is larger than the bound. */
  ok: boolean;
}

export interface HealthOptions {
  maintenance: Pick<Maintenance, 'ping' | 'engine'>;
  model: ReadModel;
  now: () => number;
  /** A monotonic clock in milliseconds (tests pass a fake one); default performance.now. */
  monotonicNow?: () => number;
  /** Shown by /readyz: a clock off from the database's leaves the instance ready, and says so. */
  clockSkew?: () => ClockSkewReading;
}

/**
 * /readyz: ready once the read model is loaded (it is before the server listens) and while
 * it may answer, and while the store answers a trivial query (webhooks and the admin API
 * write there). Concurrent checks share one query.
 */
export async function healthRoutes(app: App, opts: HealthOptions): Promise<void> {
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));

  const clock = opts.monotonicNow ?? (() => performance.now());
  let okAtMs = Number.NEGATIVE_INFINITY;
  let checking: Promise<void> | null = null;
  const storeAnswers = (): Promise<void> => {
    if (clock() - okAtMs < READY_REUSE_MS) return Promise.resolve();
    checking ??= (async () => {
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          opts.maintenance.ping(),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error('store ping timed out')), READY_TIMEOUT_MS);
          }),
        ]);
        okAtMs = clock();
      } catch (err) {
        // Once per failed check, however many requests shared it.
        app.log.warn({ err: { message: (err as Error).message } }, 'readiness check failed');
        throw err;
      } finally {
        clearTimeout(timer);
        checking = null;
      }
    })();
    return checking;
  };

  app.get('/readyz', { schema: { hide: true } }, async (_req, reply) => {
    if (!opts.model.serving(opts.now()))
      return sendProblem(
        reply,
        'store_unavailable',
        'The read model has been out of touch with the store for too long.',
      );
    try {
      await storeAnswers();
      if (opts.clockSkew === undefined) return { status: 'ok', store: opts.maintenance.engine };
      const { skewSeconds, boundSeconds, ok } = opts.clockSkew();
      return {
        status: 'ok',
        store: opts.maintenance.engine,
        clock: { skew_seconds: skewSeconds, bound_seconds: boundSeconds, within_bound: ok },
      };
    } catch {
      return sendProblem(reply, 'store_unavailable');
    }
  });

  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
