import type { Logger } from 'pino';
import {
  KEY_USAGE_FLUSH_INTERVAL_MS,
  KeyUsage,
  observeKeySightings,
  SecretKeySightings,
} from '../../http/key-usage.js';
import { observeStripeIntake, STRIPE_INTAKE_FLUSH_INTERVAL_MS, StripeIntake } from '../../http/stripe-intake.js';
import type { Metrics } from '../../metrics/index.js';
import type { Store } from '../../store/index.js';

const messageOf = (err: unknown) => ({ err: { message: (err as Error).message } });

/**
 * What requests count in memory and the store is told in batches, never per request:
 * secret keys' last use (about once a minute), secret keys seen in a browser (logged and
 * marked once a minute per key) and the tenants' Stripe intake (every few seconds).
 */
export class CounterFlushes {
  readonly keyUsage = new KeyUsage();
  readonly keySightings: SecretKeySightings;
  readonly stripeIntake = new StripeIntake();
  private droppedReported = 0;
  private readonly timers: NodeJS.Timeout[] = [];

  constructor(
    private readonly store: Store,
    private readonly log: Logger,
  ) {
    this.keySightings = new SecretKeySightings({ log, write: (seen) => store.keys.markSecretKeysSeenInBrowser(seen) });
  }

  start(metrics: Metrics): void {
    const every = (ms: number, flush: () => Promise<void>) => {
      const timer = setInterval(() => void flush(), ms);
      timer.unref();
      this.timers.push(timer);
    };
    every(KEY_USAGE_FLUSH_INTERVAL_MS, () => this.flushKeyUsage());
    every(STRIPE_INTAKE_FLUSH_INTERVAL_MS, () => this.flushIntake());
    observeKeySightings(metrics, this.keySightings);
    observeStripeIntake(metrics, this.stripeIntake);
  }

  /** Writes now what is counted so far, as the timers do. */
  async flush(): Promise<void> {
    await this.flushKeyUsage();
    await this.flushIntake();
    await this.keySightings.settled();
  }

  /** Stops the timers and writes what is left. */
  async stop(): Promise<void> {
    for (const timer of this.timers) clearInterval(timer);
    await this.keySightings.settled();
    await this.flushKeyUsage();
    await this.flushIntake();
  }

  private flushKeyUsage(): Promise<void> {
    return this.keyUsage
      .flush((uses) => this.store.keys.touchSecretKeys(uses))
      .catch((err: unknown) => this.log.warn(messageOf(err), 'secret keys: last use not recorded; trying again'));
  }

  private flushIntake(): Promise<void> {
    const intake = this.stripeIntake;
    return intake
      .flush((counts) => this.store.stripe.addStripeIntake(counts))
      .then(() => {
        if (intake.dropped === this.droppedReported) return;
        this.log.warn(
          { dropped: intake.dropped - this.droppedReported },
          'stripe intake: counts dropped, too many tenants and days between two flushes',
        );
        this.droppedReported = intake.dropped;
      })
      .catch((err: unknown) => this.log.warn(messageOf(err), 'stripe intake: counts not recorded; trying again'));
  }
}
