import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { availableEngines, schemaScopedUrl } from '../helpers/engines.js';
import { REQUEST_TIMEOUT_MS, adminCall, killAllServices, startServiceProcess } from '../helpers/service-process.js';
import {
  BASIL_API,
  LEGACY_API,
  charge,
  customer,
  event,
  invoice,
  signed,
  subscription,
} from '../helpers/stripe-fixtures.js';
import type { ApiShape, StripeEventFixture } from '../helpers/stripe-fixtures.js';

const engines = await availableEngines();

const TOKEN = 'crash-test-admin-token-0123456789abcdefghijkl';
const CRASH_SECRET = 'whsec_crash_run_0123456789abcdefghijklmnop';
const CLEAN_SECRET = 'whsec_clean_run_0123456789abcdefghijklmnop';
const CUSTOMERS = 32;
const EVENTS_PER_CUSTOMER = 10;
/** More requests in flight than the service's connection pool holds, so that the kill lands mid-transaction too. */
const CONCURRENCY = 24;
/** Events of one customer fall in this many seconds, so that same-second ties (and their ranks) occur. */
const CREATED_SPREAD_S = 8;
/** Stripe redelivers an event it already got a 2xx for now and then; so does this test, one in this many. */
const REDELIVER_ACKED_ONE_IN = 4;

/** A seeded generator: the same mix of events on every run, only the ids differ. */
function mulberry32(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

const KINDS = [
  ['soft_charge', 3],
  ['hard_charge', 2],
  ['invoice_retrying', 2],
  ['invoice_exhausted', 1],
  ['paid', 3],
  ['past_due', 1],
  ['unpaid', 1],
  ['reactivated', 1],
  ['deleted', 1],
] as const;
type Kind = (typeof KINDS)[number][0];

function pick(random: () => number): Kind {
  const total = KINDS.reduce((sum, [, w]) => sum + w, 0);
  let r = random() * total;
  for (const [kind, weight] of KINDS) {
    r -= weight;
    if (r < 0) return kind;
  }
  return 'paid';
}

function build(kind: Kind, cus: string, created: number, random: () => number): StripeEventFixture {
  const api: ApiShape = random() < 0.5 ? LEGACY_API : BASIL_API;
  const o = { created, api };
  switch (kind) {
    case 'soft_charge':
      return event(
        'charge.failed',
        charge(cus, { outcome_reason: 'insufficient_funds', failure_code: 'card_declined' }, api),
        o,
      );
    case 'hard_charge':
      return event('charge.failed', charge(cus, { outcome_reason: 'stolen_card' }, api), o);
    case 'invoice_retrying':
      return event('invoice.payment_failed', invoice(cus, { next_payment_attempt: created + 86_400, api }), o);
    case 'invoice_exhausted':
      return event('invoice.payment_failed', invoice(cus, { next_payment_attempt: null, api }), o);
    case 'paid':
      return event('invoice.paid', invoice(cus, { api }), o);
    case 'past_due':
      return event('customer.subscription.updated', subscription(cus, 'past_due'), {
        ...o,
        previous: { status: 'active' },
      });
    case 'unpaid':
      return event('customer.subscription.updated', subscription(cus, 'unpaid'), {
        ...o,
        previous: { status: 'past_due' },
      });
    case 'reactivated':
      return event('customer.subscription.updated', subscription(cus, 'active'), {
        ...o,
        previous: { status: 'past_due' },
      });
    case 'deleted':
      return event('customer.deleted', customer(cus), o);
  }
}

function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i -= 1) {
    const j = Math.floor(random() * (i + 1));
    const a = out[i] as T;
    out[i] = out[j] as T;
    out[j] = a;
  }
  return out;
}

afterAll(killAllServices);

/** The final states are read through the admin API, where unknown customers answer 404: no failure quota. */
const startService = (databaseUrl: string) =>
  startServiceProcess(databaseUrl, TOKEN, { DUNWALL_RATE_LIMIT_FAILURES_PER_IP: '0' });
const admin = (base: string, method: string, path: string, body?: unknown) =>
  adminCall(base, TOKEN, method, path, body);

async function createTenant(base: string, slug: string, secret: string): Promise<void> {
  expect((await admin(base, 'POST', '/tenants', { slug })).status).toBe(201);
  expect((await admin(base, 'PATCH', `/tenants/${slug}`, { stripe_webhook_secret: secret })).status).toBe(200);
}

/** What Stripe learns from one delivery: a complete 2xx answer acknowledges; anything else does not. */
type Delivery = { acked: true; outcome: string } | { acked: false; why: string };

async function deliver(base: string, slug: string, fixture: StripeEventFixture, secret: string): Promise<Delivery> {
  // Signed at each attempt, as Stripe signs each retry anew.
  const { payload, signature } = signed(fixture, secret, Math.floor(Date.now() / 1000));
  try {
    const res = await fetch(`${base}/webhooks/stripe/${slug}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json; charset=utf-8', 'stripe-signature': signature },
      body: payload,
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const text = await res.text();
    if (res.status < 200 || res.status > 299) return { acked: false, why: `${res.status} ${text.slice(0, 200)}` };
    return { acked: true, outcome: (JSON.parse(text) as { outcome: string }).outcome };
  } catch (err) {
    return { acked: false, why: (err as Error).message };
  }
}

/**
 * Delivers `events` with `CONCURRENCY` requests in flight. `stopAfter`, when set, is called
 * after each acknowledgement; once it answers true no further delivery starts, and those
 * in flight end as they end.
 */
async function burst(
  base: string,
  slug: string,
  secret: string,
  events: readonly StripeEventFixture[],
  stopAfter?: (acked: number, inFlight: number) => boolean,
): Promise<Map<string, Delivery>> {
  const results = new Map<string, Delivery>();
  let next = 0;
  let acked = 0;
  let inFlight = 0;
  let stopped = false;
  const worker = async () => {
    while (!stopped) {
      const fixture = events[next];
      if (fixture === undefined) return;
      next += 1;
      inFlight += 1;
      const result = await deliver(base, slug, fixture, secret);
      inFlight -= 1;
      results.set(fixture.id, result);
      if (result.acked) {
        acked += 1;
        if (!stopped && stopAfter?.(acked, inFlight) === true) stopped = true;
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return results;
}

/** A subscriber's final state as the admin API shows it: status and reason, or unknown. */
async function finalState(base: string, slug: string, customerId: string): Promise<string> {
  const res = await admin(base, 'GET', `/tenants/${slug}/subscribers/${customerId}`);
  if (res.status === 404) return 'unknown';
  if (res.status !== 200) throw new Error(`subscriber ${slug}/${customerId}: ${res.status} ${await res.text()}`);
  const body = (await res.json()) as { status: string; reason: string };
  return `${body.status}/${body.reason}`;
}

describe.each(engines.filter((e) => e.name === 'postgres'))('kill -9 during a Stripe webhook burst ($name)', () => {
  it('loses no acknowledged event and applies none twice', async () => {
    const random = mulberry32(0x5eed);
    const baseS = Math.floor(Date.now() / 1000) - 86_400;
    const customerIds = Array.from({ length: CUSTOMERS }, (_, i) => `cus_crash${i}`);
    const events = customerIds.flatMap((cus) =>
      Array.from({ length: EVENTS_PER_CUSTOMER }, () =>
        build(pick(random), cus, baseS + Math.floor(random() * CREATED_SPREAD_S), random),
      ),
    );
    const order = shuffled(events, random);
    const eventIds = events.map((e) => e.id);

    const scoped = await schemaScopedUrl('dunwall_crash');
    const db = new pg.Client({ connectionString: scoped.url });
    await db.connect();
    try {
      const first = await startService(scoped.url);
      await createTenant(first.base, 'crashed', CRASH_SECRET);

      let inFlightAtKill = 0;
      const firstRun = await burst(first.base, 'crashed', CRASH_SECRET, order, (acked, inFlight) => {
        if (acked < events.length / 2) return false;
        inFlightAtKill = inFlight;
        first.child.kill('SIGKILL');
        return true;
      });
      // Again, for a burst that ended short of the threshold: a service acknowledging nothing fails below, not hangs here.
      first.child.kill('SIGKILL');
      expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
      const ackedBeforeKill = eventIds.filter((id) => firstRun.get(id)?.acked === true);
      const unacked = eventIds.filter((id) => firstRun.get(id)?.acked !== true);
      // The kill must land inside the burst, or this proves nothing.
      expect(ackedBeforeKill.length).toBeGreaterThan(0);
      expect(unacked.length).toBeGreaterThan(0);

      const storedBeforeRestart = new Set(
        (
          await db.query<{ event_id: string }>(
            "SELECT e.event_id FROM stripe_events e JOIN tenants t ON t.id = e.tenant_id WHERE t.slug = 'crashed'",
          )
        ).rows.map((r) => r.event_id),
      );
      const lost = ackedBeforeKill.filter((id) => !storedBeforeRestart.has(id));
      const committedUnacked = unacked.filter((id) => storedBeforeRestart.has(id)).length;

      const second = await startService(scoped.url);
      const redeliverIds = new Set([...unacked, ...ackedBeforeKill.filter((_, i) => i % REDELIVER_ACKED_ONE_IN === 0)]);
      const redelivery = shuffled(
        order.filter((e) => redeliverIds.has(e.id)),
        random,
      );
      const retried = await burst(second.base, 'crashed', CRASH_SECRET, redelivery);
      const refused = redelivery
        .filter((e) => retried.get(e.id)?.acked !== true)
        .map((e) => ({ id: e.id, result: retried.get(e.id) }));
      // An event acknowledged once is stored: its redelivery must change nothing.
      const reapplied = ackedBeforeKill.filter((id) => {
        const r = retried.get(id);
        return r?.acked === true && r.outcome !== 'duplicate';
      });

      await createTenant(second.base, 'clean', CLEAN_SECRET);
      const cleanRun = await burst(second.base, 'clean', CLEAN_SECRET, shuffled(events, random));
      const cleanRefused = eventIds.filter((id) => cleanRun.get(id)?.acked !== true);

      const stored = await db.query<{ slug: string; n: number }>(
        'SELECT t.slug, count(*)::int AS n FROM stripe_events e JOIN tenants t ON t.id = e.tenant_id GROUP BY t.slug ORDER BY t.slug',
      );
      // stripe_events holds an event once by its key; what an event applied is in the history.
      const twice = await db.query<{ slug: string; event_id: string; n: number }>(
        `SELECT t.slug, h.event_id, count(*)::int AS n
           FROM subscriber_history h JOIN tenants t ON t.id = h.tenant_id
           WHERE h.event_id IS NOT NULL GROUP BY t.slug, h.event_id HAVING count(*) > 1`,
      );

      const mismatches: { customer: string; crashed: string; clean: string }[] = [];
      const finals = new Set<string>();
      for (const cus of customerIds) {
        const [crashed, clean] = await Promise.all([
          finalState(second.base, 'crashed', cus),
          finalState(second.base, 'clean', cus),
        ]);
        finals.add(clean);
        if (crashed !== clean) mismatches.push({ customer: cus, crashed, clean });
      }

      // The figures first, so that a failing run says how it failed.
      console.log(
        `crash test: ${events.length} events sent, ${ackedBeforeKill.length} acknowledged before kill -9, ${redelivery.length} redelivered, ` +
          `${lost.length} lost, ${twice.rows.length} applied twice, ${mismatches.length} mismatches ` +
          `(${firstRun.size} attempted before the kill, ${inFlightAtKill} of them in flight at it, ${committedUnacked} stored but unacknowledged, ` +
          `${reapplied.length} acknowledged then applied again, ${finals.size} distinct final states)`,
      );
      // The kill must land mid-burst, with requests (and so transactions) in flight.
      expect(inFlightAtKill).toBeGreaterThan(0);
      expect(lost).toEqual([]);
      expect(twice.rows).toEqual([]);
      expect(reapplied).toEqual([]);
      expect(mismatches).toEqual([]);
      expect(refused).toEqual([]);
      expect(cleanRefused).toEqual([]);
      expect(stored.rows).toEqual([
        { slug: 'clean', n: events.length },
        { slug: 'crashed', n: events.length },
      ]);
      // Final states that all agree but are all alike would not tell an order-dependent store apart.
      expect(finals.size).toBeGreaterThan(2);
    } finally {
      await db.end();
      await killAllServices();
      await scoped.drop();
    }
  });
});
