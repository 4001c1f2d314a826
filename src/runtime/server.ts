import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import { pathToFileURL } from 'node:url';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { App, MetricsServer } from '../http/index.js';
import { createMetrics } from '../metrics/index.js';
import type { Metrics } from '../metrics/index.js';
import type { Store } from '../store/index.js';
import { resolveAdminTokenDigest } from './admin-token.js';
import { runPrimary, workerMetricsText, WorkerSiblings } from './cluster.js';
import { ConfigError, loadConfig } from './config.js';
import type { Config } from './config.js';
import { createLogger } from './logger.js';
import { PolicyClock } from './policy-clock.js';
import { buildConfiguredApp } from './start/app.js';
import { announceDemo, loadAssets } from './start/assets.js';
import { startBackground } from './start/background.js';
import { CounterFlushes } from './start/counters.js';
import { checkListen, listenMetrics, listenPublic, METRICS_LISTENER } from './start/listen.js';
import { openLookupModel } from './start/lookup-model.js';
import type { LookupModel } from './start/lookup-model.js';
import { closeOnSignals } from './start/shutdown.js';
import type { StripeLinks } from '../services/stripe-links.js';
import { checkPublicUrl } from './start/links.js';
import { checkDefaultTier, openConfiguredStore } from './start/store.js';

export { checkListen, listenProblem } from './start/listen.js';
export { closeOnSignals, SHUTDOWN_GRACE_MS } from './start/shutdown.js';
export { secretBoxFor, storeTarget } from './start/store.js';

export interface Running {
  app: App;
  store: Store;
  url: string;
  /** Where /metrics is served when METRICS_PORT is set; null: on `url`. */
  metricsUrl: string | null;
  /** Writes now what is counted in memory between two flushes (Stripe intake, keys' last use, keys seen in a browser), as the timers and a close do. */
  flushCounters(): Promise<void>;
  close(): Promise<void>;
}

export interface StartOptions {
  metrics?: Metrics;
  /** What /metrics answers: in a cluster worker, the whole cluster's metrics. */
  metricsText?: () => Promise<string>;
  /** In a cluster worker: the other workers, whose read models a write's answer waits for too. */
  siblings?: WorkerSiblings;
  /**
   * This instance's clock as the policy clock reads it (tests move it ahead); default Date.now.
   * Time-driven writes follow the database's clock whatever it says.
   */
  clock?: () => number;
  /** Opens pay and card links at Stripe; absent: every open falls back (docs/links.md). */
  stripeLinks?: StripeLinks;
}

/**
 * One process of the service: configuration -> store -> read model -> clocks -> servers ->
 * background work, and the shutdown that undoes them in the reverse order. Each step is a
 * function of `start/`.
 */
export async function start(config: Config, log: Logger, options: StartOptions = {}): Promise<Running> {
  const { store, secrets } = await openConfiguredStore(config, log);
  let lookup: LookupModel | null = null;
  let redis: Redis | null = null;
  let metricsServer: MetricsServer | null = null;
  try {
    await checkDefaultTier(store, config.defaultTier);
    await checkPublicUrl(config, store, log, new Date(options.clock?.() ?? Date.now()));
    const adminTokenSha256 = resolveAdminTokenDigest(config, log);
    const assets = await loadAssets(config, store, log);
    const metrics = options.metrics ?? createMetrics();
    for (const name of config.retiredVariables)
      log.warn({ variable: name }, 'this variable is no longer used: every process holds the whole read model');

    lookup = await openLookupModel(config, store, secrets, log, options.siblings);
    // Asked about the other workers' writes from now on, and past any it was not asked about.
    await options.siblings?.serve(lookup.model);
    // Loaded only when used: the client costs each process about 19 MB of memory.
    redis = config.redisUrl === null ? null : await (await import('./redis.js')).openRedis(config.redisUrl, log);

    const counters = new CounterFlushes(store, log);
    // Made before the app so that /readyz shows its clock; started once the app listens.
    const policyClock = new PolicyClock({
      maintenance: store.maintenance,
      log,
      ...(options.clock ? { now: options.clock } : {}),
    });
    const app = await buildConfiguredApp(config, {
      store,
      model: lookup.model,
      log,
      metrics,
      metricsText: options.metricsText,
      adminTokenSha256,
      assets,
      redis,
      counters,
      policyClock,
      ...(options.stripeLinks ? { stripeLinks: options.stripeLinks } : {}),
    });
    const url = await listenPublic(app, config);
    metricsServer = await listenMetrics(config, metrics, options.metricsText, log);
    announceDemo(url, assets, log);

    const background = startBackground({ config, store, log, policyClock, metrics });
    counters.start(metrics);
    // The closures below keep what was opened (the variables above are for a failed start).
    const [opened, cache, metricsListener] = [lookup, redis, metricsServer];
    return {
      app,
      store,
      url,
      metricsUrl: metricsListener?.url ?? null,
      flushCounters: () => counters.flush(),
      async close() {
        await background.stop();
        await metricsListener?.close();
        await app.close();
        await counters.stop();
        await opened.close();
        cache?.disconnect();
        await store.close();
      },
    };
  } catch (err) {
    // A failed start releases the store, and with it the embedded folder's lock.
    await metricsServer?.close();
    await lookup?.close();
    redis?.disconnect();
    await store.close();
    throw err;
  }
}

/** Workers by default: one per core on PostgreSQL, one with the embedded store (one process owns its folder). */
export function defaultWorkers(config: Config): number {
  return config.databaseUrl === null ? 1 : Math.max(1, availableParallelism());
}

export async function main(env: NodeJS.ProcessEnv = process.env, options: { workers?: number } = {}): Promise<void> {
  let config: Config;
  try {
    config = loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`dunwall: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
  const log = createLogger(config.logLevel);
  if (cluster.isPrimary) {
    const problem =
      (await checkListen(config.host, config.port)) ??
      (config.metricsPort === null
        ? null
        : await checkListen(config.metricsHost, config.metricsPort, METRICS_LISTENER));
    if (problem !== null) {
      process.stderr.write(`dunwall: ${problem}\n`);
      process.exit(2);
    }
  }
  const workers = options.workers ?? defaultWorkers(config);
  if (workers > 1 && config.databaseUrl === null) {
    log.fatal('--workers above 1 needs DATABASE_URL: one process owns the embedded store');
    process.exit(2);
  }
  if (workers > 1 && cluster.isPrimary) {
    runPrimary(workers, log);
    return;
  }
  try {
    const metrics = createMetrics();
    const running = await start(
      config,
      log,
      cluster.isWorker
        ? { metrics, metricsText: workerMetricsText(metrics), siblings: new WorkerSiblings() }
        : { metrics },
    );
    closeOnSignals(running, log);
  } catch (err) {
    log.fatal({ err: { message: (err as Error).message, code: (err as { code?: unknown }).code } }, 'could not start');
    process.exit(1);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  void main();
}
