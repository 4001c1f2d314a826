import { connect } from 'node:net';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/http/app.js';
import { parseTrustedProxies } from '../../src/http/client-address.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { ADMIN_TOKEN, buildAppWithModel, harness } from '../helpers/harness.js';
import type { CreatedTenant, Harness } from '../helpers/harness.js';
import { availableEngines } from '../helpers/engines.js';
import { portOf, socketRequest } from '../helpers/socket.js';
import { event, invoice } from '../helpers/stripe-fixtures.js';
import { deliver } from '../helpers/webhook.js';

/**
 * Clients that try to cost the service its descriptors or its tenants their quotas. Socket
 * timeouts are Node's own timers, which a fake clock does not reach: the limits are tight,
 * so that each case ends in well under a second.
 */
const LIMITS = {
  headersTimeoutMs: 300,
  requestTimeoutMs: 600,
  checkIntervalMs: 50,
  keepAliveTimeoutMs: 5_000,
  maxConnectionsPerAddress: 5,
};
/** The hostile host: another loopback address, so that the test's own requests come from elsewhere. */
const HOSTILE = '127.0.0.2';

interface Held {
  socket: Socket;
  closed: Promise<{ afterMs: number; text: string }>;
}

/** Opens a connection from `from`; resolves once connected, with a promise of its close. */
function hold(port: number, from: string, first = ''): Promise<Held> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = connect({ port, host: '127.0.0.1', localAddress: from });
    let text = '';
    socket.on('data', (d: Buffer) => (text += d.toString('latin1')));
    socket.on('error', () => {});
    const closed = new Promise<{ afterMs: number; text: string }>((done) =>
      socket.on('close', () => done({ afterMs: Date.now() - started, text })),
    );
    socket.once('connect', () => {
      if (first) socket.write(first);
      resolve({ socket, closed });
    });
    socket.once('error', reject);
  });
}

const request = (path: string) => `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`;

describe('hostile connections on a raw socket', () => {
  let store: Store;
  let app: App;
  let port = 0;
  let key = '';

  beforeAll(async () => {
    store = await openStore({ engine: 'embedded', dataDir: null });
    app = await buildAppWithModel({ store, adminToken: ADMIN_TOKEN, limits: LIMITS });
    port = await portOf(app);
    const created = await app.inject({
      method: 'POST',
      url: '/admin/v1/tenants',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ slug: 'acme' }),
    });
    key = (created.json() as { publishable_key: string }).publishable_key;
  });
  afterAll(async () => {
    await app.close();
    await store.close();
  });

  const lookup = () =>
    socketRequest(app, 'GET', '/api/subscriber-status/acme?processor_customer_id=cus_1', {
      authorization: `Bearer ${key}`,
    });

  it('caps the connections one address holds open; other addresses are served, and a freed slot is used again', async () => {
    // An app of its own, whose header deadline is far longer than the steps below: a held
    // connection stays silent while they run, and on a loaded machine they outlasted the
    // file's tight deadline (the first held connection was answered 408). The cap is the
    // same; what is tested is the cap, not the deadline (the tests below test that).
    const capped = await buildAppWithModel({
      store,
      adminToken: ADMIN_TOKEN,
      limits: { ...LIMITS, headersTimeoutMs: 120_000, requestTimeoutMs: 120_000 },
    });
    const port = await portOf(capped);
    const lookup = () =>
      socketRequest(capped, 'GET', '/api/subscriber-status/acme?processor_customer_id=cus_1', {
        authorization: `Bearer ${key}`,
      });
    const held: Held[] = [];
    try {
      for (let i = 0; i < LIMITS.maxConnectionsPerAddress; i += 1) held.push(await hold(port, HOSTILE));
      // One more from the same address is closed as it arrives, unanswered.
      const extra = await hold(port, HOSTILE, request('/healthz'));
      const refused = await extra.closed;
      expect(refused.text).toBe('');
      // Everyone else is served meanwhile.
      expect((await lookup()).statusCode).toBe(200);
      // The held ones were accepted: each still answers.
      const first = held[0];
      if (!first) throw new Error('no connection held');
      first.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      expect((await first.closed).text).toMatch(/^HTTP\/1\.1 200 /);
      // Its slot is free again.
      const again = await hold(port, HOSTILE, 'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      expect((await again.closed).text).toMatch(/^HTTP\/1\.1 200 /);
    } finally {
      for (const h of held) h.socket.destroy();
      await capped.close();
    }
  });

  it('serves everyone else while one address drips bytes on many connections, and closes each dripper on time', async () => {
    // All at once, not one after the other: the server (in this process) accepts or refuses
    // them in the same turns of its loop, before any header deadline of theirs can pass. One
    // by one, on a loaded machine, the first were timed out before the last arrived, and their
    // freed slots went to later drippers.
    const opened = await Promise.all(
      Array.from({ length: 40 }, () =>
        hold(
          port,
          HOSTILE,
          'GET /api/subscriber-status/acme?processor_customer_id=cus_1 HTTP/1.1\r\nHost: x\r\nX-Slow: ',
        ).catch(() => null),
      ),
    );
    const drippers = opened.filter((d): d is Held => d !== null);
    const timers = drippers.map((d) => setInterval(() => d.socket.writable && d.socket.write('a'), 50));
    try {
      const answers = await Promise.all(Array.from({ length: 20 }, () => lookup()));
      expect(answers.map((a) => a.statusCode)).toEqual(Array(20).fill(200));
      const closes = await Promise.all(drippers.map((d) => d.closed));
      // Past the cap: closed at once, unanswered. Within it: a 408 at the header deadline,
      // and the socket destroyed soon after, though the peer keeps its side open and drips on.
      const answered = closes.filter((c) => c.text !== '');
      expect(answered.length).toBeLessThanOrEqual(LIMITS.maxConnectionsPerAddress);
      for (const c of answered) {
        expect(c.text).toMatch(/^HTTP\/1\.1 408 /);
        expect(c.afterMs).toBeLessThan(LIMITS.headersTimeoutMs + 2_000);
      }
    } finally {
      for (const t of timers) clearInterval(t);
      for (const d of drippers) d.socket.destroy();
    }
  });

  it('closes a kept-alive connection that trickles its next request, at the header deadline', async () => {
    const d = await hold(port, '127.0.0.3', request('/healthz') + 'GET /heal');
    const drip = setInterval(() => d.socket.writable && d.socket.write('t'), 50);
    try {
      const closed = await d.closed;
      expect(closed.text).toMatch(/^HTTP\/1\.1 200 [\s\S]*HTTP\/1\.1 408 /);
      expect(closed.afterMs).toBeLessThan(LIMITS.headersTimeoutMs + 2_000);
    } finally {
      clearInterval(drip);
    }
  });

  it('does not cap trusted proxies: every client behind them shares their address', async () => {
    const proxies = parseTrustedProxies('127.0.0.4');
    if (typeof proxies === 'string') throw new Error(proxies);
    const proxied = await buildAppWithModel({
      store,
      adminToken: ADMIN_TOKEN,
      limits: { maxConnectionsPerAddress: 2 },
      trustedProxies: proxies,
    });
    const proxiedPort = await portOf(proxied);
    try {
      const held = await Promise.all(Array.from({ length: 4 }, () => hold(proxiedPort, '127.0.0.4')));
      const extra = await hold(
        proxiedPort,
        '127.0.0.4',
        'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      );
      expect((await extra.closed).text).toMatch(/^HTTP\/1\.1 200 /);
      for (const h of held) h.socket.destroy();
      // Another address is capped all the same.
      const others = await Promise.all(Array.from({ length: 2 }, () => hold(proxiedPort, '127.0.0.5')));
      const third = await hold(
        proxiedPort,
        '127.0.0.5',
        'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      );
      expect((await third.closed).text).toBe('');
      for (const o of others) o.socket.destroy();
    } finally {
      await proxied.close();
    }
  });
});

const engines = await availableEngines();
const TIGHT = { lookupPerIp: 100, lookupPerTenant: 1_000, failuresPerIp: 3, adminPerIp: 100 };
const SECRET_A = 'whsec_hostile_aaaaaaaaaaaaaaaa';
const SECRET_B = 'whsec_hostile_bbbbbbbbbbbbbbbb';

describe.each(engines.slice(0, 1))('the Stripe webhook route against guessers and floods ($name)', (engine) => {
  let h: Harness;
  let acme: CreatedTenant;
  let secretReads = 0;
  let n = 0;
  const from = (i: number) => `203.0.113.${i}`;
  const post = (slug: string, address: string, signature = 't=1,v1=00') =>
    h.app.inject({
      method: 'POST',
      url: `/webhooks/stripe/${slug}`,
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      payload: '{}',
      remoteAddress: address,
    });
  const lookupFrom = (address: string) =>
    h.app.inject({
      method: 'GET',
      url: '/api/subscriber-status/acme?processor_customer_id=cus_1',
      headers: { authorization: `Bearer ${acme.publishable_key}` },
      remoteAddress: address,
    });
  const paid = () => {
    n += 1;
    return event('invoice.paid', invoice('cus_1', { status: 'paid' }), {
      created: Math.floor(h.clock.ms / 1000) - 1,
      id: `evt_hostile_${n}`,
    });
  };

  beforeAll(async () => {
    h = await harness(engine, { rateLimits: TIGHT });
    acme = await h.createTenant('acme');
    await h.createTenant('beta');
    await h.admin('PATCH', '/tenants/acme', { stripe_webhook_secret: SECRET_A });
    await h.admin('PATCH', '/tenants/beta', { stripe_webhook_secret: SECRET_B });
    const read = h.store.stripe.getStripeSigningSecrets.bind(h.store.stripe);
    h.store.stripe.getStripeSigningSecrets = async (slug) => {
      secretReads += 1;
      return read(slug);
    };
  });
  afterAll(() => h.close());

  it('counts unknown slugs against the address as the lookup does, and asks the database nothing for them', async () => {
    const reads = secretReads;
    for (let i = 0; i < TIGHT.failuresPerIp; i += 1) expect((await post(`nope-${i}`, from(1))).statusCode).toBe(404);
    expect(secretReads).toBe(reads);
    const refused = await post('nope-x', from(1));
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toMatchObject({ code: 'rate_limited' });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    // The address is refused on the lookup too, and on the webhook even for a real slug.
    expect((await lookupFrom(from(1))).statusCode).toBe(429);
    expect((await deliverFrom(h, 'acme', paid(), SECRET_A, from(1))).statusCode).toBe(429);
  });

  it('refuses the webhook to an address the lookup has refused for its failures', async () => {
    for (let i = 0; i < TIGHT.failuresPerIp; i += 1) {
      const res = await h.app.inject({
        method: 'GET',
        url: '/api/subscriber-status/nobody-co?processor_customer_id=cus_1',
        headers: { authorization: 'Bearer pk_guess' },
        remoteAddress: from(2),
      });
      expect(res.statusCode).toBe(404);
    }
    expect((await post('acme', from(2))).statusCode).toBe(429);
    expect((await post('unknown-co', from(2))).statusCode).toBe(429);
  });

  it("counts bad signatures against the address for that tenant only: one tenant's wrong secret cannot shut out the others", async () => {
    for (let i = 0; i < TIGHT.failuresPerIp; i += 1) expect((await post('acme', from(3))).statusCode).toBe(400);
    expect((await post('acme', from(3))).statusCode).toBe(429);
    expect((await deliverFrom(h, 'acme', paid(), SECRET_A, from(3))).statusCode).toBe(429);
    // The same address (Stripe's, say) still delivers to another tenant, and may look up.
    expect((await deliverFrom(h, 'beta', paid(), SECRET_B, from(3))).statusCode).toBe(200);
    expect((await lookupFrom(from(3))).statusCode).toBe(200);
    // A minute later the tenant's deliveries go through again.
    h.clock.advance(60_000);
    expect((await deliverFrom(h, 'acme', paid(), SECRET_A, from(3))).statusCode).toBe(200);
  });
});

/** `deliver`, from a given address. */
function deliverFrom(
  h: Harness,
  slug: string,
  fixture: Parameters<typeof deliver>[2],
  secret: string,
  address: string,
) {
  return deliver(h, slug, fixture, secret, { remoteAddress: address });
}
