/** One load row: its answers checked, the server warmed, the load run and the processes' CPU and memory read. */
import { Agent } from 'node:http';
import { loadavg } from 'node:os';
import type { BenchContext, BenchStore, Server } from './context.js';
import type { BenchRequest } from './data.js';
import { call } from './http.js';
import { log, note, stopping } from './lifecycle.js';
import { runLoad } from './load.js';
import type { Generator } from './load.js';
import type { BenchOptions } from './options.js';
import { cpuSeconds, rssMb, serverProcesses, systemBusySeconds, tail } from './procs.js';
import type { RowName, RowResult } from './report.js';

const CHECK_SAMPLE = 50;

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value as Record<string, unknown>)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, v]) => [k, sortKeys(v)]),
    );
  }
  return value;
}

/** The body the contract requires: top-level keys in its order, flags in any order. */
function sameAnswer(actual: string, expected: string): boolean {
  if (actual === expected) return true;
  try {
    const a = JSON.parse(actual) as Record<string, unknown>;
    const e = JSON.parse(expected) as Record<string, unknown>;
    return (
      Object.keys(a).join() === Object.keys(e).join() && JSON.stringify(sortKeys(a)) === JSON.stringify(sortKeys(e))
    );
  } catch {
    return false;
  }
}

/** Asks a spread sample of the row's requests, one at a time, and compares each answer. */
export async function checkAnswers(baseUrl: string, requests: readonly BenchRequest[]): Promise<RowResult['check']> {
  const step = Math.max(1, Math.floor(requests.length / CHECK_SAMPLE));
  const mismatches: string[] = [];
  let sampled = 0;
  for (let i = 0; i < requests.length && sampled < CHECK_SAMPLE; i += step) {
    const req = requests[i];
    if (!req) break;
    sampled += 1;
    try {
      const res = await fetch(baseUrl + req.path, {
        headers: { authorization: req.authorization },
        signal: AbortSignal.timeout(10_000),
      });
      const body = await res.text();
      if (res.status !== 200 || !sameAnswer(body, req.expected)) {
        mismatches.push(`${req.customerId}: got ${res.status} ${body.slice(0, 200)}; expected ${req.expected}`);
      }
    } catch (err) {
      mismatches.push(`${req.customerId}: ${(err as Error).message}`);
    }
  }
  return { sampled, ok: sampled - mismatches.length, mismatches: mismatches.slice(0, 5) };
}

/**
 * Asks the peer's requests before it is measured, so that it measures a warm buffer cache,
 * whatever the warm-up's rate: every request once, 50 connections sharing the list (2 per
 * worker, each the whole list, when `workers` > 0). Stops after `budgetMs`. Returns how many
 * requests were sent, and how many not answered 200.
 */
export async function prime(
  baseUrl: string,
  requests: readonly BenchRequest[],
  workers: number,
  budgetMs: number,
): Promise<{ sent: number; failed: number }> {
  const base = new URL(baseUrl);
  const deadline = Date.now() + budgetMs;
  const lanes = workers > 0 ? 2 * workers : 50;
  let shared = 0;
  let sent = 0;
  let failed = 0;
  const lane = async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    let own = 0;
    try {
      while (Date.now() < deadline && !stopping()) {
        const index = workers > 0 ? own++ : shared++;
        const req = requests[index];
        if (!req) break;
        sent += 1;
        const answer = await call(agent, base, 'GET', req.path, { authorization: req.authorization }).catch(() => null);
        if (answer?.status !== 200) failed += 1;
      }
    } finally {
      agent.destroy();
    }
  };
  await Promise.all(Array.from({ length: lanes }, lane));
  return { sent, failed };
}

/**
 * Before a row's load: a sample of its answers checked (not the baseline's, nor right after
 * a start), and the peer primed.
 */
async function prepare(
  row: RowName,
  server: Server,
  requests: readonly BenchRequest[],
  cold: boolean,
): Promise<RowResult['check']> {
  const check =
    row === 'baseline' || cold ? { sampled: 0, ok: 0, mismatches: [] } : await checkAnswers(server.url, requests);
  if (check.mismatches.length > 0)
    note(
      `${row}: ${check.sampled - check.ok} of ${check.sampled} sampled answers were wrong, e.g. ${check.mismatches[0]}`,
    );
  // The service holds every subscriber from its start: its rows get their warm-up only,
  // as in life. The peer's questions are asked once before, to warm the database's buffers.
  if (row === 'peer') {
    const primeStarted = performance.now();
    const { workers } = serverProcesses(server.child);
    // The peer caches nothing: priming only warms the database's buffers, so 10 s will do.
    const { sent, failed } = await prime(server.url, requests, workers, 10_000);
    log(
      `${row}: primed with ${sent} requests in ${((performance.now() - primeStarted) / 1000).toFixed(1)} s${failed > 0 ? `, ${failed} not answered 200` : ''}`,
    );
    if (failed > 0) note(`${row}: ${failed} of ${sent} priming requests were not answered 200`);
  }
  return check;
}

/** The measuring function of a run: its rows' results go to `results`. */
export function measurer(env: {
  opts: BenchOptions;
  generator: Generator;
  workDir: string;
  store: BenchStore;
  results: RowResult[];
}): BenchContext['measure'] {
  const { opts, generator, workDir, results } = env;
  const { target, dbPids } = env.store;
  return async function measure(
    row: RowName,
    what: string,
    server: Server,
    requests: readonly BenchRequest[],
    linesFile: string,
  ): Promise<void> {
    // Right after a start: no check, no priming, no warm-up; the load starts at once.
    const cold = row === 'zipfcold';
    const check = await prepare(row, server, requests, cold);
    const load = { baseUrl: server.url, linesFile, connections: opts.connections, workDir };
    if (opts.warmupS > 0 && !cold) await runLoad(generator, { ...load, durationS: opts.warmupS });
    const procs = serverProcesses(server.child);
    const cpuPids = procs.workers > 0 ? [server.child.pid, ...procs.pids] : procs.pids;
    const loadAverage = loadavg()[0] ?? 0;
    const dbBefore = new Map((await dbPids()).map((pid) => [pid, cpuSeconds([pid])]));
    const cpuBefore = cpuSeconds(cpuPids);
    const busyBefore = systemBusySeconds();
    const result = await runLoad(generator, { ...load, durationS: opts.durationS });
    const cpu = cpuSeconds(cpuPids) - cpuBefore;
    const busy = systemBusySeconds() - busyBefore;
    // A backend that connected during the run did all its work in it.
    const db = (await dbPids()).reduce((sum, pid) => sum + cpuSeconds([pid]) - (dbBefore.get(pid) ?? 0), 0);
    const pct = (seconds: number) => (result.seconds > 0 ? (seconds / result.seconds) * 100 : 0);
    const dbCpuPct = target.engine === 'postgres' ? pct(db) : null;
    // What neither the server, the database nor the generator used: other work on the machine skews the row.
    const otherCpuPct = Math.max(0, pct(busy) - pct(cpu) - (dbCpuPct ?? 0) - (result.generatorCpuPct ?? 0));
    if (otherCpuPct > 25)
      note(
        `${row}: other processes used ${Math.round(otherCpuPct)}% of a core during the run (load average ${loadAverage.toFixed(1)} before it): the machine was busy`,
      );
    const rss = procs.pids.reduce((sum, pid) => sum + rssMb(pid), 0);
    if (server.child.hasExited())
      note(`${row}: ${server.child.name} exited during the run:\n${tail(server.child.logPath)}`);
    results.push({
      row,
      what,
      load: result,
      rssMb: rss,
      rssNote:
        procs.workers > 0
          ? `sum of ${procs.workers} workers (the primary, not counted: ${rssMb(server.child.pid).toFixed(1)} MB)`
          : 'one process',
      primaryRssMb: procs.workers > 0 ? rssMb(server.child.pid) : null,
      workers: procs.workers,
      serverCpuPct: pct(cpu),
      dbCpuPct,
      otherCpuPct,
      loadAverage,
      check,
      vsBaseline: null,
      vsPeer: null,
    });
    log(
      `${row}: ${Math.round(result.rps)} req/s, p50 ${result.p50Ms.toFixed(2)} ms, p99 ${result.p99Ms.toFixed(2)} ms, RSS ${rss.toFixed(1)} MB, ` +
        `${result.non2xx} non-2xx, ${result.socketErrors} socket errors`,
    );
  };
}
