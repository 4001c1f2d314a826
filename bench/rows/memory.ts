/** What the read model and the SDK's copy cost in memory: per subscriber, per customer in dunning. */
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { BenchContext, ExtrasResult } from '../context.js';
import { fmtN } from '../context.js';
import { cleanups, log } from '../lifecycle.js';
import { rssMb, stopChild } from '../procs.js';
import { memoryLine, sdkLine } from '../report.js';
import type { MemoryResult, SdkResult } from '../report.js';
import { createDatabase, dropDatabase } from '../seed.js';
import { ROOT } from '../services.js';

/** How long a process idles after its start before its memory is read. */
const MEMORY_SETTLE_MS = 3_000;
/** The sdk row: non-active subscribers in @dunwall/node's copy. */
const SDK_COUNT = 100_000;

export async function memoryRow(ctx: BenchContext): Promise<void> {
  const { startService, workDir, startedAt } = ctx;
  const { serverUrl } = ctx.store;
  // One process on an empty store, then one on the seeded store, each measured once
  // loaded and idle: the difference is what the read model costs.
  let emptyEnv: Record<string, string>;
  if (serverUrl !== null) {
    const emptyName = `dunwall_bench_empty_${startedAt.toISOString().replace(/\D/g, '').slice(0, 17)}`;
    emptyEnv = { DATABASE_URL: await createDatabase(serverUrl, emptyName) };
    cleanups.push(() => dropDatabase(serverUrl, emptyName));
  } else {
    const emptyDir = join(workDir, 'empty');
    mkdirSync(emptyDir, { recursive: true, mode: 0o700 });
    emptyEnv = { DUNWALL_DATA_DIR: emptyDir, DUNWALL_DEMO: '0' };
  }
  const settled = async (name: string, env: Record<string, string>) => {
    const started = performance.now();
    const server = await startService(name, { env, workers: 1 });
    const readyS = (performance.now() - started) / 1000;
    try {
      await new Promise((resolve) => setTimeout(resolve, MEMORY_SETTLE_MS));
      const text = await (await fetch(`${server.url}/metrics`)).text();
      const metric = (m: string) => Number(new RegExp(`^${m} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
      return {
        rssMb: rssMb(server.child.pid),
        readyS,
        loadS: metric('dunwall_readmodel_last_load_seconds'),
        indexBytes: metric('dunwall_readmodel_index_bytes'),
        subscribers: metric('dunwall_readmodel_subscribers'),
      };
    } finally {
      await stopChild(server.child);
    }
  };
  const empty = await settled('memory-empty', emptyEnv);
  const full = await settled('memory-full', {});
  const memory: MemoryResult = {
    subscribers: full.subscribers,
    emptyRssMb: empty.rssMb,
    fullRssMb: full.rssMb,
    bytesPerSubscriber: full.subscribers > 0 ? ((full.rssMb - empty.rssMb) * 2 ** 20) / full.subscribers : null,
    indexBytesPerSubscriber: full.subscribers > 0 ? full.indexBytes / full.subscribers : null,
    loadSeconds: full.loadS,
    readySeconds: full.readyS,
  };
  ctx.findings.memory = memory;
  log(memoryLine(memory));
}

export async function extrasRow(ctx: BenchContext): Promise<void> {
  // In a process of its own, with collections it can force: what one customer in dunning adds.
  const res = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', join(ROOT, 'bench', 'extras-memory.ts')], {
    cwd: ROOT,
    encoding: 'utf8',
    timeout: 300_000,
  });
  if (res.status !== 0) throw new Error(`extras-memory.ts: ${res.stderr.trim().split('\n').slice(-3).join(' ')}`);
  const extras = JSON.parse(res.stdout.trim()) as ExtrasResult;
  ctx.findings.extras = extras;
  log(
    `extras: ${fmtN(extras.count)} customers in dunning, ${extras.bytesPerCustomer.toFixed(1)} bytes each with a ${extras.payUrlLength}-character pay link (target at most 300)`,
  );
}

export async function sdkRow(ctx: BenchContext): Promise<void> {
  // Each mix in a process of its own, with collections it can force.
  const run = (mix: 'plain' | 'dunning') => {
    const res = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', join(ROOT, 'bench', 'sdk.ts')], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 300_000,
      env: { ...process.env, BENCH_SDK_MIX: mix, BENCH_SDK_COUNT: String(SDK_COUNT) },
    });
    if (res.status !== 0) throw new Error(`sdk.ts (${mix}): ${res.stderr.trim().split('\n').slice(-3).join(' ')}`);
    return JSON.parse(res.stdout.trim()) as SdkResult['plain'] & { payUrlLength?: number; payUrlBytes?: number };
  };
  const plain = run('plain');
  const dunning = run('dunning');
  const sdk: SdkResult = {
    count: SDK_COUNT,
    payUrlLength: dunning.payUrlLength ?? 0,
    payUrlBytes: dunning.payUrlBytes ?? 0,
    plain,
    dunning,
  };
  ctx.findings.sdk = sdk;
  log(sdkLine(sdk));
}
