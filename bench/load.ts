/**
 * The load generator: wrk (one thread, a Lua script cycling through a file of request
 * lines) when it is installed, autocannon (in this process, a setupRequest cycling through
 * the same lines) otherwise. Every row of a run uses the same one.
 */
import { execFile, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { DEFAULT_HTTP_LIMITS } from '../src/http/app.js';
import { cpuSeconds, trackHelper } from './procs.js';

export type GeneratorKind = 'wrk' | 'autocannon';

export interface Generator {
  kind: GeneratorKind;
  version: string;
  /** How it is run, for the table. */
  detail: string;
}

export interface RequestLine {
  path: string;
  authorization: string;
}

export interface LoadOptions {
  baseUrl: string;
  /** A file of `path<TAB>authorization` lines, written by `writeLines`. */
  linesFile: string;
  connections: number;
  durationS: number;
  workDir: string;
}

export interface LoadResult {
  requests: number;
  seconds: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Answers that were not 2xx or 3xx. */
  non2xx: number;
  /** Connect, read, write errors and timeouts. */
  socketErrors: number;
  /** The generator's own CPU use during the run, in % of one core. */
  generatorCpuPct: number | null;
}

const run = promisify(execFile);

async function wrkVersion(): Promise<string | null> {
  try {
    // `wrk --version` prints its banner and exits 1.
    const { stdout } = await run('wrk', ['--version']).catch((err: { stdout?: string }) => ({
      stdout: err.stdout ?? '',
    }));
    const match = /wrk (\S+)/.exec(stdout);
    return match?.[1] ?? null;
  } catch {
    return null;
  }
}

function autocannonVersion(): string {
  try {
    const pkg = JSON.parse(
      readFileSync(new URL('../node_modules/autocannon/package.json', import.meta.url), 'utf8'),
    ) as { version: string };
    return pkg.version;
  } catch {
    return 'unknown';
  }
}

export async function detectGenerator(forced?: GeneratorKind): Promise<Generator> {
  const wrk = forced === 'autocannon' ? null : await wrkVersion();
  if (wrk !== null)
    return { kind: 'wrk', version: wrk, detail: `wrk ${wrk}, 1 thread, Lua script cycling the request list` };
  if (forced === 'wrk') throw new Error('wrk is not installed (apt-get install -y wrk)');
  const version = autocannonVersion();
  return { kind: 'autocannon', version, detail: `autocannon ${version} in the bench process (wrk is not installed)` };
}

export function writeLines(path: string, lines: readonly RequestLine[]): void {
  writeFileSync(path, lines.map((l) => `${l.path}\t${l.authorization}\n`).join(''));
}

function readLines(path: string): RequestLine[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.includes('\t'))
    .map((line) => {
      const tab = line.indexOf('\t');
      return { path: line.slice(0, tab), authorization: line.slice(tab + 1) };
    });
}

const WRK_SCRIPT = `-- Written by bench/load.ts. Cycles through the request lines of the file given after --.
local reqs = {}
local count = 0
local idx = 0

init = function(args)
  for line in io.lines(args[1]) do
    local path, auth = line:match("^([^\\t]+)\\t(.*)$")
    if path then
      count = count + 1
      reqs[count] = wrk.format("GET", path, { ["Authorization"] = auth })
    end
  end
  if count == 0 then error("no request lines in " .. tostring(args[1])) end
end

request = function()
  idx = idx + 1
  if idx > count then idx = 1 end
  return reqs[idx]
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "BENCH_RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d max_us=%d connect=%d read=%d write=%d status=%d timeout=%d\\n",
    summary.requests, summary.duration, math.floor(latency:percentile(50)), math.floor(latency:percentile(99)),
    math.floor(latency.max), e.connect, e.read, e.write, e.status, e.timeout))
end
`;

function parseWrk(stdout: string): Record<string, number> {
  const line = stdout.split('\n').find((l) => l.startsWith('BENCH_RESULT '));
  if (!line) throw new Error(`wrk printed no result:\n${stdout.slice(-2000)}`);
  return Object.fromEntries(
    line
      .slice('BENCH_RESULT '.length)
      .trim()
      .split(' ')
      .map((kv) => {
        const [k, v] = kv.split('=');
        return [k ?? '', Number(v)];
      }),
  );
}

async function runWrk(opts: LoadOptions): Promise<LoadResult> {
  const script = join(opts.workDir, 'cycle.lua');
  writeFileSync(script, WRK_SCRIPT);
  const args = [
    '-t1',
    `-c${opts.connections}`,
    `-d${opts.durationS}s`,
    '--timeout',
    '5s',
    '-s',
    script,
    opts.baseUrl,
    '--',
    opts.linesFile,
  ];
  const child = spawn('wrk', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  trackHelper(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  // wrk's CPU time cannot be read once it has exited: sample it while it runs.
  let cpu = 0;
  const pid = child.pid ?? 0;
  const sampler = setInterval(() => {
    const now = cpuSeconds([pid]);
    if (now > 0) cpu = now;
  }, 200);
  const guard = setTimeout(() => child.kill('SIGKILL'), (opts.durationS + 30) * 1000);
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  clearInterval(sampler);
  clearTimeout(guard);
  if (code !== 0) throw new Error(`wrk exited with code ${code}: ${stderr.trim() || stdout.slice(-1000)}`);
  const r = parseWrk(stdout);
  const seconds = (r.duration_us ?? 0) / 1e6;
  const requests = r.requests ?? 0;
  return {
    requests,
    seconds,
    rps: seconds > 0 ? requests / seconds : 0,
    p50Ms: (r.p50_us ?? 0) / 1000,
    p99Ms: (r.p99_us ?? 0) / 1000,
    maxMs: (r.max_us ?? 0) / 1000,
    non2xx: r.status ?? 0,
    socketErrors: (r.connect ?? 0) + (r.read ?? 0) + (r.write ?? 0) + (r.timeout ?? 0),
    generatorCpuPct: seconds > 0 ? (cpu / seconds) * 100 : null,
  };
}

async function runAutocannon(opts: LoadOptions): Promise<LoadResult> {
  const { default: autocannon } = await import('autocannon');
  const lines = readLines(opts.linesFile);
  let next = 0;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const result = await autocannon({
    url: opts.baseUrl,
    connections: opts.connections,
    duration: opts.durationS,
    timeout: 5,
    // The service answers a connection's 10,000th request with `Connection: close` and any
    // further one with a 503 (Node's maxRequestsPerSocket). wrk opens a new connection then;
    // autocannon ignores the header, so it is told to reconnect after that many requests
    // (the response it reconnects on goes uncounted: one in 10,000). Every row, the
    // baseline's too, is asked the same way.
    reconnectRate: DEFAULT_HTTP_LIMITS.maxRequestsPerSocket,
    requests: [
      {
        method: 'GET',
        setupRequest: (req) => {
          const line = lines[next] ?? lines[0];
          next = next + 1 >= lines.length ? 0 : next + 1;
          return { ...req, path: line?.path ?? '/', headers: { authorization: line?.authorization ?? '' } };
        },
      },
    ],
  });
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const requests = result.requests.total;
  return {
    requests,
    seconds,
    rps: requests / seconds,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    maxMs: result.latency.max,
    non2xx: result.non2xx,
    socketErrors: result.errors + result.timeouts,
    generatorCpuPct: ((cpu.user + cpu.system) / 1e6 / seconds) * 100,
  };
}

export function runLoad(generator: Generator, opts: LoadOptions): Promise<LoadResult> {
  return generator.kind === 'wrk' ? runWrk(opts) : runAutocannon(opts);
}
