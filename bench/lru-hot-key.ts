/**
 * The lookup cache's map under one hot key (a popular customer, or one client address in
 * the rate limiter): ns per read, one key read over and over in a full map, against keys
 * read in turn. Run: node --import tsx bench/lru-hot-key.ts [module path, default
 * src/lru.ts] to compare two versions side by side.
 */
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';

interface LruLike {
  get(key: string, nowMs: number): unknown;
  set(key: string, value: unknown, expiresAtMs: number): void;
}
type LruClass = new (maxEntries: number) => LruLike;

const modulePath = resolve(process.argv[2] ?? 'src/lru.ts');
const { Lru } = (await import(pathToFileURL(modulePath).href)) as { Lru: LruClass };

const ROUNDS = 5;
function nsPerGet(entries: number, reads: number, keyOf: (i: number) => string): number {
  const lru = new Lru(entries);
  for (let i = 0; i < entries; i += 1) lru.set(`cus_${i}`, i, Number.MAX_SAFE_INTEGER);
  const start = process.hrtime.bigint();
  for (let i = 0; i < reads; i += 1) lru.get(keyOf(i), 0);
  return Number(process.hrtime.bigint() - start) / reads;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

/** A new key into a full map: one eviction each (a client sending a new customer id every time). */
function nsPerInsert(entries: number, inserts: number): number {
  const lru = new Lru(entries);
  for (let i = 0; i < entries; i += 1) {
    lru.set(`cus_${i}`, i, Number.MAX_SAFE_INTEGER);
    lru.get(`cus_${i}`, 0);
  }
  const start = process.hrtime.bigint();
  for (let i = 0; i < inserts; i += 1) lru.set(`new_${i}`, i, Number.MAX_SAFE_INTEGER);
  return Number(process.hrtime.bigint() - start) / inserts;
}

for (const entries of [10_000, 100_000]) {
  const hot = median(Array.from({ length: ROUNDS }, () => nsPerGet(entries, 20_000, () => 'cus_7')));
  const rotating = median(
    Array.from({ length: ROUNDS }, () => nsPerGet(entries, 200_000, (i) => `cus_${i % entries}`)),
  );
  const insert = median(Array.from({ length: ROUNDS }, () => nsPerInsert(entries, 50_000)));
  console.log(
    `${entries.toLocaleString('en')} entries: one hot key ${hot.toFixed(0)} ns/get, keys in turn ${rotating.toFixed(0)} ns/get, ` +
      `a new key into the full map ${insert.toFixed(0)} ns/set (median of ${ROUNDS})`,
  );
}
