import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createDunwall } from '../../packages/node/src/index.js';
import { createDunwallWith } from '../../packages/node/src/follower.js';
import type { Internals } from '../../packages/node/src/follower.js';
import type { Dunwall } from '../../packages/node/src/index.js';
import { FakeClock } from '../helpers/harness.js';

/**
 * `@dunwall/node` reads bounded answers: real HTTP servers on loopback standing in for Dunwall
 * answer 300 MB (streamed, never allocated), list pages without end, and bodies that drip. The
 * heavy cases run the copy in a process of its own with a 256 MiB heap, which must live and
 * report the reason to `onError`; the copy keeps what it had (or goes stale), never gating
 * from a partial read. Nothing sleeps: the tests wait for what the copy reports.
 */
const ROOT = resolve(import.meta.dirname, '../..');
const KEY = `sk_test_${'b'.repeat(40)}`;
const WAIT = { timeout: 20_000, interval: 20 };
const QUICK: Internals = { backoff: { minMs: 20, maxMs: 100 } };
const MIB = 1024 * 1024;
const PAY_URL = `https://invoice.stripe.com/i/acct_1Nv0FGQ9RKHgCVdK/live_${'x'.repeat(100)}?s=ap`;

const servers: Server[] = [];
const open: Dunwall[] = [];
const children: ChildProcess[] = [];
afterEach(async () => {
  // A process still running (a test that failed before it ended) is ended with it.
  for (const child of children.splice(0))
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await Promise.all(open.splice(0).map((d) => d.close()));
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((done) => server.close(done));
  }
});

/** A stand-in for Dunwall on loopback, answering each request as `answer` says. */
async function standIn(answer: (path: string, req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const server = createServer((req, res) => answer(new URL(req.url ?? '/', 'http://x').pathname, req, res));
  servers.push(server);
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const json = (res: ServerResponse, body: unknown, status = 200) =>
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));

/**
 * A 200 whose body is `prefix` then `unit` over and over, up to `total` bytes, written as the
 * client reads (never held in memory); stops when the client leaves. `sent` counts the bytes.
 */
function streamed(res: ServerResponse, prefix: string, unit: string, total: number, sent: { bytes: number }): void {
  const chunk = Buffer.from(unit.repeat(Math.max(1, Math.floor(65_536 / unit.length))));
  res.writeHead(200, { 'content-type': 'application/json' });
  res.write(prefix);
  sent.bytes += prefix.length;
  const pump = (): void => {
    while (sent.bytes < total && !res.destroyed) {
      sent.bytes += chunk.length;
      if (!res.write(chunk)) return void res.once('drain', pump);
    }
    if (!res.destroyed) res.end();
  };
  pump();
}

/** An entry of the status feed, as big as Dunwall's are in dunning (a Stripe pay link, a scheduled lockout). */
const entry = (n: number) => ({
  processor_customer_id: `cus_${n}`,
  status: 'warning',
  lockout_at: '2030-01-01T00:00:00Z',
  pay_url: PAY_URL,
});

interface ChildResult {
  errors: string[];
  peakHeapGrowth: number;
  heapGrowthAfter: number;
  peakRssGrowth: number;
  status: { status: string; source: string };
  bootstrap: { bootstrap: { status: string; pay_url: string | null } | null } | null;
}

/** node-bounds-child.ts against `base`, with a 256 MiB heap: its exit and its one JSON line. */
async function runChild(
  scenario: string,
  base: string,
): Promise<{ code: number | null; signal: string | null; result: ChildResult | null; output: string }> {
  const child = spawn(
    process.execPath,
    ['--max-old-space-size=256', '--expose-gc', '--import', 'tsx', 'test/packages/node-bounds-child.ts'],
    {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', SCENARIO: scenario, DUNWALL_URL: base },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  children.push(child);
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const { code, signal } = await new Promise<{ code: number | null; signal: string | null }>((done) =>
    child.on('exit', (c, s) => done({ code: c, signal: s })),
  );
  const line = output.split('\n').find((l) => l.startsWith('{"errors"'));
  return { code, signal, result: line === undefined ? null : (JSON.parse(line) as ChildResult), output };
}

describe('@dunwall/node: bounded reads, in a process with a 256 MiB heap', () => {
  it('cuts a 300 MB list answer at maxAnswerBytes: the process lives, onError says why, everyone is let through', async () => {
    const sent = { bytes: 0 };
    const base = await standIn((path, _req, res) => {
      if (path === '/v1/statuses') streamed(res, '{"data":[', `${JSON.stringify(entry(1))},`, 300 * MIB, sent);
      else json(res, { data: [], next: 'AQ' });
    });
    const { code, signal, result, output } = await runChild('list', base);
    expect({ code, signal }, output).toEqual({ code: 0, signal: null });
    expect(result?.errors[0]).toBe(
      'Dunwall: GET /v1/statuses answered more than 8388608 bytes (maxAnswerBytes); not read further, nothing of it applied',
    );
    expect(result?.status).toMatchObject({ status: 'active', source: 'starting' });
    expect(result?.peakHeapGrowth).toBeLessThan(64 * MIB);
    // The client ended the answer: the server wrote far less than 300 MB.
    expect(sent.bytes).toBeLessThan(64 * MIB);
  });

  it('gives up a list without end at maxSubscribers: the process lives, onError says why, no partial copy', async () => {
    let pages = 0;
    const base = await standIn((path, _req, res) => {
      if (path !== '/v1/statuses') return json(res, { data: [], next: 'AQ' });
      pages += 1;
      const data = Array.from({ length: 1000 }, (_, i) => entry(pages * 1000 + i));
      json(res, { data, entitlements: {}, next: `page${pages}`, feed_cursor: 'AQ' });
    });
    const { code, signal, result, output } = await runChild('pages', base);
    expect({ code, signal }, output).toEqual({ code: 0, signal: null });
    expect(result?.errors[0]).toBe(
      'Dunwall: GET /v1/statuses listed more than 100000 subscribers (maxSubscribers); the list is given up and the copy stays as it was',
    );
    expect(result?.status).toMatchObject({ status: 'active', source: 'starting' });
    expect(pages).toBeGreaterThanOrEqual(101);
    expect(result?.peakHeapGrowth).toBeLessThan(160 * MIB);
  });

  it('gives up a list without end whose ids and links are as long as the copy takes, before the heap fills', async () => {
    let pages = 0;
    // A 255-character id outside Latin-1 (two bytes a character in memory), a 2,048-character link.
    const fat = (n: number) => ({
      processor_customer_id: `${String(n).padStart(9, '0')}${'ж'.repeat(246)}`,
      status: 'warning',
      lockout_at: '2030-01-01T00:00:00Z',
      pay_url: `https://invoice.stripe.com/i/${'y'.repeat(2048 - 29)}`,
    });
    const base = await standIn((path, _req, res) => {
      if (path !== '/v1/statuses') return json(res, { data: [], next: 'AQ' });
      pages += 1;
      const data = Array.from({ length: 1000 }, (_, i) => fat(pages * 1000 + i));
      json(res, { data, entitlements: {}, next: `page${pages}`, feed_cursor: 'AQ' });
    });
    const { code, signal, result, output } = await runChild('fat-pages', base);
    expect({ code, signal }, output).toEqual({ code: 0, signal: null });
    expect(result?.errors[0]).toBe(
      'Dunwall: GET /v1/statuses listed subscribers taking more than 51200000 bytes (maxSubscribers x 512: their ids and links are too long); the list is given up and the copy stays as it was',
    );
    expect(result?.status).toMatchObject({ status: 'active', source: 'starting' });
    // Given up at the 19th page: 18,457 subscribers of about 2,774 estimated bytes fill 51,200,000.
    expect(pages).toBeGreaterThanOrEqual(19);
    expect(pages).toBeLessThan(30);
    expect(result?.peakHeapGrowth).toBeLessThan(160 * MIB);
  });

  it('gives up a list of empty pages without end: the process lives, onError says why', async () => {
    let pages = 0;
    const base = await standIn((path, _req, res) => {
      if (path !== '/v1/statuses') return json(res, { data: [], next: 'AQ' });
      pages += 1;
      json(res, { data: [], entitlements: {}, next: `page${pages}`, feed_cursor: 'AQ' });
    });
    const { code, signal, result, output } = await runChild('empty-pages', base);
    expect({ code, signal }, output).toEqual({ code: 0, signal: null });
    expect(result?.errors[0]).toBe(
      'Dunwall: GET /v1/statuses gave 210 pages without an end (at most 210 with maxSubscribers 100000); the list is given up and the copy stays as it was',
    );
    // 210 asked before the list was given up (the list asked again after a backoff may add some).
    expect(pages).toBeGreaterThanOrEqual(210);
    expect(result?.status).toMatchObject({ status: 'active', source: 'starting' });
  });

  it("cuts a 300 MB answer to pageBootstrap: the page gets the copy's answer, onError says why", async () => {
    const sent = { bytes: 0 };
    const base = await standIn((path, _req, res) => {
      if (path === '/v1/statuses')
        return json(res, {
          data: [{ processor_customer_id: 'cus_1', status: 'lockout', pay_url: PAY_URL }],
          entitlements: {},
          next: null,
          feed_cursor: 'AQ',
        });
      if (path === '/v1/status-changes') return; // the long poll is held
      streamed(res, '{"status":"lockout","pay_url":"', 'x'.repeat(1024), 300 * MIB, sent);
    });
    const { code, signal, result, output } = await runChild('ask', base);
    expect({ code, signal }, output).toEqual({ code: 0, signal: null });
    expect(result?.errors).toEqual([
      'Dunwall: GET /v1/subscribers/:id/status answered more than 65536 bytes; not read further',
    ]);
    expect(result?.bootstrap?.bootstrap).toMatchObject({ status: 'lockout', pay_url: PAY_URL });
    expect(result?.peakHeapGrowth).toBeLessThan(64 * MIB);
    expect(sent.bytes).toBeLessThan(64 * MIB);
  });
});

describe('@dunwall/node: what a bounded read leaves the copy', () => {
  it('cuts a body that drips at requestTimeoutMs, the list and a page bootstrap alike', async () => {
    const closed: string[] = [];
    let listing = 'drip';
    const drips: NodeJS.Timeout[] = [];
    const base = await standIn((path, _req, res) => {
      if (path === '/v1/statuses' && listing === 'whole')
        return json(res, {
          data: [{ processor_customer_id: 'cus_1', status: 'lockout' }],
          entitlements: {},
          next: null,
          feed_cursor: 'AQ',
        });
      if (path === '/v1/status-changes') return;
      // Headers at once, then one byte every 20 ms, never the end.
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"data":[');
      const drip = setInterval(() => res.write(' '), 20);
      drips.push(drip);
      res.on('close', () => {
        clearInterval(drip);
        closed.push(path);
      });
    });
    try {
      const errors: Error[] = [];
      const dunwall = createDunwallWith(
        { baseUrl: base, secretKey: KEY, requestTimeoutMs: 300, onError: (e) => errors.push(e) },
        QUICK,
      );
      open.push(dunwall);
      await vi.waitFor(() => expect(errors.length).toBeGreaterThan(0), WAIT);
      expect(errors[0]?.message).toBe('Dunwall: GET /v1/statuses failed: the answer (200) was not whole within 300 ms');
      await vi.waitFor(() => expect(closed).toContain('/v1/statuses'), WAIT);
      expect(dunwall.status('cus_1').source).toBe('starting');
      listing = 'whole';
      await dunwall.ready(10_000);
      const before = errors.length;
      // The lookup drips too: the page gets the copy's answer within its bound.
      const page = await dunwall.pageBootstrap('cus_1', 300);
      expect(page.bootstrap).toMatchObject({ status: 'lockout' });
      expect(errors.slice(before).map((e) => e.message)).toEqual([
        'Dunwall: GET /v1/subscribers/:id/status failed: no answer within 300 ms',
      ]);
      await vi.waitFor(() => expect(closed).toContain('/v1/subscribers/cus_1/status'), WAIT);
    } finally {
      for (const drip of drips) clearInterval(drip);
    }
  });

  it('keeps the copy it has when the list read again is too big, and goes stale, never gating', async () => {
    let lists = 0;
    const sent = { bytes: 0 };
    const base = await standIn((path, _req, res) => {
      if (path === '/v1/statuses') {
        lists += 1;
        if (lists === 1)
          return json(res, {
            data: [{ processor_customer_id: 'cus_1', status: 'lockout' }],
            entitlements: {},
            next: null,
            feed_cursor: 'AQ',
          });
        return streamed(res, '{"data":[', `${JSON.stringify(entry(2))},`, 32 * MIB, sent);
      }
      json(res, { type: 'about:blank', status: 410, code: 'cursor_expired' }, 410);
    });
    const clock = new FakeClock();
    const errors: Error[] = [];
    const dunwall = createDunwallWith(
      { baseUrl: base, secretKey: KEY, maxAnswerBytes: 65_536, now: clock.now, onError: (e) => errors.push(e) },
      QUICK,
    );
    open.push(dunwall);
    await dunwall.ready(10_000);
    await vi.waitFor(
      () =>
        expect(errors.map((e) => e.message)).toContain(
          'Dunwall: GET /v1/statuses answered more than 65536 bytes (maxAnswerBytes); not read further, nothing of it applied',
        ),
      WAIT,
    );
    expect(sent.bytes).toBeLessThan(8 * MIB);
    expect(dunwall.status('cus_1')).toMatchObject({ status: 'lockout', source: 'feed' });
    expect(dunwall.status('cus_2').status).toBe('active');
    clock.advance(60_001);
    expect(dunwall.status('cus_1')).toMatchObject({ status: 'warning', source: 'stale' });
  });

  it('reads not a byte of an answer whose Content-Length is past maxAnswerBytes', async () => {
    const sent = { bytes: 0 };
    let closed = false;
    const base = await standIn((_path, _req, res) => {
      res.on('close', () => (closed = true));
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(32 * MIB) });
      const chunk = Buffer.alloc(65_536, 0x20);
      const pump = (): void => {
        while (sent.bytes < 32 * MIB && !res.destroyed) {
          sent.bytes += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        if (!res.destroyed) res.end();
      };
      pump();
    });
    const errors: Error[] = [];
    const dunwall = createDunwallWith(
      { baseUrl: base, secretKey: KEY, maxAnswerBytes: 65_536, onError: (e) => errors.push(e) },
      QUICK,
    );
    open.push(dunwall);
    await vi.waitFor(() => expect(errors.length).toBeGreaterThan(0), WAIT);
    expect(errors[0]?.message).toBe(
      'Dunwall: GET /v1/statuses answered more than 65536 bytes (maxAnswerBytes); not read further, nothing of it applied',
    );
    await vi.waitFor(() => expect(closed).toBe(true), WAIT);
    // What the sockets' buffers took before the client ended the answer, far from 32 MiB.
    expect(sent.bytes).toBeLessThan(8 * MIB);
    expect(dunwall.status('cus_1').source).toBe('starting');
  });

  it('applies no page of changes that would hold more than maxSubscribers, and goes stale', async () => {
    const base = await standIn((path, _req, res) => {
      if (path === '/v1/statuses')
        return json(res, {
          data: [entry(1), { processor_customer_id: 'cus_2', status: 'lockout' }],
          entitlements: {},
          next: null,
          feed_cursor: 'AQ',
        });
      json(res, {
        data: [entry(3), entry(4), { processor_customer_id: 'cus_2', status: 'active' }, entry(5)],
        next: 'Ag',
      });
    });
    const clock = new FakeClock();
    const errors: Error[] = [];
    const dunwall = createDunwallWith(
      { baseUrl: base, secretKey: KEY, maxSubscribers: 3, now: clock.now, onError: (e) => errors.push(e) },
      QUICK,
    );
    open.push(dunwall);
    await dunwall.ready(10_000);
    await vi.waitFor(() => expect(errors.length).toBeGreaterThan(0), WAIT);
    expect(errors[0]?.message).toBe(
      'Dunwall: GET /v1/status-changes would make the copy hold more than 3 subscribers (maxSubscribers); not applied',
    );
    expect(dunwall.status('cus_2')).toMatchObject({ status: 'lockout', source: 'feed' });
    expect(dunwall.status('cus_3').status).toBe('active');
    clock.advance(60_001);
    expect(dunwall.status('cus_2')).toMatchObject({ status: 'warning', source: 'stale' });
  });

  it('takes no lockout_at longer than an instant, and refuses bounds that cannot work', async () => {
    const base = await standIn((path, _req, res) => {
      if (path === '/v1/statuses')
        return json(res, {
          data: [
            {
              processor_customer_id: 'cus_1',
              status: 'warning',
              lockout_at: `2030-01-01T00:00:00Z (${'x'.repeat(4096)})`,
            },
          ],
          entitlements: {},
          next: null,
          feed_cursor: 'AQ',
        });
      json(res, { data: [], next: 'AQ' });
    });
    const errors: Error[] = [];
    const dunwall = createDunwallWith({ baseUrl: base, secretKey: KEY, onError: (e) => errors.push(e) }, QUICK);
    open.push(dunwall);
    await vi.waitFor(() => expect(errors.length).toBeGreaterThan(0), WAIT);
    expect(errors[0]?.message).toBe('Dunwall: GET /v1/statuses answered a page that is not a status list');
    const ok = { baseUrl: base, secretKey: KEY };
    expect(() => createDunwall({ ...ok, maxAnswerBytes: 0 })).toThrow(/maxAnswerBytes must be a positive whole number/);
    expect(() => createDunwall({ ...ok, maxSubscribers: 1.5 })).toThrow(
      /maxSubscribers must be a positive whole number/,
    );
  });
});
