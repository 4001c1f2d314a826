import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { availableEngines, schemaScopedUrl } from '../helpers/engines.js';
import { Receiver } from '../helpers/receiver.js';
import { REQUEST_TIMEOUT_MS, adminCall, killAllServices, startServiceProcess } from '../helpers/service-process.js';

/**
 * Downstream webhooks from real service processes on PostgreSQL: one killed with SIGKILL in
 * the middle of a burst of status changes, and two delivering from one database.
 */

const engines = await availableEngines();
const TOKEN = 'downstream-crash-admin-token-0123456789abcdef';
const CUSTOMERS = 30;
const CHANGES_PER_CUSTOMER = 6;
const CONCURRENCY = 16;
const STATUSES = ['warning', 'lockout', 'active'] as const;
const DELIVERED_TIMEOUT_MS = 60_000;
const POLL_MS = 50;

afterAll(killAllServices);

async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

const startService = (databaseUrl: string) =>
  startServiceProcess(databaseUrl, TOKEN, {
    DUNWALL_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true',
    DUNWALL_WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
    // A short attempt timeout makes a short lease: a killed instance's deliveries are taken again within seconds.
    DUNWALL_WEBHOOK_TIMEOUT_MS: '1000',
  });
const admin = (base: string, method: string, path: string, body?: unknown) =>
  adminCall(base, TOKEN, method, path, body);

async function setUp(base: string, receiver: Receiver): Promise<string> {
  expect((await admin(base, 'POST', '/tenants', { slug: 'downstream', tier: 'scale' })).status).toBe(201);
  const res = await admin(base, 'POST', '/tenants/downstream/webhook-endpoints', { url: receiver.url() });
  expect(res.status).toBe(201);
  return ((await res.json()) as { secret: string }).secret;
}

/** Each customer walks warning, lockout, active, ...: every change is a change. */
function changes(prefix: string): { customer: string; status: string }[] {
  const out: { customer: string; status: string }[] = [];
  for (let step = 0; step < CHANGES_PER_CUSTOMER; step += 1) {
    for (let c = 0; c < CUSTOMERS; c += 1)
      out.push({ customer: `cus_${prefix}${c}`, status: STATUSES[step % STATUSES.length] as string });
  }
  return out;
}

/**
 * Sends the changes with `CONCURRENCY` in flight, one customer's in order (a customer is
 * never changed twice at once); `bases` are used in turn. Stops starting new ones once
 * `stopAfter` answers true.
 */
async function burst(
  bases: readonly string[],
  list: readonly { customer: string; status: string }[],
  stopAfter?: (acked: number) => boolean,
): Promise<number> {
  const byCustomer = new Map<string, string[]>();
  for (const c of list) byCustomer.set(c.customer, [...(byCustomer.get(c.customer) ?? []), c.status]);
  const queue = [...byCustomer];
  let acked = 0;
  let stopped = false;
  let turn = 0;
  const worker = async () => {
    for (;;) {
      const next = queue.shift();
      if (next === undefined || stopped) return;
      const [customer, statuses] = next;
      for (const status of statuses) {
        if (stopped) return;
        const base = bases[turn++ % bases.length] as string;
        const res = await admin(base, 'PUT', `/tenants/downstream/subscribers/${customer}`, {
          status,
          reason: `step_${status}`,
        }).catch(() => null);
        if (res?.status !== 200) return;
        acked += 1;
        if (stopAfter?.(acked) === true) stopped = true;
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return acked;
}

async function metric(base: string, name: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) })).text();
  const line = text.split('\n').find((l) => l.startsWith(name));
  return line === undefined ? Number.NaN : Number(line.split(' ').at(-1));
}

describe.each(engines.filter((e) => e.name === 'postgres'))(
  'downstream webhooks from service processes ($name)',
  () => {
    it('delivers every committed change after a kill -9 mid-burst, and a duplicate carries the same webhook-id', async () => {
      const scoped = await schemaScopedUrl('dunwall_downstream');
      const db = new pg.Client({ connectionString: scoped.url });
      await db.connect();
      const receiver = await Receiver.start();
      try {
        const first = await startService(scoped.url);
        const secret = await setUp(first.base, receiver);
        const list = changes('k');
        const ackedBeforeKill = await burst([first.base], list, (acked) => {
          if (acked < list.length / 2) return false;
          first.child.kill('SIGKILL');
          return true;
        });
        expect(await first.exited).toEqual({ code: null, signal: 'SIGKILL' });
        expect(ackedBeforeKill).toBeGreaterThanOrEqual(list.length / 2);

        // No change without its message, no message without its change: both in one transaction.
        const { rows: committed } = await db.query<{
          customer: string;
          changes: number;
          events: number;
          max_seq: number | null;
        }>(
          `SELECT h.processor_customer_id AS customer, count(*)::int AS changes,
           (SELECT count(*)::int FROM webhook_events e WHERE e.processor_customer_id = h.processor_customer_id) AS events,
           (SELECT max(sequence)::int FROM webhook_events e WHERE e.processor_customer_id = h.processor_customer_id) AS max_seq
         FROM subscriber_history h WHERE h.effect IN ('changed', 'removed') GROUP BY 1 ORDER BY 1`,
        );
        expect(committed.length).toBeGreaterThan(0);
        for (const c of committed)
          expect([c.customer, c.events, c.max_seq]).toEqual([c.customer, c.changes, c.changes]);
        const receivedAtKill = receiver.received.length;

        // A new instance takes over the deliveries the killed one had not finished, once their leases end.
        const second = await startService(scoped.url);
        const { rows: events } = await db.query<{ uid: string; payload: string }>(
          'SELECT uid, payload FROM webhook_events',
        );
        // Every delivery recorded as done: those the killed instance was sending are sent again once their leases end.
        await until(
          'every delivery to be recorded',
          async () =>
            (
              await db.query<{ n: number }>(
                "SELECT count(*)::int AS n FROM webhook_deliveries WHERE state <> 'delivered'",
              )
            ).rows[0]?.n === 0,
          DELIVERED_TIMEOUT_MS,
        );

        const payloads = new Map(events.map((e) => [e.uid, e.payload]));
        for (const r of receiver.received) {
          const id = String(r.headers['webhook-id']);
          // Every message received is one committed, byte for byte, and verifies.
          expect(payloads.get(id)).toBe(r.body);
          new Webhook(secret).verify(r.body, r.headers as Record<string, string>);
        }
        expect(new Set(receiver.received.map((r) => r.headers['webhook-id']))).toEqual(new Set(payloads.keys()));
        const duplicates = receiver.received.length - payloads.size;
        // Each customer's messages carry the sequence 1..n.
        const sequences = new Map<string, number[]>();
        for (const e of events) {
          const p = JSON.parse(e.payload) as { data: { processor_customer_id: string; sequence: number } };
          sequences.set(p.data.processor_customer_id, [
            ...(sequences.get(p.data.processor_customer_id) ?? []),
            p.data.sequence,
          ]);
        }
        for (const [, seq] of sequences) expect([...seq].sort((a, b) => a - b)).toEqual(seq.map((_, i) => i + 1));
        expect(await metric(second.base, 'dunwall_downstream_webhook_oldest_pending_seconds')).toBe(0);
        process.stdout.write(
          `kill -9: ${events.length} messages committed, ${receivedAtKill} received before the kill, ${duplicates} duplicates after the restart\n`,
        );
        second.child.kill('SIGKILL');
        await second.exited;
      } finally {
        await receiver.close();
        await db.end();
        await scoped.drop();
      }
    }, 120_000);

    it('two instances on one database deliver every message once, never more at once than the endpoint allows', async () => {
      const scoped = await schemaScopedUrl('dunwall_downstream_two');
      const receiver = await Receiver.start();
      // A receiver that takes its time: attempts overlap, and both instances claim.
      receiver.delayMs = 20;
      try {
        const [a, b] = await Promise.all([startService(scoped.url), startService(scoped.url)]);
        if (!a || !b) throw new Error('two services');
        await setUp(a.base, receiver);
        const list = changes('t');
        expect(await burst([a.base, b.base], list)).toBe(list.length);
        await until('every message to arrive', () => receiver.received.length >= list.length, DELIVERED_TIMEOUT_MS);
        const ids = receiver.received.map((r) => String(r.headers['webhook-id']));
        expect(new Set(ids).size).toBe(list.length);
        expect(ids.length).toBe(list.length);
        // Each message was delivered by one instance, once; which one took it is their race. An
        // attempt is counted once recorded, just after the receiver answered it.
        const deliveredBy = () =>
          Promise.all(
            [a, b].map((s) => metric(s.base, 'dunwall_downstream_webhook_deliveries_total{outcome="delivered"}')),
          );
        await until(
          'every attempt to be recorded',
          async () => (await deliveredBy()).reduce((x, y) => x + y, 0) >= list.length,
          DELIVERED_TIMEOUT_MS,
        );
        const delivered = await deliveredBy();
        expect((delivered[0] ?? 0) + (delivered[1] ?? 0)).toBe(list.length);
        // The endpoint's cap (DUNWALL_WEBHOOK_CONCURRENCY, 4) holds across the two.
        expect(receiver.maxOpen).toBeLessThanOrEqual(4);
        expect(receiver.maxOpen).toBeGreaterThan(1);
        process.stdout.write(
          `two instances: ${delivered.join(' + ')} deliveries, at most ${receiver.maxOpen} at once\n`,
        );
        expect(receiver.received[0]?.headers['user-agent']).toBe('Dunwall-Webhooks/1');
      } finally {
        await receiver.close();
        await scoped.drop();
      }
    }, 120_000);
  },
);
