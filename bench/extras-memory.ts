/**
 * What a customer in dunning adds to the read model: its pay link and scheduled lockout,
 * held beside the subscriber index (src/readmodel/subscriber-extras.ts). Run with
 * --expose-gc; prints one JSON line: what the heap and the typed arrays' buffers give back,
 * once collections have settled, when the table and the pay links' strings (one flat string
 * each, as the load makes them) are dropped, per customer.
 */
import { SubscriberExtras } from '../src/readmodel/subscriber-extras.js';
import { benchPayUrl } from './dunning.js';

const COUNT = Number(process.env.BENCH_EXTRAS ?? 200_000);
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with --expose-gc');
const collect = gc;

const used = (): number => {
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
};
async function settled(): Promise<number> {
  for (let i = 0; i < 10; i += 1) {
    collect();
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return used();
}

async function main(): Promise<void> {
  const ids = Array.from({ length: COUNT }, (_, i) => `cus_b${1 + (i % 1000)}_${i}`);
  // Held through an object, so that dropping each is a write the collector sees.
  const held: { urls: string[] | null; extras: SubscriberExtras | null } = {
    urls: ids.map((id) => Buffer.from(benchPayUrl(id), 'latin1').toString('latin1')),
    extras: new SubscriberExtras(),
  };
  for (let i = 0; i < COUNT; i += 1)
    held.extras?.set(1 + (i % 1000), ids[i] ?? '', { lockoutAtS: 1_800_000_000 + i, payUrl: held.urls?.[i] ?? null });
  const size = held.extras?.size ?? 0;
  const withAll = await settled();
  held.extras = null;
  const withUrls = await settled();
  held.urls = null;
  const without = await settled();
  // The script's array held each link too: a reference of 8 bytes that the service does not have.
  const total = (withAll - without) / COUNT - 8;
  process.stdout.write(
    `${JSON.stringify({ count: size, payUrlLength: benchPayUrl('cus_b1_0').length, tableBytesPerCustomer: (withAll - withUrls) / COUNT, bytesPerCustomer: total })}\n`,
  );
}

await main();
