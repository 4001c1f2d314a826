/**
 * Child processes of the bench: each is started in its own process group, so that a
 * server's cluster workers go with it, and every one is ended at the end, on an error and
 * on Ctrl-C. Also the /proc readings: RSS and CPU time of a process and its descendants.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, readdirSync } from 'node:fs';
import { createServer } from 'node:net';

export interface Child {
  name: string;
  proc: ChildProcess;
  pid: number;
  logPath: string;
  /** Resolves when the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  hasExited(): boolean;
}

const running = new Set<Child>();
/** Short-lived helpers (the load generator) that share the bench's process group. */
const helpers = new Set<ChildProcess>();

/** Ends `proc` with the others at the end or on Ctrl-C, unless it has exited by then. */
export function trackHelper(proc: ChildProcess): void {
  helpers.add(proc);
  proc.once('exit', () => helpers.delete(proc));
}

function killHelpers(): void {
  for (const proc of helpers) proc.kill('SIGKILL');
  helpers.clear();
}

export interface SpawnOptions {
  env: NodeJS.ProcessEnv;
  cwd: string;
  /** stdout and stderr go to this file. */
  logPath: string;
}

export function spawnChild(name: string, command: string, args: string[], opts: SpawnOptions): Child {
  const fd = openSync(opts.logPath, 'a');
  let proc: ChildProcess;
  try {
    proc = spawn(command, args, { cwd: opts.cwd, env: opts.env, stdio: ['ignore', fd, fd], detached: true });
  } finally {
    closeSync(fd);
  }
  if (proc.pid === undefined) throw new Error(`could not start ${name}`);
  let done = false;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    proc.once('exit', (code, signal) => {
      done = true;
      resolve({ code, signal });
    });
    proc.once('error', () => {
      done = true;
      resolve({ code: null, signal: null });
    });
  });
  const child: Child = { name, proc, pid: proc.pid, logPath: opts.logPath, exited, hasExited: () => done };
  running.add(child);
  void exited.then(() => running.delete(child));
  return child;
}

function signalGroup(child: Child, signal: NodeJS.Signals): void {
  try {
    process.kill(-child.pid, signal);
  } catch {
    // The group is gone already.
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** SIGTERM to the child's group, then SIGKILL when it is not gone after `graceMs`. */
export async function stopChild(child: Child, graceMs = 12_000): Promise<void> {
  if (!child.hasExited()) {
    signalGroup(child, 'SIGTERM');
    const timeout = sleep(graceMs).then(() => 'timeout' as const);
    if ((await Promise.race([child.exited, timeout])) === 'timeout') {
      signalGroup(child, 'SIGKILL');
      await Promise.race([child.exited, sleep(2_000)]);
    }
  }
  // Workers of a cluster whose primary has gone.
  signalGroup(child, 'SIGKILL');
  running.delete(child);
}

export async function stopAll(): Promise<void> {
  killHelpers();
  await Promise.all([...running].map((c) => stopChild(c, 5_000)));
}

/** Last resort, from a process 'exit' handler: nothing asynchronous can run there. */
export function killAllSync(): void {
  killHelpers();
  for (const child of running) signalGroup(child, 'SIGKILL');
  running.clear();
}

export function tail(path: string, lines = 20): string {
  try {
    return readFileSync(path, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export class StartError extends Error {
  constructor(
    message: string,
    readonly exitCode: number | null,
    readonly log: string,
  ) {
    super(message);
  }
}

/** Polls `url` until it answers 200; fails when the child exits first or after `timeoutMs`. */
export async function waitReady(child: Child, url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.hasExited()) {
      const { code } = await child.exited;
      throw new StartError(`${child.name} exited with code ${code} before it was ready`, code, tail(child.logPath));
    }
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      await res.arrayBuffer();
      if (res.status === 200) return;
    } catch {
      // Not listening yet.
    }
    await sleep(100);
  }
  throw new StartError(`${child.name} was not ready at ${url} within ${timeoutMs / 1000} s`, null, tail(child.logPath));
}

interface ProcStat {
  pid: number;
  ppid: number;
  /** utime + stime, in clock ticks. */
  ticks: number;
}

function readStat(pid: number): ProcStat | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which is in parentheses and may hold spaces.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return { pid, ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) };
  } catch {
    return null;
  }
}

/** Every live descendant of `pid` (children, their children, ...). */
export function descendants(pid: number): number[] {
  const byParent = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readStat(Number(entry));
    if (!stat) continue;
    const list = byParent.get(stat.ppid) ?? [];
    list.push(stat.pid);
    byParent.set(stat.ppid, list);
  }
  const out: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const next = queue.shift() ?? 0;
    for (const c of byParent.get(next) ?? []) {
      out.push(c);
      queue.push(c);
    }
  }
  return out;
}

function commandName(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '';
  }
}

/**
 * A cluster's workers: the children of `pid`, whatever title they gave themselves, but not
 * an esbuild helper (tsx).
 */
export function workerProcesses(pid: number): number[] {
  const children = new Set(descendants(pid).filter((p) => readStat(p)?.ppid === pid));
  return [...children].filter((p) => commandName(p) !== 'esbuild');
}

/** VmRSS in MB, 0 when the process is gone. */
export function rssMb(pid: number): number {
  try {
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

/** CPU time used so far (user + system), in seconds; Linux's USER_HZ is 100. */
export function cpuSeconds(pids: readonly number[]): number {
  return pids.reduce((sum, pid) => sum + (readStat(pid)?.ticks ?? 0), 0) / 100;
}

/** What a server row measures: the process, or its workers when it runs a cluster. */
export function serverProcesses(child: Child): { pids: number[]; workers: number } {
  const workers = workerProcesses(child.pid);
  return workers.length > 0 ? { pids: workers, workers: workers.length } : { pids: [child.pid], workers: 0 };
}

/** CPU time all cores spent busy so far (every process, the kernel's work included), in seconds. */
export function systemBusySeconds(): number {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
    const [, user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).map(Number);
    return ((user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0)) / 100;
  } catch {
    return 0;
  }
}
