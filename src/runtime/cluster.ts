import cluster from 'node:cluster';
import type { Worker } from 'node:cluster';
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { AggregatorRegistry } from '../metrics/index.js';
import type { Metrics } from '../metrics/index.js';
import type { ReadModel, Siblings } from '../readmodel/index.js';
import type { ChangePosition } from '../store/index.js';

/** A worker that dies sooner than this after its start counts as a crash loop. */
const CRASH_LOOP_WINDOW_MS = 5_000;
const MAX_QUICK_RESTARTS = 5;
const METRICS_REQUEST_TIMEOUT_MS = 5_000;
const SHUTDOWN_GRACE_MS = 15_000;

const METRICS_REQUEST = 'dunwall:metrics-request';
const METRICS_ANSWER = 'dunwall:metrics-answer';

/**
 * A write's read-your-writes across the workers (src/readmodel, `writesApplied`): the
 * writing worker asks the primary (WRITE_CATCH_UP), which asks every other ready worker
 * (SIBLING_CATCH_UP), gathers their answers (SIBLING_CAUGHT_UP) and answers the writer
 * (WRITE_CAUGHT_UP). A worker is asked from the moment the primary has its READY, which
 * it sends once its read model is loaded; it catches up once more after the primary's
 * WELCOME, so that a write the primary did not ask it about is in its copy before it takes
 * a connection.
 */
const WORKER_READY = 'dunwall:worker-ready';
const WORKER_WELCOME = 'dunwall:worker-welcome';
const WRITE_CATCH_UP = 'dunwall:write-catch-up';
const WRITE_CAUGHT_UP = 'dunwall:write-caught-up';
const SIBLING_CATCH_UP = 'dunwall:sibling-catch-up';
const SIBLING_CAUGHT_UP = 'dunwall:sibling-caught-up';
/** The primary forgets a gathering no worker finished by then (the writer stopped waiting long before). */
const GATHER_TIMEOUT_MS = 10_000;
/** A worker that hears no WELCOME by then starts anyway (it has caught up once already). */
const WELCOME_TIMEOUT_MS = 5_000;

interface ClusterMessage {
  type?: string;
  id?: string;
  position?: ChangePosition | null;
  ok?: boolean;
}

/** One writer's request, while the primary waits for the other workers' answers. */
interface Gathering {
  writer: number;
  waiting: Set<number>;
  ok: boolean;
  timer: NodeJS.Timeout;
}

/**
 * The primary's side: which workers are ready, and each write's gathering of their
 * answers. A worker that dies is no longer waited for (its successor loads a fresh copy).
 */
class WriteRelay {
  private readonly ready = new Set<number>();
  private readonly gatherings = new Map<string, Gathering>();

  onMessage(worker: Worker, message: ClusterMessage): void {
    if (message.type === WORKER_READY) {
      this.ready.add(worker.id);
      worker.send({ type: WORKER_WELCOME });
    } else if (message.type === WRITE_CATCH_UP && typeof message.id === 'string') {
      this.gather(worker, message.id, message.position ?? null);
    } else if (message.type === SIBLING_CAUGHT_UP && typeof message.id === 'string') {
      const gathering = this.gatherings.get(message.id);
      if (gathering === undefined || !gathering.waiting.delete(worker.id)) return;
      gathering.ok &&= message.ok === true;
      if (gathering.waiting.size === 0) this.finish(message.id);
    }
  }

  onExit(worker: Worker): void {
    this.ready.delete(worker.id);
    for (const [id, gathering] of this.gatherings) {
      if (gathering.writer === worker.id) {
        clearTimeout(gathering.timer);
        this.gatherings.delete(id);
      } else if (gathering.waiting.delete(worker.id) && gathering.waiting.size === 0) {
        this.finish(id);
      }
    }
  }

  private gather(writer: Worker, id: string, position: ChangePosition | null): void {
    const others = [...this.ready].filter((w) => w !== writer.id);
    if (others.length === 0) {
      writer.send({ type: WRITE_CAUGHT_UP, id, ok: true });
      return;
    }
    const timer = setTimeout(() => this.finish(id, false), GATHER_TIMEOUT_MS);
    timer.unref();
    this.gatherings.set(id, { writer: writer.id, waiting: new Set(others), ok: true, timer });
    for (const w of others) cluster.workers?.[w]?.send({ type: SIBLING_CATCH_UP, id, position });
  }

  private finish(id: string, ok?: boolean): void {
    const gathering = this.gatherings.get(id);
    if (gathering === undefined) return;
    clearTimeout(gathering.timer);
    this.gatherings.delete(id);
    cluster.workers?.[gathering.writer]?.send({ type: WRITE_CAUGHT_UP, id, ok: ok ?? gathering.ok });
  }
}

/**
 * The primary of `dunwall serve --workers N`: forks the workers (they share the port through
 * node:cluster), restarts one that dies, forwards SIGTERM/SIGINT and waits for them, and
 * aggregates the workers' metrics when one of them asks for /metrics.
 */
export function runPrimary(workers: number, log: Logger): void {
  const aggregator = new AggregatorRegistry();
  let stopping = false;
  let quickRestarts = 0;
  const startedAt = new Map<number, number>();

  const fork = () => {
    const worker = cluster.fork();
    startedAt.set(worker.id, Date.now());
  };

  const relay = new WriteRelay();
  cluster.on('message', (worker, message: ClusterMessage) => {
    relay.onMessage(worker, message ?? {});
    if (message?.type !== METRICS_REQUEST) return;
    aggregator.clusterMetrics().then(
      (text) => worker.send({ type: METRICS_ANSWER, id: message.id, text }),
      (err: Error) => worker.send({ type: METRICS_ANSWER, id: message.id, error: err.message }),
    );
  });

  cluster.on('exit', (worker, code, signal) => {
    relay.onExit(worker);
    const lived = Date.now() - (startedAt.get(worker.id) ?? 0);
    startedAt.delete(worker.id);
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) {
        log.info('all workers stopped');
        process.exit(0);
      }
      return;
    }
    quickRestarts = lived < CRASH_LOOP_WINDOW_MS ? quickRestarts + 1 : 0;
    if (quickRestarts > MAX_QUICK_RESTARTS) {
      log.fatal({ code, signal }, 'workers keep dying right after their start: stopping');
      process.exit(1);
    }
    log.warn({ pid: worker.process.pid, code, signal }, 'worker died: starting another');
    fork();
  });

  const stop = (signal: NodeJS.Signals) => {
    if (stopping) process.exit(1);
    stopping = true;
    log.info({ signal }, 'stopping workers');
    for (const worker of Object.values(cluster.workers ?? {})) worker?.process.kill('SIGTERM');
    setTimeout(() => {
      log.error('workers did not stop in time: exiting');
      process.exit(1);
    }, SHUTDOWN_GRACE_MS).unref();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  cluster.setupPrimary({ execArgv: workerExecArgv(process.execArgv, process.env.NODE_OPTIONS) });
  log.info({ workers }, 'starting workers');
  for (let i = 0; i < workers; i += 1) fork();
}

/**
 * V8's young generation at most 8 MB a semi-space instead of 16: a busy process otherwise
 * grows it to about 48 MB and never gives it back. Measured side by side with 2 workers and
 * 1,000,000 subscribers (`npm run bench`, medians of 2 to 3 rounds): at 8 MB the lookup
 * answered as many requests as at 16 (hot 20.7k against 21.1k req/s, Zipf 24.0k against
 * 22.5k, within the machine's noise) with each process about 12 MB smaller; at 4 MB, 10 to
 * 20 % fewer. An operator's own setting wins.
 */
export const SEMI_SPACE_FLAG = '--max-semi-space-size=8';

export function workerExecArgv(execArgv: readonly string[], nodeOptions: string | undefined): string[] {
  const given = [...execArgv, ...(nodeOptions ?? '').split(/\s+/)].some((a) => a.startsWith('--max-semi-space-size'));
  return given ? [...execArgv] : [...execArgv, SEMI_SPACE_FLAG];
}

/** In a worker: its registry answers the primary's collection, and /metrics asks the primary for all. */
export function workerMetricsText(metrics: Metrics): () => Promise<string> {
  // Constructing one installs prom-client's answer to the primary's collection requests.
  new AggregatorRegistry();
  AggregatorRegistry.setRegistries([metrics.registry]);
  return () =>
    new Promise((resolve, reject) => {
      const id = randomUUID();
      const timer = setTimeout(() => {
        process.off('message', onMessage);
        reject(new Error('the primary did not answer with the metrics'));
      }, METRICS_REQUEST_TIMEOUT_MS);
      const onMessage = (message: { type?: string; id?: string; text?: string; error?: string }) => {
        if (message?.type !== METRICS_ANSWER || message.id !== id) return;
        clearTimeout(timer);
        process.off('message', onMessage);
        if (message.error !== undefined || message.text === undefined) reject(new Error(message.error ?? 'no metrics'));
        else resolve(message.text);
      };
      process.on('message', onMessage);
      process.send?.({ type: METRICS_REQUEST, id });
    });
}

/**
 * A worker's side of the write relay: it asks the primary on behalf of its own writes, and
 * answers the primary's questions about the others' once its read model is `serve`d.
 */
export class WorkerSiblings implements Siblings {
  private model: ReadModel | null = null;
  private readonly waiting = new Map<string, (ok: boolean) => void>();
  private welcomed: (() => void) | null = null;

  constructor() {
    process.on('message', (message: ClusterMessage) => {
      if (message?.type === WRITE_CAUGHT_UP && typeof message.id === 'string') {
        this.waiting.get(message.id)?.(message.ok === true);
      } else if (message?.type === SIBLING_CATCH_UP && typeof message.id === 'string') {
        const id = message.id;
        const answer = (ok: boolean) => process.send?.({ type: SIBLING_CAUGHT_UP, id, ok });
        if (this.model === null) answer(false);
        else this.model.catchUpTo(message.position ?? null).then(answer, () => answer(false));
      } else if (message?.type === WORKER_WELCOME) {
        this.welcomed?.();
      }
    });
  }

  catchUp(position: ChangePosition | null, timeoutMs: number): Promise<boolean> {
    if (process.send === undefined) return Promise.resolve(true);
    const id = randomUUID();
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => done(false), timeoutMs);
      const done = (ok: boolean) => {
        clearTimeout(timer);
        this.waiting.delete(id);
        resolve(ok);
      };
      this.waiting.set(id, done);
      process.send?.({ type: WRITE_CATCH_UP, id, position });
    });
  }

  /** From now on the other workers' writes are applied here on request; resolves once this copy is past any the primary did not ask about. */
  async serve(model: ReadModel): Promise<void> {
    this.model = model;
    if (process.send === undefined) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, WELCOME_TIMEOUT_MS);
      this.welcomed = () => {
        clearTimeout(timer);
        this.welcomed = null;
        resolve();
      };
      process.send?.({ type: WORKER_READY });
    });
    await model.catchUp();
  }
}
