/**
 * The read model's subscriber index: bytes a subscriber (its arrays, and RSS with 1,000,000
 * minus RSS with none, in this process) and ns a read, for a known, an unknown and one hot
 * customer. Run: node --expose-gc --import tsx bench/subscriber-index.ts [subscribers]
 * Keys are made as the load goes, as rows from a snapshot arrive: RSS counts their garbage
 * only as far as the collector leaves it.
 */
import { SubscriberIndex } from '../src/readmodel/subscriber-index.js';

const n = Number(process.argv[2] ?? 1_000_000);
const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});
const rss = () => {
  gc();
  return process.memoryUsage().rss;
};

const before = rss();
// Sized for the snapshot up front, as a load that counts its rows first would: no doubling
// leaves freed arrays behind in RSS.
const index = new SubscriberIndex(n);
const statuses = ['active', 'warning', 'lockout'] as const;
const start = process.hrtime.bigint();
for (let i = 0; i < n; i += 1) index.set(1 + (i % 1000), `cus_b${1 + (i % 1000)}_${i}`, statuses[i % 3] ?? 'active');
const loadMs = Number(process.hrtime.bigint() - start) / 1e6;
const after = rss();

function nsPerRead(reads: number, keyOf: (i: number) => [number, string]): number {
  const keys = Array.from({ length: 4096 }, (_, i) => keyOf(i));
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < reads; i += 1) {
    const [t, c] = keys[i & 4095] ?? [0, ''];
    index.get(t, c);
  }
  return Number(process.hrtime.bigint() - t0) / reads;
}
const median = (f: () => number) => {
  const v = Array.from({ length: 5 }, f).sort((a, b) => a - b);
  return v[2] ?? NaN;
};
const known = median(() =>
  nsPerRead(1_000_000, (i) => {
    const k = (i * 7919) % n;
    return [1 + (k % 1000), `cus_b${1 + (k % 1000)}_${k}`];
  }),
);
const unknown = median(() => nsPerRead(1_000_000, (i) => [1 + (i % 1000), `cus_nobody_${i}`]));
const hot = median(() => nsPerRead(1_000_000, () => [7, 'cus_b7_6']));
console.log(
  `${n.toLocaleString('en')} subscribers: arrays ${(index.byteLength / n).toFixed(1)} B each, RSS +${((after - before) / n).toFixed(1)} B each (${((after - before) / 1e6).toFixed(1)} MB), built in ${loadMs.toFixed(0)} ms`,
);
console.log(
  `read: known ${known.toFixed(0)} ns, unknown ${unknown.toFixed(0)} ns, one hot customer ${hot.toFixed(0)} ns (median of 5 x 1,000,000)`,
);
