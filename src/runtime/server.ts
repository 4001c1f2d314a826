import cluster from 'node:cluster';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Logger } from 'pino';
import { ensureAdminTokenFile } from './admin-token.js';
import { buildApp, serveMetrics } from '../http/index.js';
import type { MetricsServer } from '../http/index.js';
import type { App } from '../http/index.js';
import { ConfigError, loadConfig } from './config.js';
import type { Config } from './config.js';
import { demoCurlCommands, readDemoPage, seedDemo, writeDemoPage } from '../demo/index.js';
import { sha256 } from '../domain/keys.js';
import { SecretBox } from '../secrets/cipher.js';
import { loadSnippet } from '../http/snippet-asset.js';
import { loadPackageTarballs } from '../http/package-tarballs.js';
import { loadConsoleAssets } from '../console/assets.js';
import type { Redis } from 'ioredis';
import { createLogger } from './logger.js';
import { ReadModel } from '../readmodel/index.js';
import type { Siblings } from '../readmodel/index.js';
import { runPrimary, workerMetricsText, WorkerSiblings } from './cluster.js';
import { createMetrics } from '../metrics/index.js';
import { PolicyClock } from './policy-clock.js';
import { KEY_USAGE_FLUSH_INTERVAL_MS, KeyUsage, SecretKeySightings } from '../http/key-usage.js';
import { STRIPE_INTAKE_FLUSH_INTERVAL_MS, StripeIntake } from '../http/stripe-intake.js';
import { Retention } from './retention.js';
import { DownstreamDeliverer } from '../downstream/index.js';
import type { Metrics } from '../metrics/index.js';
import { openReadStore, openStore } from '../store/index.js';
import type { StoreTarget } from '../store/index.js';
import type { Store } from '../store/store.js';

/** In-flight requests get this long to finish after SIGTERM before the process exits anyway. */
export const SHUTDOWN_GRACE_MS = 10_000;

/** Seals the stored secrets under DUNWALL_ENCRYPTION_KEY, opening older ones with the previous keys too. */
export function secretBoxFor(config: Config): SecretBox {
  return new SecretBox({ current: config.encryptionKey, previous: config.encryptionKeysOld });
}

export function storeTarget(config: Config): StoreTarget {
  return config.databaseUrl !== null
    ? {
        engine: 'postgres',
        url: config.databaseUrl,
        queryTimeoutMs: config.dbQueryTimeoutMs,
        connectTimeoutMs: config.dbConnectTimeoutMs,
      }
    : { engine: 'embedded', dataDir: join(config.dataDir, 'pgdata') };
}

/**
 * The read model the lookup answers from: loaded (from the replica when DATABASE_READ_URL
 * is set) before the server listens, then kept true by the primary's change log.
 */
async function openLookupModel(
  config: Config,
  store: Store,
  secrets: SecretBox,
  log: Logger,
  siblings: Siblings | undefined,
): Promise<{ model: ReadModel; close(): Promise<void> }> {
  const replica =
    config.databaseReadUrl === null
      ? null
      : await openReadStore(
          {
            engine: 'postgres',
            url: config.databaseReadUrl,
            queryTimeoutMs: config.dbQueryTimeoutMs,
            connectTimeoutMs: config.dbConnectTimeoutMs,
          },
          { secrets },
        );
  try {
    const model = await ReadModel.open(store, {
      staleIfErrorMs: config.staleIfErrorMs,
      log,
      ...(replica ? { loadFrom: replica } : {}),
      ...(siblings ? { siblings } : {}),
    });
    return {
      model,
      async close() {
        await model.close();
        await replica?.close();
      },
    };
  } catch (err) {
    await replica?.close();
    throw err;
  }
}

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

/** The admin token's SHA-256 digest: the app keeps only that. */
function resolveAdminTokenDigest(config: Config, log: Logger): Buffer | null {
  if (config.adminToken !== null) return sha256(config.adminToken);
  if (config.databaseUrl !== null) {
    log.warn('admin API disabled: DUNWALL_ADMIN_TOKEN is not set (required with DATABASE_URL)');
    return null;
  }
  const { token, path, created } = ensureAdminTokenFile(config.dataDir);
  log.info({ path }, created ? 'admin token generated; it is in this file' : 'admin token read from the data folder');
  return sha256(token);
}

/**
 * DUNWALL_DEFAULT_TIER names a tier of the store, or the service does not start: a tenant
 * created without a tier would otherwise fail (or get what the operator did not choose).
 */
async function checkDefaultTier(store: Store, name: string): Promise<void> {
  const tiers = (await store.listTiers()).map((t) => t.name);
  if (tiers.includes(name)) return;
  throw new Error(
    `DUNWALL_DEFAULT_TIER names no tier of this store: '${name}' (its tiers: ${tiers.join(', ')}); name one of them, or start without it, create the tier (dunwall tier set ${name} ...) and restart`,
  );
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
}

export async function start(config: Config, log: Logger, options: StartOptions = {}): Promise<Running> {
  if (config.databaseUrl === null) mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  const target = storeTarget(config);
  const secrets = secretBoxFor(config);
  const store = await openStore(target, { secrets });
  log.info(
    { store: store.engine, ...(target.engine === 'embedded' ? { dataDir: config.dataDir } : {}) },
    'store ready',
  );
  if (secrets.currentKeyId === null) {
    log.warn(
      'DUNWALL_ENCRYPTION_KEY is not set: HMAC, Stripe and webhook signing secrets are stored in clear; set it in production',
    );
  } else {
    log.info({ keyId: secrets.currentKeyId }, 'secrets encrypted at rest');
  }

  let redis: Redis | null = null;
  let metricsServer: MetricsServer | null = null;
  let lookupPath: Awaited<ReturnType<typeof openLookupModel>> | null = null;
  try {
    await checkDefaultTier(store, config.defaultTier);
    const adminTokenSha256 = resolveAdminTokenDigest(config, log);
    // Seeded before listening, so that the demo answers from the first request on.
    const seeded =
      store.engine === 'embedded' && config.demo && (await store.countTenants()) === 0
        ? await seedDemo(store, new Date())
        : null;
    if (seeded) writeDemoPage(config.dataDir, seeded);
    const demo = seeded ?? (store.engine === 'embedded' ? readDemoPage(config.dataDir) : null);
    const snippet = loadSnippet();
    if (snippet === null) log.warn('the browser snippet is not built: /snippet.js answers 404 until npm run build');
    const consoleAssets = loadConsoleAssets();
    if (consoleAssets === null) log.warn('the console is not built: /console answers 404 until npm run build');
    const packages = loadPackageTarballs();
    if (packages === null || packages.size === 0)
      log.warn('no package tarball is built: /packages/*.tgz answers 404 until npm run build');
    const metrics = options.metrics ?? createMetrics();
    for (const name of config.retiredVariables)
      log.warn({ variable: name }, 'this variable is no longer used: every process holds the whole read model');
    const opened = await openLookupModel(config, store, secrets, log, options.siblings);
    lookupPath = opened;
    // Asked about the other workers' writes from now on, and past any it was not asked about.
    await options.siblings?.serve(opened.model);
    // Loaded only when used: the client costs each process about 19 MB of memory.
    redis = config.redisUrl === null ? null : await (await import('./redis.js')).openRedis(config.redisUrl, log);
    const keyUsage = new KeyUsage();
    // A secret key sent from a browser: logged and marked once a minute per key, every refusal counted.
    const keySightings = new SecretKeySightings({ log, write: (seen) => store.markSecretKeysSeenInBrowser(seen) });
    const stripeIntake = new StripeIntake();
    // Made before the app so that /readyz shows its clock; started once the app listens.
    const policyClock = new PolicyClock({ store, log, ...(options.clock ? { now: options.clock } : {}) });
    const app = await buildApp({
      store,
      clockSkew: () => policyClock.skew(),
      keyUsage,
      keySightings,
      stripeIntake,
      metrics,
      ...(options.metricsText ? { metricsText: options.metricsText } : {}),
      model: opened.model,
      logLookups: config.logLookups,
      adminTokenSha256,
      rotationOverlapS: config.rotationOverlapS,
      downstream: config.downstream,
      logger: log,
      snippet,
      packages,
      demo,
      rateLimits: config.rateLimits,
      redis,
      trustedProxies: config.trustProxy,
      limits: { maxConnectionsPerAddress: config.maxConnectionsPerAddress },
      storeRequestTimeoutMs: config.storeRequestTimeoutMs,
      metricsOnPublicPort: config.metricsPort === null,
      defaultTier: config.defaultTier,
      console: { assets: consoleAssets, sessionTtlMs: config.consoleSessionTtlMs },
    });
    const address = await app.listen({ port: config.port, host: config.host }).catch((err: NodeJS.ErrnoException) => {
      const problem = listenProblem(err, config.host, config.port);
      throw problem === null ? err : Object.assign(new Error(problem), { code: err.code });
    });
    const url = address.replace('[::1]', 'localhost');
    if (config.metricsPort !== null) {
      metricsServer = await serveMetrics({
        host: config.metricsHost,
        port: config.metricsPort,
        contentType: metrics.registry.contentType,
        text: options.metricsText ?? (() => metrics.registry.metrics()),
        onError: (err) => log.error({ err: { message: (err as Error).message } }, 'metrics scrape failed'),
      }).catch((err: NodeJS.ErrnoException) => {
        const problem = listenProblem(err, config.metricsHost, config.metricsPort ?? 0, METRICS_LISTENER);
        throw problem === null ? err : Object.assign(new Error(problem), { code: err.code });
      });
      log.info({ url: `${metricsServer.url}/metrics` }, 'metrics listener');
    }
    if (seeded)
      for (const { customer, curl } of demoCurlCommands(url, seeded)) log.info({ customer, curl }, 'demo lookup');
    if (demo) log.info({ url: `${url}/demo` }, 'demo page');
    const metricsListener = metricsServer;
    const retention = new Retention({
      store,
      stripeEventsDays: config.stripeEventsRetentionDays,
      historyDays: config.historyRetentionDays,
      downstreamDays: config.downstreamRetentionDays,
      statusFeedDays: config.statusFeedRetentionDays,
      log,
    }).start();
    const deliverer = new DownstreamDeliverer({ store: store.downstream, ...config.downstream, log }).start();
    // Due lockouts are recorded, and a policy change begins to go through its tenant's subscribers, within a tick.
    policyClock.start();
    // A change this instance commits is sent at once; others' within the poll interval.
    const stopWaking = store.onCommit(() => deliverer.wake());
    // Secret keys' last use, written about once a minute, never per request.
    const flushKeyUsage = () =>
      keyUsage
        .flush((uses) => store.touchSecretKeys(uses))
        .catch((err: unknown) =>
          log.warn({ err: { message: (err as Error).message } }, 'secret keys: last use not recorded; trying again'),
        );
    const keyUsageTimer = setInterval(() => void flushKeyUsage(), KEY_USAGE_FLUSH_INTERVAL_MS);
    keyUsageTimer.unref();
    // The tenants' Stripe intake counters, one statement every few seconds, never per delivery.
    let droppedReported = 0;
    const flushIntake = () =>
      stripeIntake
        .flush((counts) => store.addStripeIntake(counts))
        .then(() => {
          if (stripeIntake.dropped === droppedReported) return;
          log.warn(
            { dropped: stripeIntake.dropped - droppedReported },
            'stripe intake: counts dropped, too many tenants and days between two flushes',
          );
          droppedReported = stripeIntake.dropped;
        })
        .catch((err: unknown) =>
          log.warn({ err: { message: (err as Error).message } }, 'stripe intake: counts not recorded; trying again'),
        );
    const intakeTimer = setInterval(() => void flushIntake(), STRIPE_INTAKE_FLUSH_INTERVAL_MS);
    intakeTimer.unref();
    metrics.observeDownstreamWebhooks(
      () => deliverer.counts,
      async () => {
        const oldest = await store.downstream.oldestPendingAt().catch(() => null);
        return oldest === null ? 0 : Math.max(0, (Date.now() - oldest.getTime()) / 1000);
      },
    );
    metrics.observeCounter(
      'dunwall_downstream_webhook_attempts_cut_total',
      'Downstream webhook attempts cut after 5 s without an answer, every slot being taken, to give the slot to a tenant holding none',
      () => deliverer.cuts,
    );
    metrics.observeCounter(
      'dunwall_secret_key_browser_refusals_total',
      "Requests refused because they carried a tenant's secret key from a browser (Origin): the key is to be rotated",
      () => keySightings.refused,
    );
    metrics.observeCounter(
      'dunwall_policy_lockouts_recorded_total',
      'Scheduled lockouts (a grace ended, an escalation) recorded by this instance',
      () => policyClock.counts.lockoutsRecorded,
    );
    metrics.observeGauge(
      'dunwall_clock_skew_seconds',
      "This instance's clock minus the database's, in seconds (time-driven changes follow the database's)",
      () => policyClock.skew().skewSeconds,
    );
    metrics.observeCounter(
      'dunwall_policy_subscribers_reanswered_total',
      'Subscribers answered again under a changed policy by this instance',
      () => policyClock.counts.subscribersReanswered,
    );
    metrics.observeCounter(
      'dunwall_retention_stripe_events_deleted_total',
      'Processed Stripe events pruned by age',
      () => retention.deleted.stripe_events,
    );
    metrics.observeCounter(
      'dunwall_retention_history_deleted_total',
      'History entries pruned by age',
      () => retention.deleted.subscriber_history,
    );
    metrics.observeCounter(
      'dunwall_retention_webhook_messages_deleted_total',
      'Downstream webhook messages pruned by age',
      () => retention.deleted.webhook_events,
    );
    metrics.observeCounter(
      'dunwall_retention_webhook_attempts_deleted_total',
      'Downstream webhook attempts pruned by age',
      () => retention.deleted.webhook_attempts,
    );
    metrics.observeCounter(
      'dunwall_retention_status_changes_deleted_total',
      "The status feed's changes pruned by age",
      () => retention.deleted.status_changes,
    );
    metrics.observeCounter(
      'dunwall_retention_stripe_intake_deleted_total',
      'Stripe intake counter rows pruned by age',
      () => retention.deleted.stripe_intake,
    );
    metrics.observeCounter(
      'dunwall_stripe_intake_dropped_total',
      'Stripe intake counts this process dropped: its in-memory map was full between two flushes',
      () => stripeIntake.dropped,
    );
    return {
      app,
      store,
      url,
      metricsUrl: metricsListener?.url ?? null,
      async flushCounters() {
        await flushKeyUsage();
        await flushIntake();
        await keySightings.settled();
      },
      async close() {
        await retention.stop();
        clearInterval(keyUsageTimer);
        clearInterval(intakeTimer);
        stopWaking();
        await policyClock.stop();
        await deliverer.stop();
        await metricsListener?.close();
        await app.close();
        await keySightings.settled();
        await flushKeyUsage();
        await flushIntake();
        await opened.close();
        redis?.disconnect();
        await store.close();
      },
    };
  } catch (err) {
    // A failed start releases the store, and with it the embedded folder's lock.
    await metricsServer?.close();
    await lookupPath?.close();
    redis?.disconnect();
    await store.close();
    throw err;
  }
}

/** Stop accepting, let in-flight requests finish, close the store; a second signal forces the exit. */
export function closeOnSignals(running: Running, log: Logger): void {
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

/** The variables that name a listener's address, for its errors. */
interface ListenVariables {
  host: string;
  port: string;
}
const PUBLIC_LISTENER: ListenVariables = { host: 'HOST', port: 'PORT' };
const METRICS_LISTENER: ListenVariables = { host: 'METRICS_HOST', port: 'METRICS_PORT' };

/** Why the service cannot listen on HOST:PORT, in the operator's terms; null when it can. */
export function listenProblem(
  err: NodeJS.ErrnoException,
  host: string,
  port: number,
  names: ListenVariables = PUBLIC_LISTENER,
): string | null {
  const { host: H, port: P } = names;
  switch (err.code) {
    case 'EADDRINUSE':
      return `${P} ${port} is already in use on ${host}: stop what listens there, or set ${P} to a free port`;
    case 'EACCES':
      return `${P} ${port} on ${host} is not allowed to this user (ports below 1024 need privileges): set ${P} to 1024 or above`;
    case 'EADDRNOTAVAIL':
      return `${H} ${host} is not an address of this machine: set ${H} to one of its addresses, 0.0.0.0 or ::`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `${H} ${host} does not resolve to an address: set ${H} to an IP address or a name this machine resolves`;
    default:
      return null;
  }
}

/**
 * Binds HOST:PORT for a moment, before the store starts and before any worker is forked: a
 * port in use or a host that is not this machine's is reported at once, naming the variable.
 */
export async function checkListen(
  host: string,
  port: number,
  names: ListenVariables = PUBLIC_LISTENER,
): Promise<string | null> {
  if (port === 0) return null;
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) =>
      resolve(listenProblem(err, host, port, names) ?? `cannot listen on ${host}:${port}: ${err.message}`),
    );
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(null)));
  });
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
