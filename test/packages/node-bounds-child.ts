/**
 * A tenant's server reduced to `@dunwall/node`'s copy, run by node-bounds.test.ts as a process
 * of its own with a small heap (`--max-old-space-size=256 --expose-gc`), against a stand-in for
 * Dunwall at DUNWALL_URL. It waits for the first error the copy reports (or, for `ask`, for a
 * page's bootstrap), then prints one JSON line: the errors, the heap's growth at its peak and
 * after, and what the copy answers.
 */
import { createDunwall } from '../../packages/node/src/index.js';
import type { PageBootstrap } from '../../packages/node/src/index.js';

const gc = (globalThis as { gc?: () => void }).gc ?? (() => undefined);
const scenario = process.env.SCENARIO ?? '';

gc();
const before = process.memoryUsage();
let peakHeap = before.heapUsed;
let peakRss = before.rss;
const sample = (): void => {
  const now = process.memoryUsage();
  peakHeap = Math.max(peakHeap, now.heapUsed);
  peakRss = Math.max(peakRss, now.rss);
};
setInterval(sample, 5).unref();

const errors: string[] = [];
let reported: () => void = () => undefined;
const firstError = new Promise<void>((resolve) => (reported = resolve));
const dunwall = createDunwall({
  baseUrl: process.env.DUNWALL_URL ?? '',
  secretKey: `sk_test_${'a'.repeat(40)}`,
  onError: (err) => {
    sample();
    errors.push(err.message);
    reported();
  },
});

let bootstrap: PageBootstrap | null = null;
if (scenario === 'ask') {
  await dunwall.ready();
  bootstrap = await dunwall.pageBootstrap('cus_1', 60_000);
} else {
  await firstError;
}
sample();
gc();
const after = process.memoryUsage();
console.log(
  JSON.stringify({
    errors,
    peakHeapGrowth: peakHeap - before.heapUsed,
    heapGrowthAfter: after.heapUsed - before.heapUsed,
    peakRssGrowth: peakRss - before.rss,
    status: dunwall.status('cus_1'),
    bootstrap,
  }),
);
await dunwall.close();
process.exit(0);
