import { outsideRequestBounds } from '../store/index.js';
import type { Metrics } from '../metrics/index.js';

/**
 * When each secret key was last used, kept in memory and written in batches
 * (`SecretKeyStore.touchSecretKeys`): `last_used_at` is coarse by design, so that a request
 * never writes. Each process records its own uses; the store keeps the latest.
 */
export const KEY_USAGE_FLUSH_INTERVAL_MS = 60_000;

export class KeyUsage {
  private pending = new Map<string, number>();

  /** A request used the key at `nowMs`. */
  used(keyId: string, nowMs: number): void {
    const seen = this.pending.get(keyId);
    if (seen === undefined || seen < nowMs) this.pending.set(keyId, nowMs);
  }

  /** Hands the uses since the last flush to `write`; kept for the next flush when it fails. */
  async flush(write: (uses: ReadonlyMap<string, Date>) => Promise<void>): Promise<void> {
    if (this.pending.size === 0) return;
    const taken = this.pending;
    this.pending = new Map();
    try {
      await write(new Map([...taken].map(([id, ms]) => [id, new Date(ms)])));
    } catch (err) {
      for (const [id, ms] of taken) this.used(id, ms);
      throw err;
    }
  }
}

/**
 * A key's sightings in a browser are logged and written at most this often per process: a
 * page that leaks a key asks with it at every view, and a flood of refusals must not become
 * a flood of log lines or writes.
 */
export const BROWSER_SIGHTING_INTERVAL_MS = 60_000;
/** Keys remembered between two sightings; past it, those not seen within the interval are forgotten. */
const MAX_SIGHTED_KEYS = 10_000;
/** An `Origin` is the sender's to write: logged no longer than this. */
const MAX_LOGGED_ORIGIN_CHARS = 200;

/** A current secret key of a tenant, sent from a browser (`Origin`) and refused. */
export interface BrowserSighting {
  /** The tenant's slug. */
  tenant: string;
  keyId: string;
  /** The key's first characters, as its list shows them: never more of the key. */
  prefix: string;
  origin: string;
}

export interface SightingLog {
  warn(obj: object, msg: string): void;
}

/**
 * Secret keys seen from a browser (docs/security.md): every refusal is counted; once a
 * minute per key, it is logged at warn (tenant, key id and prefix, origin) and the key is
 * marked (`seen_in_browser_at`, and `last_used_at`) by a write that runs after the refusal
 * has been answered. Nothing here waits: the lookup's fast path calls `seen`.
 */
export class SecretKeySightings {
  /** Refusals of a tenant's secret key sent from a browser, since the start. */
  refused = 0;
  private readonly lastRecorded = new Map<string, number>();
  private readonly writes = new Set<Promise<void>>();

  constructor(
    private readonly opts: {
      log: SightingLog;
      write: (seen: ReadonlyMap<string, Date>) => Promise<void>;
      intervalMs?: number;
    },
  ) {}

  seen(sighting: BrowserSighting, nowMs: number): void {
    this.refused += 1;
    const intervalMs = this.opts.intervalMs ?? BROWSER_SIGHTING_INTERVAL_MS;
    const last = this.lastRecorded.get(sighting.keyId);
    if (last !== undefined && nowMs - last < intervalMs) return;
    if (last === undefined && this.lastRecorded.size >= MAX_SIGHTED_KEYS) {
      for (const [id, at] of this.lastRecorded) if (nowMs - at >= intervalMs) this.lastRecorded.delete(id);
    }
    this.lastRecorded.set(sighting.keyId, nowMs);
    this.opts.log.warn(
      {
        tenant: sighting.tenant,
        keyId: sighting.keyId,
        keyPrefix: sighting.prefix,
        origin: sighting.origin.slice(0, MAX_LOGGED_ORIGIN_CHARS),
      },
      'a secret key was sent from a browser and refused: treat it as leaked, rotate it and keep it on servers',
    );
    // The process's write, never bounded by (nor failing) the request that was refused.
    const write = outsideRequestBounds(() => this.opts.write(new Map([[sighting.keyId, new Date(nowMs)]])))
      .catch((err: unknown) =>
        this.opts.log.warn(
          { err: { message: (err as Error).message }, keyId: sighting.keyId },
          'secret key seen in a browser: the mark was not written',
        ),
      )
      .finally(() => this.writes.delete(write));
    this.writes.add(write);
  }

  /** Resolves once the marks written so far have been (a flush, a close). */
  async settled(): Promise<void> {
    await Promise.all([...this.writes]);
  }
}

/** Requests refused for a secret key sent from a browser, read at each scrape. */
export function observeKeySightings(metrics: Metrics, sightings: Pick<SecretKeySightings, 'refused'>): void {
  metrics.observeCounter(
    'dunwall_secret_key_browser_refusals_total',
    "Requests refused because they carried a tenant's secret key from a browser (Origin): the key is to be rotated",
    () => sightings.refused,
  );
}
