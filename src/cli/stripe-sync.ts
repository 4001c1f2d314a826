import { randomBytes } from 'node:crypto';
import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import Stripe from 'stripe';
import type { StripeEventLike } from '../domain/stripe/derive.js';
import { obj } from '../domain/stripe/json.js';
import type { Obj } from '../domain/stripe/json.js';
import { invoiceSyncEvent, isDunningInvoice, subscriptionSyncEvent } from '../domain/stripe/sync.js';
import type { AdminClient } from './client.js';
import { CliError, ConfigurationError, EXIT_FAILURE } from './errors.js';
import type { Progress } from './progress.js';
import { ImportTally } from './stripe-tally.js';
import type { TallyState, TallySummary } from './stripe-tally.js';

/**
 * `dunwall stripe sync`: lists what is in dunning in a tenant's Stripe account today and
 * sends it through the replay endpoint as the events Stripe would have sent (see
 * domain/stripe/sync.ts), so that imported customers get the episodes webhooks would
 * have given them, and later webhooks supersede them.
 */

/** Objects per request to Stripe (its maximum) and per batch sent to Dunwall. */
export const STRIPE_PAGE_SIZE = 100;
export const SYNC_BATCH_EVENTS = 100;
/** An invoice's latest payments: the newest failed attempt is among them. */
const PAYMENTS_PER_INVOICE = 10;
/** 429s waited out per call before the import stops (resumable). */
export const MAX_RATE_LIMIT_WAITS = 8;
const DEFAULT_RETRY_AFTER_S = 2;
const MAX_RETRY_AFTER_S = 60;
/** Per request to Stripe: a hung connection must not hang the import. */
export const STRIPE_TIMEOUT_MS = 30_000;
const STATE_VERSION = 1;

interface Phase {
  label: string;
  list(stripe: Stripe, startingAfter: string | null): AsyncIterable<Obj>;
}

const subscriptionsIn = (status: 'past_due' | 'unpaid' | 'incomplete'): Phase => ({
  label: `${status} subscriptions`,
  list: (stripe, startingAfter) =>
    stripe.subscriptions.list({
      status,
      limit: STRIPE_PAGE_SIZE,
      expand: ['data.latest_invoice'],
      ...(startingAfter === null ? {} : { starting_after: startingAfter }),
    }) as unknown as AsyncIterable<Obj>,
});

/** In this order: a resumed import continues at the phase and the object it had reached. */
export const SYNC_PHASES: readonly Phase[] = [
  subscriptionsIn('past_due'),
  subscriptionsIn('unpaid'),
  subscriptionsIn('incomplete'),
  {
    label: 'open invoices',
    list: (stripe, startingAfter) =>
      stripe.invoices.list({
        status: 'open',
        collection_method: 'charge_automatically',
        limit: STRIPE_PAGE_SIZE,
        ...(startingAfter === null ? {} : { starting_after: startingAfter }),
      }) as unknown as AsyncIterable<Obj>,
  },
];

/** Where an interrupted import stands, kept between runs (no secret in it: ids and counts). */
interface SyncState {
  version: typeof STATE_VERSION;
  tenant: string;
  phase: number;
  startingAfter: string | null;
  objects: number;
  events: number;
  tally: TallyState;
}

export interface SyncOptions {
  tenant: string;
  dryRun: boolean;
  /** Where progress is kept for a resume; null: not kept (a dry run). */
  stateFile: string | null;
  /** Ignore a saved state and start over. */
  restart: boolean;
}

export interface SyncDeps {
  stripe: Stripe;
  client: AdminClient;
  progress: Progress;
  sleep(ms: number): Promise<void>;
  /** A note for the person running the import (stderr). */
  note(line: string): void;
}

export interface SyncResult extends TallySummary {
  tenant: string;
  dry_run: boolean;
  resumed: boolean;
  objects: number;
  events_sent: number;
  rate_limit_waits: number;
}

/** The Stripe client: the official package, its retries on, every request bounded in time. */
export function stripeClient(apiKey: string, apiUrl: string | undefined, version: string): Stripe {
  let target: { host?: string; port?: number; protocol?: 'http' | 'https' } = {};
  if (apiUrl !== undefined && apiUrl.trim() !== '') {
    let url: URL;
    try {
      url = new URL(apiUrl.trim());
    } catch {
      throw new ConfigurationError('DUNWALL_STRIPE_API_URL must be an http:// or https:// URL');
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new ConfigurationError('DUNWALL_STRIPE_API_URL must be an http:// or https:// URL');
    const protocol = url.protocol === 'http:' ? 'http' : 'https';
    // The key travels in every request: in clear only to this machine.
    if (protocol === 'http' && !['localhost', '127.0.0.1', '[::1]'].includes(url.hostname)) {
      throw new ConfigurationError('DUNWALL_STRIPE_API_URL may use http:// only for localhost; use https://');
    }
    target = {
      host: url.hostname.replace(/^\[|\]$/g, ''),
      port: url.port === '' ? (protocol === 'http' ? 80 : 443) : Number(url.port),
      protocol,
    };
  }
  return new Stripe(apiKey, {
    maxNetworkRetries: 2,
    timeout: STRIPE_TIMEOUT_MS,
    telemetry: false,
    appInfo: { name: 'dunwall', version },
    ...target,
  });
}

const KEY_RE = /^(rk|sk)_(live|test)_[A-Za-z0-9_]{8,}$/;

/** Checks a Stripe key's form without ever echoing it. */
export function checkStripeKey(key: string): 'restricted' | 'secret' {
  if (!KEY_RE.test(key))
    throw new ConfigurationError(
      'the Stripe API key must be a restricted key (rk_live_... or rk_test_...) or a secret key (sk_...)',
    );
  return key.startsWith('rk_') ? 'restricted' : 'secret';
}

function isRateLimit(err: unknown): err is Stripe.errors.StripeError {
  return (
    err instanceof Stripe.errors.StripeRateLimitError ||
    (err instanceof Stripe.errors.StripeError && err.statusCode === 429)
  );
}

/** Stripe's Retry-After, in ms, bounded: a missing or absurd value waits a sensible time. */
function retryAfterMs(err: Stripe.errors.StripeError): number {
  const raw = err.headers?.['retry-after'];
  const s = Number(raw);
  return (Number.isFinite(s) && s > 0 ? Math.min(s, MAX_RETRY_AFTER_S) : DEFAULT_RETRY_AFTER_S) * 1000;
}

/** A Stripe failure as one line that says what to do; never the key. */
function describeStripeError(err: unknown): string {
  if (err instanceof Stripe.errors.StripeAuthenticationError)
    return 'Stripe refused the API key (401): check the key and that it belongs to this account';
  if (err instanceof Stripe.errors.StripePermissionError) {
    return 'the API key lacks a permission (403): a restricted key needs read access to Subscriptions, Invoices and PaymentIntents';
  }
  if (err instanceof Stripe.errors.StripeConnectionError) return 'cannot reach Stripe (connection failed or timed out)';
  if (err instanceof Stripe.errors.StripeError)
    return `Stripe answered ${err.statusCode ?? '?'} ${err.code ?? err.type}${err.requestId ? ` (request ${err.requestId})` : ''}`;
  return err instanceof Error ? err.message : String(err);
}

async function loadState(file: string, tenant: string): Promise<SyncState | null> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as { code?: unknown }).code === 'ENOENT') return null;
    throw new CliError(
      `cannot read the import state ${file} (${String((err as { code?: unknown }).code ?? 'unreadable')})`,
      EXIT_FAILURE,
    );
  }
  let state: SyncState;
  try {
    state = JSON.parse(text) as SyncState;
  } catch {
    throw new CliError(`the import state ${file} is not JSON; remove it or pass --restart`, EXIT_FAILURE);
  }
  if (state.version !== STATE_VERSION || typeof state.phase !== 'number' || typeof state.tally !== 'object') {
    throw new CliError(
      `the import state ${file} is not one this version wrote; remove it or pass --restart`,
      EXIT_FAILURE,
    );
  }
  if (state.tenant !== tenant)
    throw new CliError(
      `the import state ${file} belongs to tenant ${state.tenant}; pass --state-file or --restart`,
      EXIT_FAILURE,
    );
  return state;
}

/** Written whole or not at all: a crash mid-write leaves the previous state. */
async function saveState(file: string, state: SyncState): Promise<void> {
  const tmp = `${file}.${randomBytes(4).toString('hex')}.tmp`;
  await writeFile(tmp, JSON.stringify(state), { mode: 0o600 });
  await rename(tmp, file);
}

export async function runStripeSync(deps: SyncDeps, opts: SyncOptions): Promise<SyncResult> {
  const { stripe, client, progress } = deps;
  const saved = opts.stateFile !== null && !opts.restart ? await loadState(opts.stateFile, opts.tenant) : null;
  const state: SyncState = saved ?? {
    version: STATE_VERSION,
    tenant: opts.tenant,
    phase: 0,
    startingAfter: null,
    objects: 0,
    events: 0,
    tally: new ImportTally().toJSON(),
  };
  const tally = new ImportTally(state.tally);
  if (saved !== null) {
    deps.note(
      `resuming the import of ${opts.tenant} at ${SYNC_PHASES[saved.phase]?.label ?? 'the end'} (${saved.objects} objects done before)`,
    );
  }
  let rateLimitWaits = 0;
  // Invoices already sent by this run (a subscription's latest invoice is also listed as open).
  const sentInvoices = new Set<string>();

  /** After a failed call: waits as a 429 asks, or rethrows anything else, or the last of too many 429s. */
  async function waitOutRateLimit(err: unknown, waits: number): Promise<void> {
    if (!isRateLimit(err) || waits >= MAX_RATE_LIMIT_WAITS) throw err;
    rateLimitWaits += 1;
    await deps.sleep(retryAfterMs(err));
  }

  async function waitOut<T>(call: () => Promise<T>): Promise<T> {
    for (let waits = 0; ; waits += 1) {
      try {
        return await call();
      } catch (err) {
        await waitOutRateLimit(err, waits);
      }
    }
  }

  /** Auto-pagination, restarted after the last object seen when Stripe asks to slow down. */
  async function* paginate(phase: Phase, startingAfter: string | null): AsyncGenerator<Obj> {
    let cursor = startingAfter;
    for (let waits = 0; ; waits += 1) {
      try {
        for await (const item of phase.list(stripe, cursor)) {
          cursor = typeof item.id === 'string' ? item.id : cursor;
          yield item;
        }
        return;
      } catch (err) {
        await waitOutRateLimit(err, waits);
      }
    }
  }

  async function invoiceEvent(invoice: Obj): Promise<StripeEventLike | null> {
    const id = typeof invoice.id === 'string' ? invoice.id : null;
    if (id === null || !isDunningInvoice(invoice) || sentInvoices.has(id)) return null;
    sentInvoices.add(id);
    const payments = await waitOut(() =>
      stripe.invoicePayments.list({
        invoice: id,
        limit: PAYMENTS_PER_INVOICE,
        expand: ['data.payment.payment_intent.latest_charge'],
      }),
    );
    return invoiceSyncEvent(invoice, payments.data as unknown as Obj[]);
  }

  async function eventsOf(object: Obj): Promise<StripeEventLike[]> {
    if (object.object === 'subscription') {
      const latest = obj(object.latest_invoice);
      return [subscriptionSyncEvent(object), latest === null ? null : await invoiceEvent(latest)].filter(
        (e): e is StripeEventLike => e !== null,
      );
    }
    const e = await invoiceEvent(object);
    return e === null ? [] : [e];
  }

  const text = () => {
    const label = SYNC_PHASES[state.phase]?.label ?? 'done';
    return `${Math.min(state.phase + 1, SYNC_PHASES.length)}/${SYNC_PHASES.length} ${label} · ${state.objects} objects · ${state.events} events · ${tally.customersSeen} customers`;
  };

  let batch: StripeEventLike[] = [];
  async function flush(lastId: string | null): Promise<void> {
    if (batch.length > 0) {
      const events = batch;
      batch = [];
      tally.add(events, await client.replayStripeEvents(opts.tenant, events, { dryRun: opts.dryRun }));
      state.events += events.length;
    }
    state.startingAfter = lastId;
    state.tally = tally.toJSON();
    if (opts.stateFile !== null) await saveState(opts.stateFile, state);
    progress.report(state.phase / SYNC_PHASES.length, text(), true);
  }

  try {
    for (; state.phase < SYNC_PHASES.length; state.phase += 1, state.startingAfter = null) {
      const phase = SYNC_PHASES[state.phase];
      if (phase === undefined) break;
      let lastId = state.startingAfter;
      let sinceFlush = 0;
      for await (const object of paginate(phase, state.startingAfter)) {
        batch.push(...(await eventsOf(object)));
        state.objects += 1;
        sinceFlush += 1;
        lastId = typeof object.id === 'string' ? object.id : lastId;
        progress.report(state.phase / SYNC_PHASES.length, text());
        if (batch.length >= SYNC_BATCH_EVENTS || sinceFlush >= STRIPE_PAGE_SIZE) {
          await flush(lastId);
          sinceFlush = 0;
        }
      }
      await flush(lastId);
    }
  } catch (err) {
    progress.done();
    if (err instanceof CliError) throw err;
    const where =
      opts.stateFile === null
        ? 'nothing was kept (dry run)'
        : `progress is saved in ${opts.stateFile}: run the same command again to resume`;
    throw new CliError(
      `stripe sync stopped at ${SYNC_PHASES[state.phase]?.label ?? 'the end'}: ${describeStripeError(err)}; ${where}`,
      EXIT_FAILURE,
    );
  }
  progress.report(1, text(), true);
  progress.done();
  if (opts.stateFile !== null) await rm(opts.stateFile, { force: true });
  const mismatched = tally.summary().outcomes.livemode_mismatch;
  if (mismatched > 0) {
    deps.note(
      `${mismatched} events were skipped as livemode_mismatch: their Stripe mode is not the one synced into (a test-mode key's events go to the test mode: add --test)`,
    );
  }
  return {
    tenant: opts.tenant,
    dry_run: opts.dryRun,
    resumed: saved !== null,
    objects: state.objects,
    events_sent: state.events,
    rate_limit_waits: rateLimitWaits,
    ...tally.summary(),
  };
}
