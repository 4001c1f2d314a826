import type { Logger } from 'pino';
import type { Store } from '../store/store.js';

/** How often due lockouts and pending policy changes are looked for. */
export const POLICY_TICK_MS = 1_000;
/** Due lockouts recorded per query; more are taken at once when a batch is full. */
const DUE_BATCH = 100;
/** Subscribers answered again per transaction of a policy change. */
export const POLICY_SWEEP_BATCH = 500;
/** At most this many batches a tick, so that one tick ends; the next goes on. */
const MAX_BATCHES_PER_TICK = 200;

export interface PolicyClockOptions {
  store: Pick<Store, 'recordDueLockouts' | 'sweepPolicy'>;
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
 */
export class PolicyClock {
  readonly counts = { lockoutsRecorded: 0, subscribersReanswered: 0 };
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
      .catch((err: unknown) => this.opts.log.warn({ err: { message: (err as Error).message } }, 'policy: recording due changes failed; trying again'))
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
    const now = () => new Date((this.opts.now ?? Date.now)());
    for (let i = 0; i < MAX_BATCHES_PER_TICK && !this.stopped; i += 1) {
      const n = await this.opts.store.recordDueLockouts(now(), DUE_BATCH);
      this.counts.lockoutsRecorded += n;
      if (n < DUE_BATCH) break;
    }
    for (let i = 0; i < MAX_BATCHES_PER_TICK && !this.stopped; i += 1) {
      const { seen, pending } = await this.opts.store.sweepPolicy(now(), this.opts.sweepBatch ?? POLICY_SWEEP_BATCH);
      this.counts.subscribersReanswered += seen;
      if (!pending) break;
      this.counts.lockoutsRecorded += await this.opts.store.recordDueLockouts(now(), DUE_BATCH);
    }
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
