import type { Logger } from 'pino';
import type { Store } from '../../store/index.js';
import type { Config } from '../config.js';

/** Subscribers given a new link per transaction of the renewal. */
const RENEW_BATCH = 200;
/** How often links close to their end are renewed: far inside the renewal margin (7 days). */
export const LINK_RENEW_INTERVAL_MS = 3_600_000;

/**
 * DUNWALL_PUBLIC_URL at boot (docs/links.md): required once a data space has a Stripe API key,
 * since links through Dunwall are made from it; then recorded, so that a change of address
 * has every stored link made again.
 */
export async function checkPublicUrl(
  config: Pick<Config, 'publicUrl'>,
  store: Pick<Store, 'links'>,
  log: Pick<Logger, 'info'>,
  now: Date,
): Promise<void> {
  if (config.publicUrl === null && (await store.links.anySpaceWithKey()))
    throw new Error(
      'DUNWALL_PUBLIC_URL is not set, and a tenant has a Stripe API key: pay and card links go through this service, so it must know its public address (https://, or http:// for a loopback address); set it and restart',
    );
  if (await store.links.setPublicUrl(config.publicUrl, now))
    log.info({ publicUrl: config.publicUrl }, 'public address changed: pay links are made again');
}

/** Renews the links of subscribers still in dunning before they expire, every interval, until stopped. */
export function startLinkRenewal(parts: {
  store: Pick<Store, 'links'>;
  log: Pick<Logger, 'warn'>;
  now?: () => number;
  intervalMs?: number;
}): { stop(): Promise<void> } {
  const { store, log } = parts;
  const now = parts.now ?? Date.now;
  let running: Promise<void> | null = null;
  const pass = async (): Promise<void> => {
    while ((await store.links.renewDue(new Date(now()), RENEW_BATCH)) === RENEW_BATCH) {
      // A full batch: more may be due.
    }
  };
  const timer = setInterval(() => {
    running ??= pass()
      .catch((err: unknown) =>
        log.warn({ err: { message: (err as Error).message } }, 'links: renewal failed; trying again'),
      )
      .finally(() => {
        running = null;
      });
  }, parts.intervalMs ?? LINK_RENEW_INTERVAL_MS);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
