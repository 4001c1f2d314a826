import { spawn } from 'node:child_process';
import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { request } from 'node:http';
import { describe, expect, it } from 'vitest';
import { availableEngines, schemaScopedUrl } from '../helpers/engines.js';
import { event, invoice, signed } from '../helpers/stripe-fixtures.js';

const engines = await availableEngines();
const TOKEN = 'cluster-test-token-0123456789abcdefghijklmnop';
const SECRET = 'whsec_cluster_test_0123456789abcdefghijklmnop';
/** Rounds of writes through one worker, each followed at once by a lookup through the other. */
const ROUNDS = 24;

interface Answer {
  status: number;
  body: string;
  /** The answering process: the prefix of the request id it gave. */
  worker: string;
}

/** One request on a connection of its own, so that the primary hands it to the next worker in turn. */
function once(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string,
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers, agent: false, timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({
          status: res.statusCode ?? 0,
          body: Buffer.concat(chunks).toString('utf8'),
          worker: String(res.headers['x-request-id'] ?? '').split('-')[0] ?? '',
        }),
      );
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer to ${method} ${path} in 10 s`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** `dunwall serve --workers 2`, its output gathered, once both workers listen (on one port: the primary's). */
async function serveTwoWorkers(databaseUrl: string, extraEnv: Record<string, string> = {}) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--workers', '2'], {
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      DUNWALL_ADMIN_TOKEN: TOKEN,
      PORT: '0',
      LOG_LEVEL: 'info',
      ...extraEnv,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  }) as ChildProcessWithoutNullStreams;
  const state = { out: '' };
  child.stdout.on('data', (d: Buffer) => (state.out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (state.out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  await expect
    .poll(() => (state.out.match(/Server listening at/g) ?? []).length, { timeout: 45_000, interval: 100 })
    .toBe(2);
  const urls = [...state.out.matchAll(/Server listening at (http:\/\/[^"]+)/g)].map((m) => m[1] ?? '');
  return { child, state, exited, urls };
}

describe.each(engines.filter((e) => e.name === 'postgres'))('dunwall serve --workers 2 ($name)', () => {
  it('answers from two worker processes, aggregates /metrics across them, and stops on SIGTERM', async () => {
    const scoped = await schemaScopedUrl('dunwall_cluster');
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--workers', '2'], {
      env: { ...process.env, DATABASE_URL: scoped.url, DUNWALL_ADMIN_TOKEN: TOKEN, PORT: '0', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      // With PORT=0 each worker would get its own port: read both, and check each answers.
      await expect
        .poll(() => (out.match(/Server listening at/g) ?? []).length, { timeout: 45_000, interval: 100 })
        .toBe(2);
      const urls = [...out.matchAll(/Server listening at (http:\/\/[^"]+)/g)].map((m) => m[1] ?? '');
      const pids = new Set([...out.matchAll(/"pid":(\d+)[^\n]*Server listening/g)].map((m) => m[1]));
      expect(pids.size).toBe(2);
      // Ready means loaded: each worker loads its read model before it takes a connection.
      for (const pid of pids) {
        const lines = out.split('\n').filter((line) => line.includes(`"pid":${pid},`));
        const loaded = lines.findIndex((line) => line.includes('read model loaded'));
        const listening = lines.findIndex((line) => line.includes('Server listening'));
        expect(loaded, `worker ${pid}`).toBeGreaterThanOrEqual(0);
        expect(loaded, `worker ${pid}`).toBeLessThan(listening);
      }
      const base = urls[0] ?? '';
      const created = await fetch(`${base}/admin/v1/tenants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ slug: 'acme' }),
      });
      const key = ((await created.json()) as { publishable_key: string }).publishable_key;
      for (const u of urls) {
        for (let i = 0; i < 5; i += 1) {
          const res = await fetch(`${u}/api/subscriber-status/acme?processor_customer_id=cus_${i}`, {
            headers: { authorization: `Bearer ${key}` },
          });
          expect(res.status).toBe(200);
        }
      }
      const metrics = await (await fetch(`${base}/metrics`)).text();
      expect(metrics).toMatch(
        /^dunwall_http_requests_total\{route="\/api\/subscriber-status\/:tenantSlug",method="GET",status_code="200"\} 10$/m,
      );
      // Each worker holds the whole model: its size is the largest worker's, not the sum.
      expect(metrics).toMatch(/^dunwall_readmodel_tenants 1$/m);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(out).toContain('all workers stopped');
    } finally {
      child.kill('SIGKILL');
      await scoped.drop();
    }
  });

  it("a write through one worker is in every worker's read model when it answers: the next lookup, through the other, never reads the state before", async () => {
    const scoped = await schemaScopedUrl('dunwall_cluster_rw');
    // The 402s of the rounds would otherwise count against the test's address.
    const served = await serveTwoWorkers(scoped.url, {
      DUNWALL_RATE_LIMIT_FAILURES_PER_IP: '0',
      DUNWALL_RATE_LIMIT_ADMIN_PER_IP: '0',
      DUNWALL_DEMO: '0',
    });
    const { child, urls } = served;
    try {
      const port = Number(new URL(urls[0] ?? '').port);
      const admin = (method: string, path: string, body?: unknown) =>
        once(
          port,
          method,
          `/admin/v1${path}`,
          { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          body === undefined ? undefined : JSON.stringify(body),
        );
      const created = await admin('POST', '/tenants', { slug: 'rw' });
      expect(created.status).toBe(201);
      const key = (JSON.parse(created.body) as { publishable_key: string }).publishable_key;
      expect((await admin('PATCH', '/tenants/rw', { stripe_webhook_secret: SECRET })).status).toBe(200);
      const webhook = (customer: string, id: string) => {
        const nowS = Math.floor(Date.now() / 1000);
        const { payload, signature } = signed(
          event('invoice.payment_failed', invoice(customer, { next_payment_attempt: null }), { created: nowS - 1, id }),
          SECRET,
          nowS,
        );
        return once(
          port,
          'POST',
          '/webhooks/stripe/rw',
          { 'content-type': 'application/json', 'stripe-signature': signature },
          payload,
        );
      };

      const stale: string[] = [];
      const workersSeen = new Set<string>();
      /**
       * The write, then lookups on new connections until one is answered by another worker
       * than the write (the primary hands connections to the workers in turn): that one
       * must read what was written, and so must any the writer's worker answered on the way.
       */
      const writeThenRead = async (
        what: string,
        write: () => Promise<Answer>,
        writeStatus: number,
        customer: string,
        wanted: string,
      ) => {
        const written = await write();
        expect(written.status, `${what}: ${written.body}`).toBe(writeStatus);
        workersSeen.add(written.worker);
        for (let tries = 0; tries < 10; tries += 1) {
          const read = await once(port, 'GET', `/api/subscriber-status/rw?processor_customer_id=${customer}`, {
            authorization: `Bearer ${key}`,
          });
          workersSeen.add(read.worker);
          const body = JSON.parse(read.body) as { status?: string; code?: string };
          const got = read.status === 200 ? (body.status ?? '') : `${read.status} ${body.code ?? ''}`;
          if (got !== wanted)
            stale.push(`${what}: ${got}, not ${wanted} (${read.worker === written.worker ? 'same' : 'other'} worker)`);
          if (read.worker !== written.worker) return;
        }
        throw new Error(`${what}: no lookup reached another worker than the write's`);
      };
      for (let round = 0; round < ROUNDS; round += 1) {
        await writeThenRead(
          `round ${round}, suspended`,
          () => admin('PATCH', '/tenants/rw', { suspended: true }),
          200,
          'cus_any',
          '402 tenant_suspended',
        );
        await writeThenRead(
          `round ${round}, resumed`,
          () => admin('PATCH', '/tenants/rw', { suspended: false }),
          200,
          'cus_any',
          'active',
        );
        await writeThenRead(
          `round ${round}, set`,
          () => admin('PUT', `/tenants/rw/subscribers/cus_set${round}`, { status: 'warning' }),
          200,
          `cus_set${round}`,
          'warning',
        );
        await writeThenRead(
          `round ${round}, deleted`,
          () => admin('DELETE', `/tenants/rw/subscribers/cus_set${round}`),
          204,
          `cus_set${round}`,
          'active',
        );
        await writeThenRead(
          `round ${round}, webhook`,
          () => webhook(`cus_hook${round}`, `evt_rw_${round}`),
          200,
          `cus_hook${round}`,
          'lockout',
        );
      }
      expect(workersSeen.size).toBe(2);
      expect(stale).toEqual([]);
      // Every write waited for the other worker.
      const metrics = (await once(port, 'GET', '/metrics', {})).body;
      expect(Number(/^dunwall_write_waits_total (\d+)$/m.exec(metrics)?.[1] ?? 0)).toBeGreaterThanOrEqual(ROUNDS * 5);
      expect(metrics).toMatch(/^dunwall_write_wait_timeouts_total \d+$/m);
      child.kill('SIGTERM');
      expect(await served.exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
      await scoped.drop();
    }
  });
});
