import type { Logger } from 'pino';
import type { Maintenance } from '../store/index.js';
import type { Metrics } from '../metrics/index.js';

/** How often due lockouts and pending policy changes are looked for. */
export const POLICY_TICK_MS = 1_000;
/** Due lockouts recorded per query; more are taken at once when a batch is full. */
const DUE_BATCH = 100;
/** Subscribers answered again per transaction of a policy change. */
export const POLICY_SWEEP_BATCH = 500;
/** At most this many batches a tick, so that one tick ends; the next goes on. */
const MAX_BATCHES_PER_TICK = 200;
/**
 * How far an instance's clock may be from the database's before it says so (log, metric,
 * /readyz). Time-driven writes never depend on it: they are made on the database's clock.
 */
export const CLOCK_SKEW_BOUND_MS = 2_000;
/** The instance's clock is compared with the database's every this many ticks. */
const SKEW_EVERY_TICKS = 10;

/** How this instance's clock stands against the database's. */
export interface ClockSkew {
  /** The instance's clock minus the database's, in seconds (positive: the instance is ahead); null until measured. */
  skewSeconds: number | null;
  boundSeconds: number;
  /** False when the skew is larger than the bound. */
  ok: boolean;
}

export interface PolicyClockOptions {
  maintenance: Pick<Maintenance, 'recordDueLockouts' | 'sweepPolicy' | 'databaseTime'>;
  /**
   * The instance's clock (tests pass a fake one). Due lockouts are recorded on the database's
   * clock whatever this says: an injected clock can only hold a record back.
   */
  now?: () => number;
  log: Pick<Logger, 'info' | 'warn'>;
  intervalMs?: number;
  sweepBatch?: number;
}

/**
 * What the tenants' policies make happen with time, written by whichever instance comes
 * first: a scheduled lockout that fell due (the lookup already answers it by comparing its
 * clock; this records it, with its history row and downstream webhook), and a policy change
 * going through a tenant's subscribers batch by batch. Every instance runs one; the store
 * makes each write happen once however many race, and a restart resumes from the table.
 * Every write is made on the database's clock (`now()`), never on this instance's: one
 * instance whose clock runs ahead cannot record a lockout early for everyone. It compares
 * its clock with the database's and says when they are further apart than the bound.
 */
export class PolicyClock {
  readonly counts = { lockoutsRecorded: 0, subscribersReanswered: 0 };
  private skewMs: number | null = null;
  private ticks = 0;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;

  constructor(private readonly opts: PolicyClockOptions) {}

  start(): this {
    this.schedule();
    return this;
  }

  /** One pass: every due lockout, then the pending policy changes (bounded); joined when one runs. */
  tick(): Promise<void> {
    this.running ??= this.pass()
      .catch((err: unknown) =>
        this.opts.log.warn(
          { err: { message: (err as Error).message } },
          'policy: recording due changes failed; trying again',
        ),
      )
      .finally(() => {
        this.running = null;
      });
    return this.running;
  }

  /**
   * Due lockouts first, and again between the batches of a policy change: a customer whose
   * lockout, scheduled under the old policy, falls due while the change goes through is
   * answered again under the new one at once, not when the sweep reaches it.
   */
  private async pass(): Promise<void> {
    if (this.ticks++ % SKEW_EVERY_TICKS === 0) await this.measureSkew();
    // In service no time is passed: the store takes the database's. A test's clock holds back.
    const injected = this.opts.now;
    const now = () => (injected === undefined ? null : new Date(injected()));
    for (let i = 0; i < MAX_BATCHES_PER_TICK && !this.stopped; i += 1) {
      const n = await this.opts.maintenance.recordDueLockouts(now(), DUE_BATCH);
      this.counts.lockoutsRecorded += n;
      if (n < DUE_BATCH) break;
    }
    for (let i = 0; i < MAX_BATCHES_PER_TICK && !this.stopped; i += 1) {
      const { seen, pending } = await this.opts.maintenance.sweepPolicy(
        now(),
        this.opts.sweepBatch ?? POLICY_SWEEP_BATCH,
      );
      this.counts.subscribersReanswered += seen;
      if (!pending) break;
      this.counts.lockoutsRecorded += await this.opts.maintenance.recordDueLockouts(now(), DUE_BATCH);
    }
  }

  /** How this instance's clock stands against the database's, as last measured. */
  skew(): ClockSkew {
    const boundSeconds = CLOCK_SKEW_BOUND_MS / 1000;
    if (this.skewMs === null) return { skewSeconds: null, boundSeconds, ok: true };
    return {
      skewSeconds: Math.round(this.skewMs) / 1000,
      boundSeconds,
      ok: Math.abs(this.skewMs) <= CLOCK_SKEW_BOUND_MS,
    };
  }

  /**
   * The instance's clock against the database's, the query's round trip halved; logged when
   * it crosses the bound, either way.
   */
  async measureSkew(): Promise<ClockSkew> {
    const clock = this.opts.now ?? Date.now;
    const sent = clock();
    const database = (await this.opts.maintenance.databaseTime()).getTime();
    const received = clock();
    const wasOk = this.skew().ok;
    this.skewMs = (sent + received) / 2 - database;
    const skew = this.skew();
    if (!skew.ok && wasOk)
      this.opts.log.warn(
        { skew_seconds: skew.skewSeconds, bound_seconds: skew.boundSeconds },
        "clock: this instance's clock is off from the database's by more than the bound; time-driven changes follow the database's",
      );
    else if (skew.ok && !wasOk)
      this.opts.log.info(
        { skew_seconds: skew.skewSeconds },
        "clock: this instance's clock is back within the bound of the database's",
      );
    return skew;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      void this.tick().finally(() => this.schedule());
    }, this.opts.intervalMs ?? POLICY_TICK_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    await this.running;
  }
}

/** The policy clock's work and this instance's clock against the database's, read at each scrape. */
export function observePolicyClock(metrics: Metrics, clock: Pick<PolicyClock, 'counts' | 'skew'>): void {
  metrics.observeCounter(
    'dunwall_policy_lockouts_recorded_total',
    'Scheduled lockouts (a grace ended, an escalation) recorded by this instance',
    () => clock.counts.lockoutsRecorded,
  );
  metrics.observeGauge(
    'dunwall_clock_skew_seconds',
    "This instance's clock minus the database's, in seconds (time-driven changes follow the database's)",
    () => clock.skew().skewSeconds,
  );
  metrics.observeCounter(
    'dunwall_policy_subscribers_reanswered_total',
    'Subscribers answered again under a changed policy by this instance',
    () => clock.counts.subscribersReanswered,
  );
}
