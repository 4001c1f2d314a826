import { Webhook } from 'standardwebhooks';
import { AllowedNetworks, retryDelayMs, zeroDeliveryOutcomeCounts } from '../domain/downstream-endpoints.js';
import type { AttemptResult, ClaimedDelivery, DeliveryOutcome, DeliveryQueue } from '../store/index.js';
import { sendDownstream } from './send.js';
import type { SendOptions } from './send.js';

/**
 * Sends downstream webhooks (docs/webhooks.md): takes the deliveries that are due from the
 * store's queue, signs each with the endpoint's secrets (Standard Webhooks), POSTs it, and
 * records the attempt. Every instance runs one; the store's claims keep them off each
 * other's deliveries.
 */

export interface DeliverySettings {
  /** Each attempt, from the DNS lookup to the response. */
  attemptTimeoutMs: number;
  /** Attempts under way at once for one endpoint, across instances. */
  concurrencyPerEndpoint: number;
  /** Networks allowed despite being private, loopback or link-local (CIDRs). */
  allowedNetworks: readonly string[];
  /** Endpoint URLs may be http:// to a loopback host (local development). */
  allowHttpLoopback: boolean;
}

export const DEFAULT_DELIVERY_SETTINGS: Readonly<DeliverySettings> = Object.freeze({
  attemptTimeoutMs: 15_000,
  concurrencyPerEndpoint: 4,
  allowedNetworks: [],
  allowHttpLoopback: false,
});

/** How often the queue is read when nothing wakes the deliverer. */
const POLL_MS = 1_000;
/** Attempts under way at once in one process. */
export const MAX_IN_FLIGHT = 64;
/** Attempts under way at once for one tenant: a quarter of a process's, whatever its endpoints. */
export const MAX_IN_FLIGHT_PER_TENANT = 16;
/**
 * Slots of a process that tenants already holding one never take: a tenant with nothing under
 * way takes one of them (one per claim), so that those holding slots, however many, fill 48
 * of the 64 at most between them.
 */
export const RESERVED_SLOTS = 16;
/**
 * When every slot is taken and a tenant holding none has a delivery due, the attempt under
 * way longest, of the tenant holding the most slots, is cut once it has run this long: it is
 * recorded as failed and retried later, and its slot goes to the waiting tenant.
 */
export const CUT_AFTER_MS = 5_000;
const USER_AGENT = 'Dunwall-Webhooks/1';

export interface DelivererOptions extends DeliverySettings {
  queue: DeliveryQueue;
  now?: () => number;
  random?: () => number;
  log: { info(obj: object, msg: string): void; warn(obj: object, msg: string): void };
  /** Host name resolution (tests point names at loopback addresses). */
  resolve?: SendOptions['resolve'];
  pollMs?: number;
}

/** The signature header: one `v1,<base64>` per secret in force, space-separated, so that a receiver holding either verifies. */
export function signatureHeader(secrets: readonly string[], messageId: string, at: Date, payload: string): string {
  return secrets.map((secret) => new Webhook(secret).sign(messageId, at, payload)).join(' ');
}

export class DownstreamDeliverer {
  /** Attempts by outcome since the start. */
  readonly counts: Record<DeliveryOutcome, number> = zeroDeliveryOutcomeCounts();
  /** Claims since the start that found every slot taken while a tenant holding none had a delivery due. */
  waitingSeen = 0;
  /** Attempts cut since the start to give their slot to such a tenant. */
  cuts = 0;
  private readonly allowed: AllowedNetworks;
  private readonly now: () => number;
  private inFlight = new Set<Promise<void>>();
  /** The attempts under way: each one's tenant, start (by `now`) and the means to cut it. */
  private readonly running = new Map<Promise<void>, { tenantId: number; startedAt: number; cut: AbortController }>();
  private claiming: Promise<void> | null = null;
  private again = false;
  /** The last claim found deliveries due: some may wait for room. */
  private backlog = false;
  /** Endpoints whose signing secret did not open, as last logged: endpoint id to reason. */
  private readonly unreadableEndpoints = new Map<string, string>();
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  /** Ends the attempts under way when the service stops: their leases let another instance send them. */
  private readonly stopping = new AbortController();

  constructor(private readonly opts: DelivererOptions) {
    this.allowed = new AllowedNetworks(opts.allowedNetworks);
    this.now = opts.now ?? Date.now;
  }

  /** Reads the queue now and then every second; `wake` reads it at once (after a local commit). */
  start(): this {
    const tick = () => {
      if (this.stopped) return;
      this.wake();
      this.timer = setTimeout(tick, this.opts.pollMs ?? POLL_MS);
      this.timer.unref();
    };
    tick();
    return this;
  }

  wake(): void {
    if (this.stopped) return;
    if (this.claiming !== null) {
      this.again = true;
      return;
    }
    this.serialize(
      this.claimBatch().catch((err: unknown) =>
        this.opts.log.warn(
          { err: { message: (err as Error).message } },
          'webhooks: reading the queue failed; trying again shortly',
        ),
      ),
    );
  }

  /**
   * Claims what is due and waits for those attempts, and any others under way, to be
   * recorded; returns how many it claimed. Tests drive the deliverer with it.
   */
  async runOnce(): Promise<number> {
    while (this.claiming !== null) await this.claiming;
    const run = this.claimBatch();
    this.serialize(run);
    const n = await run;
    await Promise.all([...this.inFlight]);
    return n;
  }

  /**
   * One claim at a time in a process: each counts the attempts under way (its process's
   * included) before it takes more, so that two at once cannot each fill the room, or a
   * tenant's share, that they both saw. A wake meanwhile claims again once it ends.
   */
  private serialize(run: Promise<unknown>): void {
    this.claiming = run
      .then(
        () => undefined,
        () => undefined,
      )
      .finally(() => {
        this.claiming = null;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  /**
   * Stops claiming and ends the attempts under way at once, recording nothing of them: once
   * their leases end, another instance (or this one, restarted) sends them again, with the
   * same webhook-id.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.stopping.abort();
    for (const r of this.running.values()) r.cut.abort();
    await this.claiming;
    await Promise.all([...this.inFlight]);
  }

  /**
   * Names an endpoint whose signing secret does not open once, not at each claim that skips
   * it, and says so again once one of its deliveries is claimed (its secret was fixed or
   * rotated). The reason names the row, never the secret.
   */
  private reportUnreadable(
    unreadable: readonly { endpointId: string; tenantId: number; reason: string }[],
    claimed: readonly ClaimedDelivery[],
  ): void {
    for (const bad of unreadable) {
      if (this.unreadableEndpoints.get(bad.endpointId) === bad.reason) continue;
      this.unreadableEndpoints.set(bad.endpointId, bad.reason);
      this.opts.log.warn(
        { endpoint: bad.endpointId, tenantId: bad.tenantId, reason: bad.reason },
        "webhooks: an endpoint's signing secret cannot be read; its messages wait, every other endpoint is sent to",
      );
    }
    if (this.unreadableEndpoints.size === 0) return;
    for (const delivery of claimed) {
      if (this.unreadableEndpoints.delete(delivery.endpointId))
        this.opts.log.info(
          { endpoint: delivery.endpointId },
          "webhooks: an endpoint's signing secret is readable again",
        );
    }
  }

  /** Attempts under way per tenant in this process. */
  private heldByTenant(): Map<number, number> {
    const held = new Map<number, number>();
    for (const r of this.running.values()) held.set(r.tenantId, (held.get(r.tenantId) ?? 0) + 1);
    return held;
  }

  /**
   * A tenant holding no slot waits while every slot is taken: cuts the attempt under way
   * longest of the tenant holding the most, once it has run `CUT_AFTER_MS`. Its slot frees
   * when the cut is recorded, and the next claim gives it to the waiting tenant (tenants
   * holding none come first).
   */
  private cutOne(): void {
    const held = this.heldByTenant();
    const oldEnough = this.now() - CUT_AFTER_MS;
    let pick: { tenantId: number; startedAt: number; cut: AbortController } | null = null;
    for (const r of this.running.values()) {
      if (r.startedAt > oldEnough || r.cut.signal.aborted) continue;
      if (
        pick === null ||
        (held.get(r.tenantId) ?? 0) > (held.get(pick.tenantId) ?? 0) ||
        ((held.get(r.tenantId) ?? 0) === (held.get(pick.tenantId) ?? 0) && r.startedAt < pick.startedAt)
      )
        pick = r;
    }
    if (pick === null) return;
    this.cuts += 1;
    pick.cut.abort();
  }

  private async claimBatch(): Promise<number> {
    const room = MAX_IN_FLIGHT - this.inFlight.size;
    const at = new Date(this.now());
    const held = this.heldByTenant();
    const {
      deliveries: claimed,
      due,
      unreadable,
      waiting,
    } = await this.opts.queue.claim(at, {
      perEndpoint: this.opts.concurrencyPerEndpoint,
      perTenant: MAX_IN_FLIGHT_PER_TENANT,
      // With no room, the claim takes nothing and says whether a tenant holding none waits.
      batch: Math.max(room, 0),
      shared: Math.max(room - RESERVED_SLOTS, 0),
      busyTenants: [...held.keys()],
      // Long enough that an attempt always ends inside it; an instance killed mid-attempt
      // leaves its deliveries to others once it ends.
      leaseMs: 2 * this.opts.attemptTimeoutMs + 1_000,
    });
    this.backlog = due;
    this.reportUnreadable(unreadable ?? [], claimed);
    if (waiting === true && claimed.length === 0) {
      this.waitingSeen += 1;
      this.cutOne();
    }
    for (const delivery of claimed) {
      const cut = new AbortController();
      const p: Promise<void> = this.attempt(delivery, cut.signal)
        .catch((err: unknown) =>
          this.opts.log.warn(
            { err: { message: (err as Error).message }, endpoint: delivery.endpointId, message: delivery.messageId },
            'webhooks: recording an attempt failed; it will be retried',
          ),
        )
        .finally(() => {
          this.inFlight.delete(p);
          this.running.delete(p);
          // Room freed: claim again at once if the last claim found deliveries due (a cap or
          // a lock may have held some back); otherwise the next commit or poll does.
          if (!this.stopped && this.backlog) this.wake();
        });
      this.inFlight.add(p);
      this.running.set(p, { tenantId: delivery.tenantId, startedAt: this.now(), cut });
    }
    return claimed.length;
  }

  private async attempt(d: ClaimedDelivery, cut: AbortSignal): Promise<void> {
    const at = new Date(this.now());
    const headers = {
      'content-type': 'application/json',
      'user-agent': USER_AGENT,
      'webhook-id': d.messageId,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': signatureHeader(d.secrets, d.messageId, at, d.payload),
    };
    const sent = await sendDownstream(d.url, headers, d.payload, {
      timeoutMs: this.opts.attemptTimeoutMs,
      allowed: this.allowed,
      allowHttp: this.opts.allowHttpLoopback,
      signal: cut,
      ...(this.opts.resolve ? { resolve: this.opts.resolve } : {}),
    });
    // Stopping: nothing is recorded, the lease hands the delivery on. Cut for another
    // tenant: a failed attempt, retried as any other.
    if (sent.aborted && this.stopping.signal.aborted) return;
    const error = sent.aborted
      ? `cut after ${Math.round((this.now() - at.getTime()) / 1000)} s without an answer: every delivery slot was taken and another tenant's message was waiting`
      : sent.error;
    const done = new Date(this.now());
    const outcome: AttemptResult['outcome'] =
      sent.statusCode !== null && sent.statusCode >= 200 && sent.statusCode < 300
        ? 'delivered'
        : sent.statusCode === 410
          ? 'gone'
          : sent.refused
            ? 'refused'
            : 'failed';
    const retryAt = new Date(done.getTime() + retryDelayMs(d.attempt, this.opts.random));
    const result: AttemptResult = { outcome, statusCode: sent.statusCode, latencyMs: sent.latencyMs, error, retryAt };
    const recorded = await this.opts.queue.complete(d, result, done);
    const counted: DeliveryOutcome = recorded === 'gave_up' && outcome !== 'gone' ? 'gave_up' : outcome;
    this.counts[counted] += 1;
    if (outcome === 'gone')
      this.opts.log.warn(
        { endpoint: d.endpointId, message: d.messageId },
        'webhooks: the endpoint answered 410 Gone; it is disabled',
      );
    else if (counted === 'gave_up')
      this.opts.log.warn(
        { endpoint: d.endpointId, message: d.messageId, error },
        'webhooks: a message failed for its whole retry window',
      );
    if (recorded === 'lost')
      this.opts.log.info(
        { endpoint: d.endpointId, message: d.messageId },
        'webhooks: the delivery was taken again or deleted during the attempt',
      );
  }
}
