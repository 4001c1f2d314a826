/**
 * `@dunwall/node`'s copy in memory (the `sdk` row): what one non-active subscriber costs the
 * tenant's process, and what `status()` costs per call. Run with --expose-gc; prints one JSON
 * line.
 *
 * The copy lists BENCH_SDK_COUNT subscribers (default 100,000) through its own code, from
 * pages the service would send (1,000 a page, as JSON text), then parks its long poll. Two
 * mixes, each in a process of its own (BENCH_SDK_MIX):
 * - `plain`: warnings and lockouts with neither a scheduled lockout nor a pay link (an
 *   admin's or an override's);
 * - `dunning`: what Stripe's failures leave: a warning with a scheduled lockout and a pay
 *   link, a lockout with a pay link, in turn (links of 146 characters, as the `dunning` row's).
 * Bytes per subscriber: the heap with the copy, less the heap once it is closed and dropped,
 * once collections have settled; the pages' text is held throughout, so it counts in neither.
 * `status()` per call: hits (held customers) and misses (unknown ones), each over the whole
 * list of ids, with the default clock (Date.now); beside it, the floor: a bare `Map.get` of
 * the same ids. The pay links' own strings are measured apart (`payUrlBytes`).
 */
import { createDunwallWith } from '../packages/node/src/follower.js';
import type { Dunwall } from '../packages/node/src/types.js';
import { benchPayUrl } from './dunning.js';

const COUNT = Number(process.env.BENCH_SDK_COUNT ?? 100_000);
const PAGE = 1000;
const ROUNDS = Number(process.env.BENCH_SDK_ROUNDS ?? 20);
const LOCKOUT_AT = '2030-01-01T00:00:00Z';
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with --expose-gc');
const collect = gc;

type Mix = 'plain' | 'dunning';

async function settled(): Promise<number> {
  for (let i = 0; i < 10; i += 1) {
    collect();
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return process.memoryUsage().heapUsed;
}

/** The list's pages as the service sends them: JSON text. */
function pages(mix: Mix): string[] {
  const out: string[] = [];
  for (let start = 0; start < COUNT; start += PAGE) {
    const data = [];
    for (let i = start; i < Math.min(COUNT, start + PAGE); i += 1) {
      const id = `cus_sdk${String(i).padStart(10, '0')}`;
      const warning = i % 2 === 0;
      data.push(
        mix === 'plain'
          ? { processor_customer_id: id, status: warning ? 'warning' : 'lockout' }
          : {
              processor_customer_id: id,
              status: warning ? 'warning' : 'lockout',
              ...(warning ? { lockout_at: LOCKOUT_AT } : {}),
              pay_url: benchPayUrl(id),
            },
      );
    }
    const next = start + PAGE < COUNT ? `page${start + PAGE}` : null;
    out.push(
      JSON.stringify({
        data,
        entitlements: { powered_by_watermark: false, custom_domain: true, downstream_webhooks: true },
        next,
        feed_cursor: 'AQEB',
      }),
    );
  }
  return out;
}

/** Serves the pages, and a long poll that answers only once the copy leaves. */
function serving(text: string[]): typeof fetch {
  return async (input, init) => {
    const url = new URL(String(input));
    if (url.pathname === '/v1/statuses') {
      const cursor = url.searchParams.get('cursor');
      const index = cursor === null ? 0 : Number(cursor.slice(4)) / PAGE;
      return new Response(text[index] ?? '{}', { status: 200, headers: { 'content-type': 'application/json' } });
    }
    return new Promise<Response>((_resolve, reject) => {
      init?.signal?.addEventListener('abort', () => reject(init.signal?.reason));
    });
  };
}

function timeCalls(dunwall: Dunwall, ids: readonly string[]): { nsPerCall: number; check: number } {
  let check = 0;
  // Warm-up: the function optimized before the clock starts.
  for (const id of ids) check += dunwall.status(id).status.length;
  const started = process.hrtime.bigint();
  for (let r = 0; r < ROUNDS; r += 1) for (const id of ids) check += dunwall.status(id).status.length;
  const ns = Number(process.hrtime.bigint() - started);
  return { nsPerCall: ns / (ROUNDS * ids.length), check };
}

/** Checks the copy answers as listed, then times hits and misses; keeps no reference to it. */
function timeBoth(held: { dunwall: Dunwall | null }, hits: readonly string[], misses: readonly string[]) {
  const dunwall = held.dunwall;
  if (dunwall === null) throw new Error('no copy');
  if (dunwall.status(hits[0] ?? '').status !== 'warning' || dunwall.status(misses[0] ?? '').status !== 'active')
    throw new Error('the copy does not answer as listed');
  const hit = timeCalls(dunwall, hits);
  const miss = timeCalls(dunwall, misses);
  return { hitNs: hit.nsPerCall, missNs: miss.nsPerCall, check: hit.check + miss.check };
}

/** The floor: a bare Map of the same keys (as JSON.parse makes them) to one object, asked the same ids, no clock. */
function bareMap(text: readonly string[], hits: readonly string[], misses: readonly string[]) {
  const map = new Map<string, { status: string }>();
  const value = { status: 'warning' };
  for (const page of text)
    for (const e of (JSON.parse(page) as { data: { processor_customer_id: string }[] }).data)
      map.set(e.processor_customer_id, value);
  const time = (ids: readonly string[]) => {
    let check = 0;
    for (const id of ids) check += map.get(id)?.status.length ?? 6;
    const started = process.hrtime.bigint();
    for (let r = 0; r < ROUNDS; r += 1) for (const id of ids) check += map.get(id)?.status.length ?? 6;
    return { ns: Number(process.hrtime.bigint() - started) / (ROUNDS * ids.length), check };
  };
  const hit = time(hits);
  const miss = time(misses);
  return { mapHitNs: hit.ns, mapMissNs: miss.ns, mapCheck: hit.check + miss.check };
}

async function measure(mix: Mix) {
  const text = pages(mix);
  // Ids as a server gets them: strings of their own, not the copy's keys.
  const hits = Array.from({ length: COUNT }, (_, i) =>
    Buffer.from(`cus_sdk${String(i).padStart(10, '0')}`, 'latin1').toString('latin1'),
  );
  const misses = Array.from({ length: COUNT }, (_, i) =>
    Buffer.from(`cus_unknown${String(i).padStart(10, '0')}`, 'latin1').toString('latin1'),
  );
  const fetch = serving(text);
  await settled();
  const held: { dunwall: Dunwall | null } = {
    dunwall: createDunwallWith(
      { baseUrl: 'http://dunwall.invalid', secretKey: 'sk_live_bench0000000000000000000000000000000000' },
      { fetch },
    ),
  };
  const startedMs = performance.now();
  await held.dunwall?.ready(120_000);
  const listMs = performance.now() - startedMs;
  const withCopy = await settled();
  const timed = timeBoth(held, hits, misses);
  await held.dunwall?.close();
  held.dunwall = null;
  const after = await settled();
  return {
    mix,
    count: COUNT,
    listMs,
    bytesPerSubscriber: (withCopy - after) / COUNT,
    ...timed,
    ...bareMap(text, hits, misses),
  };
}

/** What the pay links' strings alone take (one flat string each, as JSON.parse makes them), per link. */
async function payUrlBytes(): Promise<number> {
  const held: { urls: string[] | null } = { urls: null };
  const before = await settled();
  held.urls = Array.from({ length: COUNT }, (_, i) =>
    Buffer.from(benchPayUrl(`cus_sdk${String(i).padStart(10, '0')}`), 'latin1').toString('latin1'),
  );
  const withUrls = await settled();
  const count = held.urls.length;
  held.urls = null;
  // Less the array's slot of each (8 bytes): the copy holds each link from its answer instead.
  return (withUrls - before) / count - 8;
}

// One mix a process (BENCH_SDK_MIX): a second copy in the same process would be measured
// with the first one's compiled code and shapes, not as a server's one copy runs.
const mix: Mix = process.env.BENCH_SDK_MIX === 'plain' ? 'plain' : 'dunning';
const result = await measure(mix);
const payUrl =
  mix === 'dunning' ? { payUrlLength: benchPayUrl('cus_sdk0000000000').length, payUrlBytes: await payUrlBytes() } : {};
process.stdout.write(`${JSON.stringify({ ...result, ...payUrl })}\n`);
