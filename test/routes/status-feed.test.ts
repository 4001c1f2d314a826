import { request } from 'node:http';
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import pino from 'pino';
import type { IncomingHttpHeaders } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/http/app.js';
import type { App } from '../../src/http/app.js';
import type { FeedTimers, StatusFeedLimits } from '../../src/http/routes/statuses.js';
import { ReadModel } from '../../src/readmodel/index.js';
import { PolicyClock } from '../../src/runtime/policy-clock.js';
import { openDb, storeOver } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { availableEngines } from '../helpers/engines.js';
import type { Engine } from '../helpers/engines.js';
import { ADMIN_TOKEN, FakeClock, adminRequest } from '../helpers/harness.js';
import { Capture } from '../helpers/log-capture.js';
import { CSRF_HEADER, csrfTokenOf, SESSION_COOKIE } from '../../src/console/session.js';
import { portOf, socketRequest } from '../helpers/socket.js';
import type { SocketAnswer } from '../helpers/socket.js';
import { LEGACY_API, event, hostedInvoiceUrl, invoice, paymentIds, signed } from '../helpers/stripe-fixtures.js';
import { pruneUntil } from '../helpers/store-fixtures.js';

/**
 * The tenant's status feed through real sockets (docs/feed.md): list then follow, pages and
 * cursors, 400 and 410, the long poll woken by a write (never by a timer: the waits' time is
 * fake and only moves when a test moves it), Server-Sent Events, the bounds, tenant
 * isolation, a lockout the policy clock records, and two instances on one PostgreSQL.
 *
 * The routes are registered as the tenant API will mount them, behind a hook that resolves
 * the tenant: here a test hook reading the tenant's slug from a header.
 */
const engines = await availableEngines();
const SECRET = 'whsec_feed_tests_0123456789abcdef';
const DAY_MS = 86_400_000;
const quiet = { info() {}, warn() {} };

/** The waits' clock and timers: nothing fires until a test advances it. */
class ManualTimers implements FeedTimers {
  ms = 0;
  private id = 0;
  readonly pending = new Map<number, { at: number; fn: () => void }>();
  now = (): number => this.ms;
  after = (ms: number, fn: () => void): (() => void) => {
    const id = (this.id += 1);
    this.pending.set(id, { at: this.ms + ms, fn });
    return () => {
      this.pending.delete(id);
    };
  };
  /** Moves time on, firing every timer that falls due, in order. */
  advance(ms: number): void {
    this.ms += ms;
    for (;;) {
      const due = [...this.pending].filter(([, t]) => t.at <= this.ms).sort((a, b) => a[1].at - b[1].at)[0];
      if (due === undefined) return;
      this.pending.delete(due[0]);
      due[1].fn();
    }
  }
}

interface Instance {
  app: App;
  model: ReadModel;
  store: Store;
  timers: ManualTimers;
  close(): Promise<void>;
}

/** An instance as the server wires one: the feed under /v1, behind each tenant's secret key. */
async function instance(
  store: Store,
  clock: FakeClock,
  limits: Partial<StatusFeedLimits> = {},
  log?: Capture,
): Promise<Instance> {
  const model = await ReadModel.open(store.changes, { now: clock.now });
  const timers = new ManualTimers();
  const app = await buildApp({
    store,
    model,
    adminToken: ADMIN_TOKEN,
    now: clock.now,
    statusFeed: { timers, limits },
    ...(log === undefined ? {} : { logger: pino({ level: 'warn' }, log) }),
  });
  await app.ready();
  return {
    app,
    model,
    store,
    timers,
    async close() {
      await app.close();
      await model.close();
    },
  };
}

/** Each tenant's secret key (status:read), by slug: made when the tenant is. */
const keys = new Map<string, string>();

async function createKey(
  app: App,
  slug: string,
  fields: Record<string, unknown> = {},
): Promise<{ id: string; secret: string }> {
  const res = await adminRequest(app, 'POST', `/tenants/${slug}/keys`, {
    name: 'feed',
    scopes: ['status:read'],
    ...fields,
  });
  expect(res.statusCode, res.body).toBe(201);
  const key = res.json() as { id: string; secret_key: string };
  keys.set(slug, key.secret_key);
  return { id: key.id, secret: key.secret_key };
}

/** A console session opened with a tenant's secret key: its cookie, and the CSRF token its writes name. */
async function signIn(app: App, secret: string): Promise<{ cookie: string; csrf: string }> {
  const res = await app.inject({
    method: 'POST',
    url: '/console/api/session',
    headers: { host: '127.0.0.1', 'content-type': 'application/json' },
    payload: JSON.stringify({ credential: secret }),
  });
  expect(res.statusCode, res.body).toBe(201);
  const id = /dunwall_session=([^;]+)/.exec(String(res.headers['set-cookie']))?.[1] ?? '';
  return { cookie: `${SESSION_COOKIE}=${id}`, csrf: csrfTokenOf(id) };
}

/**
 * A client that asks for a stream and never reads a byte of it: the server's side of its
 * connection closes when the server cuts it, which `cut` says.
 */
async function neverReading(
  app: App,
  path: string,
  headers: Record<string, string>,
): Promise<{ socket: Socket; cut: Promise<void> }> {
  let serverSide: Socket | null = null;
  const cut = new Promise<void>((resolve) => {
    app.server.once('connection', (sock: Socket) => {
      serverSide = sock;
      sock.once('close', () => resolve());
    });
  });
  const port = await portOf(app);
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  socket.pause();
  const lines = Object.entries({ host: '127.0.0.1', accept: 'text/event-stream', ...headers }).map(
    ([k, v]) => `${k}: ${v}`,
  );
  socket.write(`GET ${path} HTTP/1.1\r\n${lines.join('\r\n')}\r\n\r\n`);
  await expect.poll(() => serverSide !== null).toBe(true);
  return { socket, cut };
}

/** A tenant's server's request headers: its secret key. */
function auth(slug: string): Record<string, string> {
  return { authorization: `Bearer ${keys.get(slug) ?? 'sk_live_missing'}` };
}

interface Change {
  cursor: string;
  processor_customer_id: string;
  status: string;
  lockout_at?: string;
  pay_url?: string;
  occurred_at: string;
}

interface SseEvent {
  id: string | null;
  event: string | null;
  data: string;
}

/** A Server-Sent Events client on a real socket: what it read, parsed as a browser would. */
function openStream(app: App, path: string, headers: Record<string, string>) {
  const state = {
    status: 0,
    headers: {} as IncomingHttpHeaders,
    raw: '',
    events: [] as SseEvent[],
    lastId: null as string | null,
    ended: false,
  };
  let buffer = '';
  const opened = portOf(app).then(
    (port) =>
      new Promise<void>((resolve, reject) => {
        const req = request(
          { host: '127.0.0.1', port, path, headers: { accept: 'text/event-stream', ...headers }, agent: false },
          (res) => {
            state.status = res.statusCode ?? 0;
            state.headers = res.headers;
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => {
              state.raw += chunk;
              buffer += chunk;
              let end = buffer.indexOf('\n\n');
              while (end >= 0) {
                const block = buffer.slice(0, end);
                buffer = buffer.slice(end + 2);
                const fields = { id: null as string | null, event: null as string | null, data: [] as string[] };
                for (const line of block.split('\n')) {
                  if (line.startsWith(':')) continue;
                  const [name, ...rest] = line.split(': ');
                  const value = rest.join(': ');
                  if (name === 'id') fields.id = value;
                  else if (name === 'event') fields.event = value;
                  else if (name === 'data') fields.data.push(value);
                }
                if (fields.id !== null) state.lastId = fields.id;
                if (fields.data.length > 0)
                  state.events.push({ id: fields.id, event: fields.event, data: fields.data.join('\n') });
                end = buffer.indexOf('\n\n');
              }
            });
            res.on('end', () => {
              state.ended = true;
            });
            res.on('error', () => {
              state.ended = true;
            });
            resolve();
          },
        );
        req.on('error', (err) => (state.ended ? resolve() : reject(err)));
        req.end();
        close = () => req.destroy();
      }),
  );
  let close = () => {};
  return { state, opened, close: () => close(), changes: () => state.events.map((e) => JSON.parse(e.data) as Change) };
}

describe.each(engines)('status feed routes ($name)', (engine: Engine) => {
  let opened: Awaited<ReturnType<Engine['open']>>;
  let s: Instance;
  const clock = new FakeClock();

  beforeAll(async () => {
    opened = await engine.open();
    s = await instance(opened.store, clock, { maxStreamsPerTenant: 1, maxWaitsPerTenant: 2 });
  });
  afterAll(async () => {
    await s?.close();
    await opened?.cleanup();
  });

  const admin = (method: string, url: string, body?: unknown) => adminRequest(s.app, method, url, body);
  async function tenant(slug: string, fields: Record<string, unknown> = {}): Promise<void> {
    expect((await admin('POST', '/tenants', { slug, ...fields })).statusCode).toBe(201);
    await createKey(s.app, slug);
  }
  async function put(slug: string, customer: string, status: string): Promise<void> {
    expect((await admin('PUT', `/tenants/${slug}/subscribers/${customer}`, { status })).statusCode).toBe(200);
  }
  const get = (slug: string, path: string, headers: Record<string, string> = {}): Promise<SocketAnswer> =>
    socketRequest(s.app, 'GET', `/v1${path}`, { ...auth(slug), ...headers });
  const brief = (changes: readonly Change[]) => changes.map((c) => [c.processor_customer_id, c.status]);

  async function listAll(slug: string, limit: number) {
    const pages = [];
    let cursor: string | null = null;
    do {
      const res = await get(slug, `/statuses?limit=${limit}${cursor === null ? '' : `&cursor=${cursor}`}`);
      expect(res.statusCode).toBe(200);
      const page = res.json() as {
        data: { processor_customer_id: string; status: string }[];
        next: string | null;
        feed_cursor: string;
        entitlements: Record<string, boolean>;
      };
      pages.push(page);
      cursor = page.next;
    } while (cursor !== null);
    return pages;
  }

  it('lists the non-active subscribers with the entitlements, then follows every change from feed_cursor', async () => {
    await tenant('list-a');
    await put('list-a', 'cus_1', 'warning');
    await put('list-a', 'cus_2', 'active');
    await put('list-a', 'cus_3', 'lockout');
    const res = await get('list-a', '/statuses');
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const list = res.json() as { data: unknown[]; entitlements: unknown; next: string | null; feed_cursor: string };
    expect(list).toEqual({
      data: [
        { processor_customer_id: 'cus_1', status: 'warning' },
        { processor_customer_id: 'cus_3', status: 'lockout' },
      ],
      entitlements: { powered_by_watermark: true, custom_domain: false, downstream_webhooks: false },
      next: null,
      feed_cursor: expect.stringMatching(/^[A-Za-z0-9_-]+$/),
    });
    expect(Object.keys(list)).toEqual(['data', 'entitlements', 'next', 'feed_cursor']);
    await put('list-a', 'cus_1', 'lockout');
    await put('list-a', 'cus_3', 'active');
    await admin('DELETE', '/tenants/list-a/subscribers/cus_1');
    await put('list-a', 'cus_4', 'warning');
    const follow = await get('list-a', `/status-changes?after=${list.feed_cursor}`);
    expect(follow.statusCode).toBe(200);
    const page = follow.json() as { data: Change[]; next: string };
    expect(brief(page.data)).toEqual([
      ['cus_1', 'lockout'],
      ['cus_3', 'active'],
      ['cus_1', 'active'],
      ['cus_4', 'warning'],
    ]);
    expect(Object.keys(page.data[0] ?? {})).toEqual(['cursor', 'processor_customer_id', 'status', 'occurred_at']);
    expect(page.data[0]?.occurred_at).toBe(new Date(clock.ms).toISOString());
    // Nothing new after next; wait=0 answers at once.
    expect((await get('list-a', `/status-changes?after=${page.next}&wait=0`)).json()).toEqual({
      data: [],
      next: expect.any(String),
    });
    // A change's cursor resumes right after it.
    expect(brief((await get('list-a', `/status-changes?after=${page.data[1]?.cursor}&limit=1`)).json().data)).toEqual([
      ['cus_1', 'active'],
    ]);
  });

  it("pages the list, every page with the first page's feed_cursor, and pages the feed with nothing lost", async () => {
    await tenant('pages-a');
    for (let i = 0; i < 5; i += 1) await put('pages-a', `cus_p${i}`, i % 2 === 0 ? 'warning' : 'lockout');
    const pages = await listAll('pages-a', 2);
    expect(pages.map((p) => p.data.length)).toEqual([2, 2, 1]);
    expect(new Set(pages.map((p) => p.feed_cursor)).size).toBe(1);
    const from = pages[0]?.feed_cursor ?? '';
    const written: [string, string][] = [];
    for (let i = 0; i < 12; i += 1) {
      const status = ['lockout', 'active', 'warning'][i % 3] ?? 'warning';
      await put('pages-a', `cus_p${i % 5}`, status);
      written.push([`cus_p${i % 5}`, status]);
    }
    const read: Change[] = [];
    let after = from;
    for (let n = 0; n < 20; n += 1) {
      const page = (await get('pages-a', `/status-changes?after=${after}&limit=5`)).json() as {
        data: Change[];
        next: string;
      };
      read.push(...page.data);
      after = page.next;
      if (page.data.length === 0) break;
    }
    // put answers 200 with no change of status too: only the changes are in the feed.
    const changed = written.filter(([c, st], i) => {
      const before =
        [...written.slice(0, i)].reverse().find(([c2]) => c2 === c)?.[1] ??
        (Number(c.slice(5)) % 2 === 0 ? 'warning' : 'lockout');
      return before !== st;
    });
    expect(brief(read)).toEqual(changed);
  });

  it('refuses a cursor it did not hand out with 400 invalid_cursor naming the parameter, and one past retention with 410', async () => {
    await tenant('cursors-a');
    const list = (await get('cursors-a', '/statuses')).json() as { feed_cursor: string };
    const bad = async (path: string, parameter: string, headers: Record<string, string> = {}) => {
      const res = await get('cursors-a', path, headers);
      expect(res.statusCode, path).toBe(400);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.json()).toMatchObject({
        code: 'invalid_cursor',
        detail: expect.stringMatching(new RegExp(`^${parameter}: `)),
      });
    };
    await bad('/status-changes?after=nope!', 'after');
    await bad(`/status-changes?after=${'A'.repeat(9000)}`, 'after');
    await bad(`/status-changes?after=${list.feed_cursor}x`, 'after');
    await bad('/statuses?cursor=AAAA', 'cursor');
    // A feed cursor is not a list cursor, nor the other way.
    await bad(`/statuses?cursor=${list.feed_cursor}`, 'cursor');
    await put('cursors-a', 'cus_c1', 'warning');
    await put('cursors-a', 'cus_c2', 'warning');
    const next = ((await get('cursors-a', '/statuses?limit=1')).json() as { next: string }).next;
    await bad(`/status-changes?after=${next}`, 'after');
    await bad(`/status-changes?after=${list.feed_cursor}`, 'Last-Event-ID', {
      accept: 'text/event-stream',
      'last-event-id': 'garbage',
    });
    // The other parameters are checked as usual.
    expect((await get('cursors-a', `/status-changes?after=${list.feed_cursor}&wait=31`)).json()).toMatchObject({
      code: 'invalid_request',
    });
    expect((await get('cursors-a', `/status-changes?after=${list.feed_cursor}&limit=1001`)).json()).toMatchObject({
      code: 'invalid_request',
    });
    expect((await get('cursors-a', '/status-changes')).json()).toMatchObject({
      code: 'invalid_request',
      detail: 'after: is required',
    });

    // Retention prunes what the cursor had not seen: 410, list again.
    const expired = async () =>
      (await get('cursors-a', `/status-changes?after=${list.feed_cursor}`)).statusCode === 410;
    expect(await pruneUntil(s.store.maintenance, 'status_changes', expired)).toBeGreaterThan(0);
    const gone = await get('cursors-a', `/status-changes?after=${list.feed_cursor}`);
    expect(gone.statusCode).toBe(410);
    expect(gone.json()).toMatchObject({ code: 'cursor_expired', status: 410 });
    const again = (await get('cursors-a', '/statuses')).json() as { feed_cursor: string };
    expect((await get('cursors-a', `/status-changes?after=${again.feed_cursor}`)).statusCode).toBe(200);
  });

  it('long poll: answers the moment a write of its tenant is applied, not one of another tenant, and times out empty', async () => {
    await tenant('poll-a');
    await tenant('poll-b');
    const from = ((await get('poll-a', '/statuses')).json() as { feed_cursor: string }).feed_cursor;
    const fromB = ((await get('poll-b', '/statuses')).json() as { feed_cursor: string }).feed_cursor;
    const waiting = get('poll-a', `/status-changes?after=${from}&wait=30`);
    // Parked: the one timer is its safety poll; time never moves here.
    await expect.poll(() => s.timers.pending.size).toBe(1);
    // Another tenant's change wakes no one of this tenant.
    await put('poll-b', 'cus_b', 'lockout');
    expect(s.timers.pending.size).toBe(1);
    await put('poll-a', 'cus_a', 'warning');
    const answer = await waiting;
    expect(answer.statusCode).toBe(200);
    expect(brief(answer.json().data)).toEqual([['cus_a', 'warning']]);
    expect(s.timers.ms).toBe(0);
    expect(s.timers.pending.size).toBe(0);

    // Nothing comes: after `wait` seconds, an empty page whose cursor moved on.
    const empty = get('poll-a', `/status-changes?after=${answer.json().next}&wait=12`);
    await expect.poll(() => s.timers.pending.size).toBe(1);
    s.timers.advance(5_000); // a safety poll: reads, finds nothing, waits again
    await expect.poll(() => [...s.timers.pending.values()][0]?.at).toBe(10_000);
    s.timers.advance(5_000);
    await expect.poll(() => [...s.timers.pending.values()][0]?.at).toBe(12_000);
    s.timers.advance(2_000);
    const timedOut = await empty;
    expect(timedOut.statusCode).toBe(200);
    expect(timedOut.json()).toEqual({ data: [], next: expect.any(String) });
    expect(s.timers.pending.size).toBe(0);
    // B's feed has B's change only.
    expect(brief((await get('poll-b', `/status-changes?after=${fromB}`)).json().data)).toEqual([['cus_b', 'lockout']]);
    // And B's cursor read for A gives A's changes.
    expect(brief((await get('poll-a', `/status-changes?after=${fromB}`)).json().data)).toEqual([['cus_a', 'warning']]);
  });

  it('bounds the long polls waiting at once per tenant (429 with Retry-After), and frees the place of a client that left', async () => {
    await tenant('bound-a');
    await tenant('bound-b');
    const from = ((await get('bound-a', '/statuses')).json() as { feed_cursor: string }).feed_cursor;
    const fromB = ((await get('bound-b', '/statuses')).json() as { feed_cursor: string }).feed_cursor;
    const port = await portOf(s.app);
    const held = [0, 1].map(() => {
      const req = request({
        host: '127.0.0.1',
        port,
        path: `/v1/status-changes?after=${from}&wait=30`,
        headers: auth('bound-a'),
        agent: false,
      });
      req.on('error', () => {});
      req.end();
      return req;
    });
    await expect.poll(() => s.timers.pending.size).toBe(2);
    const refused = await get('bound-a', `/status-changes?after=${from}&wait=30`);
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toMatchObject({ code: 'too_many_streams' });
    expect(refused.headers['retry-after']).toBe('5');
    // Not waiting costs no place; another tenant has its own.
    expect((await get('bound-a', `/status-changes?after=${from}`)).statusCode).toBe(200);
    const other = get('bound-b', `/status-changes?after=${fromB}&wait=1`);
    await expect.poll(() => s.timers.pending.size).toBe(3);
    s.timers.advance(1_000);
    expect((await other).statusCode).toBe(200);
    for (const req of held) req.destroy();
    // The clients left: their waits end, their timers go, their places free.
    await expect.poll(() => s.timers.pending.size).toBe(0);
    const again = get('bound-a', `/status-changes?after=${from}&wait=1`);
    await expect.poll(() => s.timers.pending.size).toBe(1);
    s.timers.advance(1_000);
    expect((await again).statusCode).toBe(200);
  });

  it('Server-Sent Events: every change in order with its cursor as id, a heartbeat carrying the position, resumed by Last-Event-ID, ended by the client', async () => {
    await tenant('sse-a');
    await put('sse-a', 'cus_s0', 'warning');
    const from = ((await get('sse-a', '/statuses')).json() as { feed_cursor: string }).feed_cursor;
    await put('sse-a', 'cus_s0', 'lockout');
    const stream = openStream(s.app, `/v1/status-changes?after=${from}`, auth('sse-a'));
    await stream.opened;
    expect(stream.state.status).toBe(200);
    expect(stream.state.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    expect(stream.state.headers['cache-control']).toBe('no-store');
    // What was there already, then each write as it is applied.
    await expect.poll(() => stream.state.events.length).toBe(1);
    await put('sse-a', 'cus_s1', 'warning');
    await put('sse-a', 'cus_s0', 'active');
    await put('sse-a', 'cus_s1', 'lockout');
    await expect.poll(() => stream.state.events.length).toBe(4);
    expect(brief(stream.changes())).toEqual([
      ['cus_s0', 'lockout'],
      ['cus_s1', 'warning'],
      ['cus_s0', 'active'],
      ['cus_s1', 'lockout'],
    ]);
    expect(
      stream.state.events.every((e) => e.event === 'status' && e.id === (JSON.parse(e.data) as Change).cursor),
    ).toBe(true);
    // One stream per tenant here: a second one is refused while this one is open.
    const second = await get('sse-a', `/status-changes?after=${from}`, { accept: 'text/event-stream' });
    expect(second.statusCode).toBe(429);
    // Quiet: a comment every 15 s, carrying the position read last as the stream's id.
    const lastEvent = stream.state.lastId;
    expect(stream.state.raw).not.toContain('keep-alive');
    s.timers.advance(15_000);
    await expect.poll(() => stream.state.raw.includes(': keep-alive')).toBe(true);
    expect(stream.state.lastId).not.toBe(lastEvent);
    const resumeFrom = stream.state.lastId ?? '';
    expect((await get('sse-a', `/status-changes?after=${resumeFrom}`)).json().data).toEqual([]);
    // The client leaves: the stream's wait and timers end on the server.
    stream.close();
    await expect.poll(() => s.timers.pending.size).toBe(0);
    // A browser reconnecting sends the last id it got: the stream goes on from there.
    await put('sse-a', 'cus_s2', 'warning');
    const resumed = openStream(s.app, `/v1/status-changes?after=${from}`, {
      ...auth('sse-a'),
      'last-event-id': resumeFrom,
    });
    await resumed.opened;
    await expect.poll(() => resumed.state.events.length).toBe(1);
    expect(brief(resumed.changes())).toEqual([['cus_s2', 'warning']]);
    resumed.close();
    await expect.poll(() => s.timers.pending.size).toBe(0);
  });

  it('a lockout that falls due on the policy clock comes in the feed, with lockout_at and pay_url before it', async () => {
    await tenant('due-a', { policy: { grace_days: 3 } });
    expect((await admin('PATCH', '/tenants/due-a', { stripe_webhook_secret: SECRET })).statusCode).toBe(200);
    const nowS = () => Math.floor(clock.ms / 1000);
    const ids = paymentIds();
    const fixture = event(
      'invoice.payment_failed',
      invoice('cus_due', { api: LEGACY_API, ids, next_payment_attempt: null }),
      {
        created: nowS(),
        api: LEGACY_API,
      },
    );
    const { payload, signature } = signed(fixture, SECRET, nowS());
    const startMs = clock.ms - (clock.ms % 1000);
    const sent = await s.app.inject({
      method: 'POST',
      url: '/webhooks/stripe/due-a',
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      payload,
    });
    expect(sent.statusCode).toBe(200);
    const lockoutAt = new Date(startMs + 3 * DAY_MS).toISOString().replace('.000Z', 'Z');
    const list = (await get('due-a', '/statuses')).json() as { data: unknown[]; feed_cursor: string };
    expect(list.data).toEqual([
      {
        processor_customer_id: 'cus_due',
        status: 'warning',
        lockout_at: lockoutAt,
        pay_url: hostedInvoiceUrl(ids.invoice),
      },
    ]);
    const waiting = get('due-a', `/status-changes?after=${list.feed_cursor}&wait=30`);
    await expect.poll(() => s.timers.pending.size).toBe(1);
    // The grace ends; one instance's policy clock records it, on the service's (fake) clock.
    clock.ms = startMs + 3 * DAY_MS;
    const policy = new PolicyClock({ maintenance: s.store.maintenance, now: clock.now, log: quiet });
    await policy.tick();
    await policy.stop();
    expect(policy.counts.lockoutsRecorded).toBe(1);
    const answer = await waiting;
    expect(answer.statusCode, answer.body).toBe(200);
    expect(answer.json().data).toEqual([
      {
        cursor: expect.any(String),
        processor_customer_id: 'cus_due',
        status: 'lockout',
        pay_url: hostedInvoiceUrl(ids.invoice),
        occurred_at: new Date(clock.ms).toISOString(),
      },
    ]);
  });

  it("ends a stream and a long poll at their key's expiry (a timer on the service's clock), answers the poll 401, and frees the slot", async () => {
    await admin('POST', '/tenants', { slug: 'expiry-a' });
    const expiresAt = new Date(clock.ms - (clock.ms % 1000) + 20_000).toISOString();
    const key = await createKey(s.app, 'expiry-a', { expires_at: expiresAt });
    const from = ((await get('expiry-a', '/statuses')).json() as { feed_cursor: string }).feed_cursor;
    const stream = openStream(s.app, `/v1/status-changes?after=${from}`, auth('expiry-a'));
    await stream.opened;
    expect(stream.state.status).toBe(200);
    const poll = get('expiry-a', `/status-changes?after=${from}&wait=30`);
    // A heartbeat, a safety poll and an expiry for the stream; a safety poll and an expiry for the poll.
    await expect.poll(() => s.timers.pending.size).toBe(5);
    const replacement = await createKey(s.app, 'expiry-a');
    // The expiring key holds the tenant's one stream slot.
    expect(
      (
        await socketRequest(s.app, 'GET', `/v1/status-changes?after=${from}`, {
          authorization: `Bearer ${replacement.secret}`,
          accept: 'text/event-stream',
        })
      ).statusCode,
    ).toBe(429);
    // Just before its expiry nothing ends; at it, both do.
    const [wall0, timers0] = [clock.ms, s.timers.ms];
    const untilExpiry = Date.parse(expiresAt) - wall0;
    clock.ms = wall0 + untilExpiry - 1;
    s.timers.advance(untilExpiry - 1);
    expect(stream.state.ended).toBe(false);
    expect(s.timers.ms - timers0).toBe(untilExpiry - 1);
    clock.ms += 1;
    s.timers.advance(1);
    const answer = await poll;
    expect(answer.statusCode).toBe(401);
    expect(answer.json()).toMatchObject({ code: 'invalid_secret_key' });
    await expect.poll(() => stream.state.ended).toBe(true);
    expect(key.id).not.toBe(replacement.id);
    const next = openStream(s.app, `/v1/status-changes?after=${from}`, {
      authorization: `Bearer ${replacement.secret}`,
    });
    await next.opened;
    expect(next.state.status).toBe(200);
    next.close();
    await expect.poll(() => s.timers.pending.size).toBe(0);
  });

  it("a stream opened with a rotated key's old secret goes on through the overlap and ends at its end", async () => {
    await admin('POST', '/tenants', { slug: 'rotated-a' });
    const key = await createKey(s.app, 'rotated-a');
    const from = ((await get('rotated-a', '/statuses')).json() as { feed_cursor: string }).feed_cursor;
    const stream = openStream(s.app, `/v1/status-changes?after=${from}`, auth('rotated-a'));
    await stream.opened;
    expect(stream.state.status).toBe(200);
    // A heartbeat and a safety poll; the key never expires, so no expiry yet.
    await expect.poll(() => s.timers.pending.size).toBe(2);
    const rotated = await admin('POST', `/tenants/rotated-a/keys/${key.id}/rotate`, { overlap_seconds: 10 });
    expect(rotated.statusCode, rotated.body).toBe(200);
    // The rotation reaches the stream with the change log: its old secret now ends in 10 s.
    await expect.poll(() => s.timers.pending.size).toBe(3);
    expect(stream.state.ended).toBe(false);
    clock.ms += 10_000;
    s.timers.advance(10_000);
    await expect.poll(() => stream.state.ended).toBe(true);
    await expect.poll(() => s.timers.pending.size).toBe(0);
  });

  it('cuts a stream whose client never reads once the bytes the process holds for it pass the bound, logs it, and frees the slot', async () => {
    const log = new Capture();
    const bound = 64 * 1024;
    const slow = await instance(opened.store, clock, { maxStreamsPerTenant: 1, maxBufferedBytes: bound }, log);
    try {
      await adminRequest(slow.app, 'POST', '/tenants', { slug: 'slow-a' });
      await createKey(slow.app, 'slow-a');
      await slow.model.catchUp();
      const tenantId = slow.model.tenant('slow-a')?.id ?? 0;
      const from = (
        (await socketRequest(slow.app, 'GET', '/v1/statuses', auth('slow-a'))).json() as { feed_cursor: string }
      ).feed_cursor;
      // 12 MB of changes, more than the kernel's buffers of both ends take: the rest waits in the process.
      const payUrl = `https://invoice.stripe.com/i/${'p'.repeat(400)}`;
      await opened.db.query(
        `INSERT INTO status_changes (tenant_id, processor_customer_id, status, pay_url, occurred_at)
         SELECT $1, 'cus_slow_' || g, 'lockout', $2, now() FROM generate_series(1, 24000) AS g`,
        [tenantId, payUrl],
      );
      const reader = await neverReading(slow.app, `/v1/status-changes?after=${from}&limit=1000`, auth('slow-a'));
      await reader.cut;
      reader.socket.destroy();
      const cuts = log
        .entries()
        .filter((e) => e.msg === 'status feed stream: its client reads too slowly; the stream is closed');
      expect(cuts).toHaveLength(1);
      // One event of this flood is about 600 bytes (its pay link alone is 430 characters), a few
      // more as its customer id and cursor grow: under 1 KiB, and two of them are more than that.
      const event = 1024;
      // What the process held for the stream when it was cut: the bound, and the one event that passed it.
      expect(cuts[0]?.queued_bytes).toBeGreaterThan(bound);
      expect(cuts[0]?.queued_bytes).toBeLessThanOrEqual(bound + event);
      // Its slot is free again (a client resumes from where it read; here, past the flood).
      const now = (
        (await socketRequest(slow.app, 'GET', '/v1/statuses', auth('slow-a'))).json() as { feed_cursor: string }
      ).feed_cursor;
      const again = openStream(slow.app, `/v1/status-changes?after=${now}`, auth('slow-a'));
      await again.opened;
      expect(again.state.status).toBe(200);
      again.close();
    } finally {
      await slow.close();
    }
  });

  it('ends its long polls and streams when the app closes, instead of holding the shutdown', async () => {
    const other = await instance(opened.store, clock);
    try {
      await adminRequest(other.app, 'POST', '/tenants', { slug: 'closing-a' });
      await createKey(other.app, 'closing-a');
      await other.model.catchUp();
      const from = (
        (await socketRequest(other.app, 'GET', '/v1/statuses', auth('closing-a'))).json() as { feed_cursor: string }
      ).feed_cursor;
      const poll = socketRequest(other.app, 'GET', `/v1/status-changes?after=${from}&wait=30`, auth('closing-a'));
      const stream = openStream(other.app, `/v1/status-changes?after=${from}`, auth('closing-a'));
      await stream.opened;
      await expect.poll(() => other.timers.pending.size).toBe(3);
      await other.close();
      expect((await poll).json()).toEqual({ data: [], next: expect.any(String) });
      await expect.poll(() => stream.state.ended).toBe(true);
      expect(other.timers.pending.size).toBe(0);
    } finally {
      await other.close().catch(() => {});
    }
  });
});

describe.skipIf(!engines.some((e) => e.name === 'postgres'))(
  'status feed across two instances on one PostgreSQL',
  () => {
    const engine = engines.find((e) => e.name === 'postgres') as Engine;
    let opened: Awaited<ReturnType<Engine['open']>>;
    let storeB: Store;
    let a: Instance;
    let b: Instance;
    const clock = new FakeClock();

    beforeAll(async () => {
      opened = await engine.open();
      storeB = storeOver(await openDb(opened.target));
      a = await instance(opened.store, clock);
      b = await instance(storeB, clock);
    });
    afterAll(async () => {
      await a?.close();
      await b?.close();
      await storeB?.close();
      await opened?.cleanup();
    });

    it("a write through instance A answers a long poll held at instance B, woken by the change log's notification", async () => {
      expect((await adminRequest(a.app, 'POST', '/tenants', { slug: 'twin' })).statusCode).toBe(201);
      await createKey(a.app, 'twin');
      // The tenant and its new key reach B with the change log: B's copy must hold the key.
      await expect.poll(() => b.model.tenant('twin')?.secretKeys.length ?? 0).toBe(1);
      const from = ((await socketRequest(b.app, 'GET', '/v1/statuses', auth('twin'))).json() as { feed_cursor: string })
        .feed_cursor;
      const waiting = socketRequest(b.app, 'GET', `/v1/status-changes?after=${from}&wait=30`, auth('twin'));
      await expect.poll(() => b.timers.pending.size).toBe(1);
      expect(
        (await adminRequest(a.app, 'PUT', '/tenants/twin/subscribers/cus_twin', { status: 'lockout' })).statusCode,
      ).toBe(200);
      const answer = await waiting;
      expect(answer.statusCode).toBe(200);
      expect(answer.json().data.map((c: Change) => [c.processor_customer_id, c.status])).toEqual([
        ['cus_twin', 'lockout'],
      ]);
      // No safety poll fired: B's read model woke it.
      expect(b.timers.ms).toBe(0);
    });

    it("a key revoked through A ends every stream and long poll it opened on A and B, and the tenant's new key gets their slots", async () => {
      expect((await adminRequest(a.app, 'POST', '/tenants', { slug: 'revoked' })).statusCode).toBe(201);
      const old = await createKey(a.app, 'revoked');
      const fresh = await createKey(a.app, 'revoked');
      await expect.poll(() => b.model.tenant('revoked')?.secretKeys.length ?? 0).toBe(2);
      const oldAuth = { authorization: `Bearer ${old.secret}` };
      const freshAuth = { authorization: `Bearer ${fresh.secret}` };
      const from = ((await socketRequest(a.app, 'GET', '/v1/statuses', oldAuth)).json() as { feed_cursor: string })
        .feed_cursor;
      const path = `/v1/status-changes?after=${from}`;
      // Every stream slot of the tenant on both instances, and a long poll on each.
      const streams = [a, b].flatMap((at) => Array.from({ length: 20 }, () => openStream(at.app, path, oldAuth)));
      await Promise.all(streams.map((st) => st.opened));
      expect(streams.every((st) => st.state.status === 200)).toBe(true);
      for (const at of [a, b])
        expect(
          (await socketRequest(at.app, 'GET', path, { ...freshAuth, accept: 'text/event-stream' })).statusCode,
        ).toBe(429);
      // The old key still receives: a change reaches all 40 streams.
      expect(
        (await adminRequest(a.app, 'PUT', '/tenants/revoked/subscribers/cus_r1', { status: 'warning' })).statusCode,
      ).toBe(200);
      await expect.poll(() => streams.every((st) => st.state.events.length === 1)).toBe(true);
      const after = streams[0]?.state.lastId ?? '';
      const polls = [a, b].map((at) =>
        socketRequest(at.app, 'GET', `/v1/status-changes?after=${after}&wait=30`, oldAuth),
      );
      // A heartbeat and a safety poll a stream, a safety poll the long poll.
      await expect.poll(() => [a.timers.pending.size, b.timers.pending.size]).toEqual([41, 41]);

      const started = performance.now();
      expect((await adminRequest(a.app, 'DELETE', `/tenants/revoked/keys/${old.id}`)).statusCode).toBe(204);
      await expect.poll(() => streams.filter((st) => !st.state.ended).length, { timeout: 10_000 }).toBe(0);
      for (const answer of await Promise.all(polls)) {
        expect(answer.statusCode).toBe(401);
        expect(answer.json()).toMatchObject({ code: 'invalid_secret_key' });
      }
      const endedMs = performance.now() - started;
      console.info(
        `40 streams and 2 long polls on two instances ended ${endedMs.toFixed(0)} ms after the revocation was answered`,
      );
      // Ended by the change log, not by a timer: neither instance's time moved.
      expect([a.timers.ms, b.timers.ms]).toEqual([0, 0]);
      // A change after the revocation reaches none of them.
      expect(
        (await adminRequest(a.app, 'PUT', '/tenants/revoked/subscribers/cus_r1', { status: 'lockout' })).statusCode,
      ).toBe(200);
      expect(streams.every((st) => st.state.events.length === 1)).toBe(true);
      // The slots are free: the new key streams on both instances, and gets the change.
      for (const at of [a, b]) {
        const next = openStream(at.app, path, freshAuth);
        await next.opened;
        expect(next.state.status).toBe(200);
        await expect.poll(() => next.state.events.length).toBe(2);
        next.close();
      }
      await expect.poll(() => [a.timers.pending.size, b.timers.pending.size]).toEqual([0, 0]);
    });

    it("a console session's stream on B ends when the session signs out on A, and when its key is revoked", async () => {
      expect((await adminRequest(a.app, 'POST', '/tenants', { slug: 'session-feed' })).statusCode).toBe(201);
      const key = await createKey(a.app, 'session-feed');
      await expect.poll(() => b.model.tenant('session-feed')?.secretKeys.length ?? 0).toBe(1);
      const from = (
        (await socketRequest(a.app, 'GET', '/v1/statuses', auth('session-feed'))).json() as { feed_cursor: string }
      ).feed_cursor;
      const path = `/v1/status-changes?after=${from}`;

      const first = await signIn(a.app, key.secret);
      const signedOut = openStream(b.app, path, { cookie: first.cookie });
      await signedOut.opened;
      expect(signedOut.state.status).toBe(200);
      const signedOutPoll = socketRequest(b.app, 'GET', `${path}&wait=30`, { cookie: first.cookie });
      // A heartbeat, a safety poll, an expiry and a sign-out check for the stream; the same but the heartbeat for the poll.
      await expect.poll(() => b.timers.pending.size).toBe(7);
      const out = await a.app.inject({
        method: 'DELETE',
        url: '/console/api/session',
        headers: { host: '127.0.0.1', cookie: first.cookie, [CSRF_HEADER]: first.csrf },
      });
      expect(out.statusCode).toBe(204);
      // B learns the sign-out at its next check of the store (every 500 ms).
      expect(signedOut.state.ended).toBe(false);
      b.timers.advance(500);
      await expect.poll(() => signedOut.state.ended).toBe(true);
      const polled = await signedOutPoll;
      expect(polled.statusCode).toBe(401);
      expect(polled.json()).toMatchObject({ code: 'invalid_session' });
      await expect.poll(() => b.timers.pending.size).toBe(0);

      // A session whose key is revoked ends with the change log, no check of the store needed.
      const second = await signIn(a.app, key.secret);
      const keyRevoked = openStream(b.app, path, { cookie: second.cookie });
      await keyRevoked.opened;
      expect(keyRevoked.state.status).toBe(200);
      await expect.poll(() => b.timers.pending.size).toBe(4);
      const before = b.timers.ms;
      expect((await adminRequest(a.app, 'DELETE', `/tenants/session-feed/keys/${key.id}`)).statusCode).toBe(204);
      await expect.poll(() => keyRevoked.state.ended, { timeout: 10_000 }).toBe(true);
      expect(b.timers.ms).toBe(before);
      await expect.poll(() => b.timers.pending.size).toBe(0);
    });
  },
);
