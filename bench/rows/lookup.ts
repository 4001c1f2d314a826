/**
 * The lookup's load rows: a bare node:http baseline, the service in one process and in its
 * default workers (hot, secret key, unknown, Zipf, one hot key, slow-loris neighbours), the
 * customers in dunning, the first seconds after a start, a query-per-request peer, and the
 * @dunwall/node Express middleware against a bare route.
 */
import { join } from 'node:path';
import type { BenchContext } from '../context.js';
import { fmtN } from '../context.js';
import type { BenchRequest } from '../data.js';
import { benchDunwallPayUrl, benchPayUrl, dunningSet, setDunningExtras } from '../dunning.js';
import { note, stopping } from '../lifecycle.js';
import { writeLines } from '../load.js';
import { MIDDLEWARE_BODY, benchCustomer, middlewareCostNs } from '../middleware-app.js';
import { serverProcesses, stopChild } from '../procs.js';
import type { RowName, RowResult } from '../report.js';
import { createSecretKeys, startDrippers, startHookTraffic } from '../traffic.js';

export const HOT_COUNT = 10_000;
export const UNKNOWN_COUNT = 10_000;
export const ZIPF_S = 1.0;
/** The dripping row: this many connections from one address, each sending a byte a second. */
const DRIP_CONNECTIONS = 1_100;
const DRIP_FROM = '127.0.0.2';
/** The hooks row: status changes a second, each delivered to a receiver on loopback while the lookups are measured. */
const HOOK_CHANGES_PER_S = 50;
/** The middleware row: customers asked, and rounds of each server, alternated (the best of each kept). */
const MIDDLEWARE_CUSTOMERS = 10_000;
const MIDDLEWARE_ROUNDS = 2;

export async function baselineRow(ctx: BenchContext): Promise<void> {
  const { startScript, measure } = ctx;
  const { hot, files, baselineBody } = ctx.questions;
  const server = await startScript('baseline', 'baseline.ts', { BENCH_BODY: baselineBody });
  try {
    await measure(
      'baseline',
      `node:http, fixed ${Buffer.byteLength(baselineBody)}-byte JSON body`,
      server,
      hot,
      files.hot,
    );
  } finally {
    await stopChild(server.child);
  }
}

export async function middlewareRows(ctx: BenchContext): Promise<void> {
  const { startScript, measure, results, workDir } = ctx;
  // The same Express route without and with dunwallExpress (an in-memory copy, no
  // network), each in a process of its own, measured in turn: the best round of each is
  // kept, so that a moment of other work on the machine does not decide the ratio.
  const requests: BenchRequest[] = Array.from({ length: MIDDLEWARE_CUSTOMERS }, (_, i) => {
    const customerId = benchCustomer(i + 1);
    return {
      path: '/api/projects',
      authorization: `Bearer ${customerId}`,
      expected: MIDDLEWARE_BODY,
      tenant: 0,
      customerId,
    };
  });
  const file = join(workDir, 'middleware.txt');
  writeLines(file, requests);
  const env = { BENCH_CUSTOMERS: String(MIDDLEWARE_CUSTOMERS) };
  const bare = await startScript('express', 'middleware-app.ts', { ...env, BENCH_MIDDLEWARE: 'off' });
  try {
    const guarded = await startScript('middleware', 'middleware-app.ts', { ...env, BENCH_MIDDLEWARE: 'on' });
    try {
      const best = new Map<RowName, RowResult>();
      const ratios: string[] = [];
      for (let round = 1; round <= MIDDLEWARE_ROUNDS && !stopping(); round += 1) {
        const rps: number[] = [];
        for (const [row, server, what] of [
          ['express', bare, 'Express 5, one JSON route'],
          [
            'middleware',
            guarded,
            `the same behind dunwallExpress, ${fmtN(MIDDLEWARE_CUSTOMERS)} customers (1 in 10 warning, held), in-memory copy`,
          ],
        ] as const) {
          await measure(row, what, server, requests, file);
          const result = results.pop();
          if (result === undefined) continue;
          rps.push(result.load.rps);
          if ((best.get(row)?.load.rps ?? -1) < result.load.rps) best.set(row, result);
        }
        if (rps.length === 2) ratios.push(((rps[1] ?? 0) / (rps[0] || 1)).toFixed(3));
      }
      for (const row of ['express', 'middleware'] as const) {
        const result = best.get(row);
        if (result) results.push(result);
      }
      const bareRow = best.get('express');
      const guardedRow = best.get('middleware');
      if (bareRow && guardedRow) {
        // The server's CPU per request as well: steadier than the rate when the load
        // generator, not the server, is what runs out of CPU.
        const cpuUs = (r: RowResult) => (r.load.rps > 0 ? ((r.serverCpuPct / 100) * 1e6) / r.load.rps : NaN);
        // And the middleware alone, called in this process: its cost against the bare route's CPU per request.
        const ownNs = middlewareCostNs(MIDDLEWARE_CUSTOMERS);
        note(
          `middleware: ${(guardedRow.load.rps / bareRow.load.rps).toFixed(3)} of the bare route's rate, best of ${MIDDLEWARE_ROUNDS} rounds each ` +
            `(round by round: ${ratios.join(', ')}); overhead ${((1 - guardedRow.load.rps / bareRow.load.rps) * 100).toFixed(1)}% (target < 5%); ` +
            `server CPU per request ${cpuUs(bareRow).toFixed(1)} us bare, ${cpuUs(guardedRow).toFixed(1)} us behind the middleware; ` +
            `the middleware alone, in process: ${ownNs.toFixed(0)} ns a request, ${((ownNs / 1000 / cpuUs(bareRow)) * 100).toFixed(2)}% of the bare route's CPU per request`,
        );
      }
    } finally {
      await stopChild(guarded.child);
    }
  } finally {
    await stopChild(bare.child);
  }
}

export async function oneProcessRows(ctx: BenchContext): Promise<void> {
  const { opts, startService, measure, adminToken } = ctx;
  const { hot, files } = ctx.questions;
  // One process, as the baseline and the peer are: the figures compare like with like.
  // Downstream webhooks may go to loopback, for the hooks row's receiver.
  // The writes and hooks rows' status changes go through the admin API, unlimited here.
  const hooksEnv = {
    DUNWALL_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true',
    DUNWALL_WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
    DUNWALL_RATE_LIMIT_ADMIN_PER_IP: '0',
  };
  const server = await startService('service-1', { workers: 1, env: hooksEnv });
  try {
    if (opts.rows.has('hot1'))
      await measure(
        'hot1',
        `service, one process, ${fmtN(hot.length)} known subscribers, hmac`,
        server,
        hot,
        files.hot,
      );
    // The same lookups while the process also applies status changes (writes), and while
    // it also sends each to a tenant's endpoint (hooks): hooks / writes is the deliverer's
    // cost to the lookup, writes / hot1 the cost of the changes themselves.
    for (const row of ['writes', 'hooks'] as const) {
      if (!opts.rows.has(row)) continue;
      const traffic = await startHookTraffic(server.url, adminToken, HOOK_CHANGES_PER_S, row === 'hooks');
      try {
        const what =
          row === 'hooks' ? 'status changes/s, each sent as a webhook' : 'status changes/s, no webhook endpoint';
        await measure(
          row,
          `service, one process, hot list, while ${HOOK_CHANGES_PER_S} ${what}`,
          server,
          hot,
          files.hot,
        );
      } finally {
        const seen = await traffic.stop();
        note(
          `${row}: ${fmtN(seen.changes)} status changes made (${fmtN(seen.failedChanges)} failed), ${fmtN(seen.delivered)} webhooks received`,
        );
      }
    }
  } finally {
    await stopChild(server.child);
  }
}

export async function serviceRows(ctx: BenchContext): Promise<void> {
  const { opts, startService, measure, results, adminToken, workDir } = ctx;
  const { total, hot, unknown, zipf, hotkey, files } = ctx.questions;
  const server = await startService('service');
  try {
    if (opts.rows.has('hot'))
      await measure('hot', `service, ${fmtN(hot.length)} known subscribers, hmac`, server, hot, files.hot);
    if (opts.rows.has('secretkey')) {
      // The same questions from a tenant's server: a secret key of each tenant instead of
      // its publishable key and hmac (the key stands in for both).
      const secretKeys = await createSecretKeys(server.url, adminToken, [...new Set(hot.map((r) => r.tenant))]);
      const keyed = hot.map((r) => ({
        ...r,
        path: r.path.replace(/&hmac=[^&]*/, ''),
        authorization: `Bearer ${secretKeys.get(r.tenant) ?? ''}`,
      }));
      const keyedFile = join(workDir, 'secretkey.txt');
      writeLines(keyedFile, keyed);
      await measure(
        'secretkey',
        `service, the hot list with each tenant's secret key, no hmac`,
        server,
        keyed,
        keyedFile,
      );
      const hotRow = results.find((r) => r.row === 'hot');
      const row = results.find((r) => r.row === 'secretkey');
      if (hotRow && row)
        note(
          `secretkey: ${(row.load.rps / hotRow.load.rps).toFixed(2)} of the hot row's rate (publishable key and hmac; target at least 0.9)`,
        );
    }
    if (opts.rows.has('unknown'))
      await measure(
        'unknown',
        `service, ${fmtN(unknown.length)} unknown customers, hmac`,
        server,
        unknown,
        files.unknown,
      );
    if (opts.rows.has('zipf')) {
      await measure(
        'zipf',
        `service, Zipf s=${ZIPF_S} over ${fmtN(total)} (${fmtN(zipf.distinct)} distinct)`,
        server,
        zipf.requests,
        files.zipf,
      );
    }
    if (opts.rows.has('hotkey'))
      await measure('hotkey', 'service, one hot customer, hmac', server, hotkey, files.hotkey);
    if (opts.rows.has('drip')) {
      // A slow-loris host: many connections from one address, each dripping a byte a
      // second and reopened when closed; the load generator, from another address, is
      // everyone else.
      const drip = startDrippers(new URL(server.url), DRIP_CONNECTIONS, DRIP_FROM);
      try {
        await drip.ready;
        await measure(
          'drip',
          `service, hot list, while ${fmtN(DRIP_CONNECTIONS)} connections from ${DRIP_FROM} drip a byte a second`,
          server,
          hot,
          files.hot,
        );
      } finally {
        const seen = drip.stop();
        note(
          `drip: ${fmtN(seen.opened)} dripping connections opened, ${fmtN(seen.closedByServer)} closed by the service, at most ${fmtN(seen.maxOpen)} open at once`,
        );
      }
    }
    ctx.service.observedWorkers = serverProcesses(server.child).workers;
  } finally {
    await stopChild(server.child);
  }
}

export async function dunningRow(ctx: BenchContext): Promise<void> {
  const { opts } = ctx;
  if (opts.rows.has('dunning')) await dunningRun(ctx, 'dunning', benchPayUrl, 'pay_url');
  // The same customers, their pay link one through Dunwall (docs/links.md): the link is a
  // string the write path made, built into the answer once as a stored page is.
  if (opts.rows.has('dunninglinks')) await dunningRun(ctx, 'dunninglinks', benchDunwallPayUrl, 'a Dunwall pay link');
  const { results } = ctx;
  const plain = results.find((r) => r.row === 'dunning');
  const links = results.find((r) => r.row === 'dunninglinks');
  if (plain && links)
    note(
      `dunninglinks: the lookup with a Dunwall pay link costs ${(plain.load.rps / links.load.rps).toFixed(2)}x the one with Stripe's stored page (target at most 1.05x)`,
    );
}

async function dunningRun(
  ctx: BenchContext,
  rowName: 'dunning' | 'dunninglinks',
  payUrl: (customerId: string) => string,
  carried: string,
): Promise<void> {
  const { startService, measure, results, workDir } = ctx;
  const { factory, tiers, hot } = ctx.questions;
  const { target } = ctx.store;
  // Customers in dunning whose answers carry a scheduled lockout and a pay link, built per
  // request: given to them in the store for this row only (no service runs meanwhile), then
  // taken away again, so that every other row measures the seed as it is.
  const set = dunningSet(factory, tiers, HOT_COUNT, new Set(hot.map((r) => r.customerId)), Date.now(), payUrl);
  const dunningFile = join(workDir, `${rowName}.txt`);
  writeLines(dunningFile, set.requests);
  await setDunningExtras(target, set.requests, set);
  try {
    const server = await startService(`service-${rowName}`);
    try {
      await measure(
        rowName,
        `service, ${fmtN(set.requests.length)} warning and lockout subscribers with lockout_at and ${carried}, hmac`,
        server,
        set.requests,
        dunningFile,
      );
    } finally {
      await stopChild(server.child);
    }
  } finally {
    await setDunningExtras(target, set.requests, null);
  }
  const hotRow = results.find((r) => r.row === 'hot');
  const row = results.find((r) => r.row === 'dunning');
  if (rowName === 'dunning' && hotRow && row)
    note(
      `dunning: ${(row.load.rps / hotRow.load.rps).toFixed(2)} of the hot row's rate (answers with lockout_at and pay_url; target at least 0.9)`,
    );
}

export async function zipfColdRow(ctx: BenchContext): Promise<void> {
  const { opts, startService, measure } = ctx;
  const { zipf, files } = ctx.questions;
  // A fresh process, measured from the moment it says it is ready: what a deploy or a
  // restart costs the first users.
  const server = await startService('service-cold');
  try {
    await measure(
      'zipfcold',
      `service, Zipf mix in the first ${opts.durationS} s after a start`,
      server,
      zipf.requests,
      files.zipf,
    );
  } finally {
    await stopChild(server.child);
  }
}

export async function peerRow(ctx: BenchContext): Promise<void> {
  const { startScript, measure } = ctx;
  const { hot, files } = ctx.questions;
  const { serverUrl, peerEnv } = ctx.store;
  // Embedded: the service has stopped, so the peer may open the folder.
  const server = await startScript('peer', 'peer.ts', peerEnv);
  try {
    await measure(
      'peer',
      `peer: node:http + ${serverUrl ? 'pg' : 'PGlite'}, 1 query/request, hot set`,
      server,
      hot,
      files.hot,
    );
  } finally {
    await stopChild(server.child);
  }
}
