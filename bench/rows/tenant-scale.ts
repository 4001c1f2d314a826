/** One tenant of a million subscribers on PostgreSQL: a policy change gone through, its analytics asked. */
import type { BenchContext } from '../context.js';
import { fmtN } from '../context.js';
import { analyticsLines, measureAnalytics, seedAnalytics } from '../analytics.js';
import { POLICY_TENANT, policyProgress, seedPolicyTenant } from '../dunning.js';
import { log, note, stopping } from '../lifecycle.js';
import { runLoad } from '../load.js';
import { stopChild } from '../procs.js';

/** The analytics row: timed calls of each query, after 2 untimed ones. */
const ANALYTICS_CALLS = 20;

export async function policyRow(ctx: BenchContext): Promise<void> {
  const { opts, startService, adminToken, workDir, generator } = ctx;
  const { files } = ctx.questions;
  const { target } = ctx.store;
  // A tenant of a million subscribers goes from gate to banner_only while the hot list is
  // asked: how long until every one of its gated customers is answered and recorded again,
  // and what the lookups got meanwhile.
  const seeded = await seedPolicyTenant(target);
  log(`policy: tenant ${POLICY_TENANT}, ${fmtN(seeded.subscribers)} subscribers, ${fmtN(seeded.gated)} gated`);
  const server = await startService('service-policy');
  try {
    const durationS = Math.max(opts.durationS, 30);
    const load = runLoad(generator, {
      baseUrl: server.url,
      linesFile: files.hot,
      connections: opts.connections,
      workDir,
      durationS,
    });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const startedMs = performance.now();
    const patched = await fetch(`${server.url}/admin/v1/tenants/${POLICY_TENANT}`, {
      method: 'PATCH',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ policy: { enforcement: 'banner_only' } }),
    });
    if (patched.status !== 200) throw new Error(`policy: PATCH answered ${patched.status}`);
    let progress = await policyProgress(target);
    while ((progress.sweeping || progress.lockout > 0) && performance.now() - startedMs < 900_000 && !stopping()) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      progress = await policyProgress(target);
    }
    const seconds = (performance.now() - startedMs) / 1000;
    if (progress.lockout > 0)
      note(`policy: ${fmtN(progress.lockout)} subscribers still recorded lockout after ${seconds.toFixed(0)} s`);
    const during = await load;
    ctx.findings.policy = { subscribers: seeded.subscribers, gated: seeded.gated, seconds, during };
    log(
      `policy: ${fmtN(seeded.gated)} of ${fmtN(seeded.subscribers)} subscribers answered and recorded again in ${seconds.toFixed(1)} s; lookups meanwhile ${Math.round(during.rps)} req/s, p99 ${during.p99Ms.toFixed(2)} ms, ${during.non2xx} non-2xx`,
    );
  } finally {
    await stopChild(server.child);
  }
}

export async function analyticsRow(ctx: BenchContext): Promise<void> {
  const { startService, adminToken } = ctx;
  const { target } = ctx.store;
  // A tenant of a million subscribers with a year of runs, beside smaller tenants in the
  // same tables; its analytics asked through the admin API, one call at a time.
  const seeded = await seedAnalytics(target, (l) => log(`analytics seed: ${l}`));
  const server = await startService('service-analytics');
  try {
    const result = await measureAnalytics({ url: server.url, adminToken, seed: seeded, calls: ANALYTICS_CALLS });
    ctx.findings.analytics = result;
    for (const f of result.failures) note(`analytics: ${f}`);
    for (const line of analyticsLines(result)) log(line);
  } finally {
    await stopChild(server.child);
  }
}
