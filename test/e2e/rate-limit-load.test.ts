import { Agent, request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RateLimits } from '../../src/runtime/config.js';
import { availableEngines } from '../helpers/engines.js';
import { harness } from '../helpers/harness.js';
import type { CreatedTenant, Harness } from '../helpers/harness.js';

const [embedded] = await availableEngines();

const LIMITS: RateLimits = { lookupPerIp: 300, lookupPerTenant: 1_000_000, failuresPerIp: 20, adminPerIp: 60 };
const FLOOD_REQUESTS = 2_000;
const FLOOD_CONCURRENCY = 16;
const LEGIT_CLIENTS = 20;
const LEGIT_REQUESTS_EACH = 20;

interface Tally {
  byStatus: Map<number, number>;
  wrongBodies: number;
  errors: number;
}

function tally(): Tally {
  return { byStatus: new Map(), wrongBodies: 0, errors: 0 };
}

function get(agent: Agent, port: number, path: string, key: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, path, agent, headers: { authorization: `Bearer ${key}` }, timeout: 10_000 },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

/**
 * `count` requests from `from` (an address of the loopback range, so that each client is
 * its own peer), `concurrency` at a time over kept-alive connections.
 */
async function run(
  port: number,
  from: string,
  count: number,
  concurrency: number,
  path: string,
  key: string,
  expectBody: string,
): Promise<Tally> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency, localAddress: from });
  const t = tally();
  let sent = 0;
  const worker = async () => {
    while (sent < count) {
      sent += 1;
      try {
        const { status, body } = await get(agent, port, path, key);
        t.byStatus.set(status, (t.byStatus.get(status) ?? 0) + 1);
        if (status === 200 && body !== expectBody) t.wrongBodies += 1;
      } catch {
        t.errors += 1;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  agent.destroy();
  return t;
}

function describeTally(t: Tally): string {
  return (
    [...t.byStatus.entries()]
      .sort(([a], [b]) => a - b)
      .map(([s, n]) => `${s}: ${n}`)
      .join(', ') + (t.errors ? `, errors: ${t.errors}` : '')
  );
}

function count(t: Tally, predicate: (status: number) => boolean): number {
  let n = 0;
  for (const [status, k] of t.byStatus) if (predicate(status)) n += k;
  return n;
}

describe('rate limits under load on loopback', () => {
  let h: Harness;
  let acme: CreatedTenant;
  let port = 0;

  beforeAll(async () => {
    if (!embedded) throw new Error('no engine');
    h = await harness(embedded, { rateLimits: LIMITS });
    acme = await h.createTenant('acme');
    await h.setSubscriber('acme', 'cus_legit', 'warning');
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    const address = h.app.server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    port = address.port;
  });
  afterAll(() => h.close());

  it('holds each flooding address to its quota while every legitimate client is answered', async () => {
    const path = '/api/subscriber-status/acme?processor_customer_id=cus_legit';
    const expected = (await h.lookup('acme', { key: acme.publishable_key, customerId: 'cus_legit' })).body;
    expect(JSON.parse(expected)).toMatchObject({ status: 'warning' });

    const [flood, guesses, ...legit] = await Promise.all([
      run(port, '127.0.0.2', FLOOD_REQUESTS, FLOOD_CONCURRENCY, path, acme.publishable_key, expected),
      run(port, '127.0.0.3', FLOOD_REQUESTS, FLOOD_CONCURRENCY, path, 'pk_guessguessguessguessguessguess', expected),
      ...Array.from({ length: LEGIT_CLIENTS }, (_, i) =>
        run(port, `127.0.1.${i + 1}`, LEGIT_REQUESTS_EACH, 1, path, acme.publishable_key, expected),
      ),
    ]);
    if (!flood || !guesses) throw new Error('missing tallies');

    const all = [flood, guesses, ...legit];
    const tried = all.reduce((n, t) => n + count(t, () => true) + t.errors, 0);
    const fivexx = all.reduce((n, t) => n + count(t, (s) => s >= 500), 0);
    const legitOk = legit.reduce((n, t) => n + count(t, (s) => s === 200), 0);
    console.log(
      `rate limit load: ${tried} requests tried, ${fivexx} 5xx; ` +
        `flood (valid key) ${describeTally(flood)}; guessing (wrong key) ${describeTally(guesses)}; ` +
        `${LEGIT_CLIENTS} legitimate clients ${legitOk}/${LEGIT_CLIENTS * LEGIT_REQUESTS_EACH} answered 200`,
    );

    expect(fivexx).toBe(0);
    expect(all.reduce((n, t) => n + t.errors + t.wrongBodies, 0)).toBe(0);
    // The flood gets exactly its quota, then only refusals.
    expect(flood.byStatus.get(200)).toBe(LIMITS.lookupPerIp);
    expect(flood.byStatus.get(429)).toBe(FLOOD_REQUESTS - LIMITS.lookupPerIp);
    // Guessing gets exactly the failure quota of answers, concurrent as it is, then refusals.
    expect(guesses.byStatus.get(401)).toBe(LIMITS.failuresPerIp);
    expect(guesses.byStatus.get(429)).toBe(FLOOD_REQUESTS - LIMITS.failuresPerIp);
    // Every legitimate request was answered, and right.
    expect(legitOk).toBe(LEGIT_CLIENTS * LEGIT_REQUESTS_EACH);
  });
});
