/** What some load rows run beside the load: status changes and their deliveries, dripping connections. */
import { randomBytes } from 'node:crypto';
import { Agent, createServer } from 'node:http';
import { connect } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { slugOf } from './data.js';
import { call } from './http.js';

/** One secret key (status:read) per tenant, through the admin API: the seed holds none. */
export async function createSecretKeys(
  url: string,
  adminToken: string,
  tenants: readonly number[],
): Promise<Map<number, string>> {
  const keys = new Map<number, string>();
  for (const num of tenants) {
    const res = await fetch(`${url}/admin/v1/tenants/${slugOf(num)}/keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bench', scopes: ['status:read'] }),
      signal: AbortSignal.timeout(10_000),
    });
    if (res.status !== 201) throw new Error(`secret key for ${slugOf(num)}: ${res.status} ${await res.text()}`);
    keys.set(num, ((await res.json()) as { secret_key: string }).secret_key);
  }
  return keys;
}

/**
 * The writes and hooks rows' background: a tenant on a tier with downstream webhooks, with
 * an endpoint on a receiver in this process when `withEndpoint`, and `perSecond` status
 * changes a second through the admin API (each customer flips between warning and active),
 * until `stop`.
 */
export async function startHookTraffic(
  url: string,
  adminToken: string,
  perSecond: number,
  withEndpoint: boolean,
): Promise<{ stop(): Promise<{ changes: number; failedChanges: number; delivered: number }> }> {
  let delivered = 0;
  const receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      delivered += 1;
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const port = (receiver.address() as AddressInfo).port;
  const agent = new Agent({ keepAlive: true, maxSockets: 4 });
  const base = new URL(url);
  const headers = { authorization: `Bearer ${adminToken}` };
  const slug = `bench-hooks-${randomBytes(3).toString('hex')}`;
  const created = await call(
    agent,
    base,
    'POST',
    '/admin/v1/tenants',
    headers,
    JSON.stringify({ slug, tier: 'scale' }),
  );
  if (created.status !== 201) throw new Error(`hooks: tenant not created: ${created.status} ${created.body}`);
  if (withEndpoint) {
    const endpoint = await call(
      agent,
      base,
      'POST',
      `/admin/v1/tenants/${slug}/webhook-endpoints`,
      headers,
      JSON.stringify({ url: `http://127.0.0.1:${port}/hooks` }),
    );
    if (endpoint.status !== 201) throw new Error(`hooks: endpoint not created: ${endpoint.status} ${endpoint.body}`);
  }
  let changes = 0;
  let failedChanges = 0;
  let n = 0;
  const timer = setInterval(() => {
    const i = n;
    n += 1;
    const status = Math.floor(i / 100) % 2 === 0 ? 'warning' : 'active';
    call(
      agent,
      base,
      'PUT',
      `/admin/v1/tenants/${slug}/subscribers/cus_hook${i % 100}`,
      headers,
      JSON.stringify({ status }),
    )
      .then((a) => (a.status === 200 ? (changes += 1) : (failedChanges += 1)))
      .catch(() => (failedChanges += 1));
  }, 1000 / perSecond);
  return {
    async stop() {
      clearInterval(timer);
      // The last changes' deliveries: a poll interval and a little more.
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      agent.destroy();
      receiver.closeAllConnections();
      await new Promise((resolve) => receiver.close(resolve));
      return { changes, failedChanges, delivered };
    },
  };
}

/**
 * Opens `count` connections to `url` from the local address `from`, each sending the start
 * of a request and then one header byte a second, never finishing; a connection the
 * service closes is opened again (a determined attacker). `ready`: all opened once.
 */
export function startDrippers(
  url: URL,
  count: number,
  from: string,
): { ready: Promise<void>; stop(): { opened: number; closedByServer: number; maxOpen: number } } {
  const sockets = new Set<Socket>();
  const seen = { opened: 0, closedByServer: 0, maxOpen: 0 };
  let stopped = false;
  const open = (): Promise<void> =>
    new Promise((resolve) => {
      if (stopped) return resolve();
      const socket = connect({ host: url.hostname, port: Number(url.port), localAddress: from });
      sockets.add(socket);
      seen.opened += 1;
      seen.maxOpen = Math.max(seen.maxOpen, sockets.size);
      socket.on('error', () => {});
      socket.once('connect', () => {
        socket.write(`GET /api/subscriber-status/bench-t0001 HTTP/1.1\r\nHost: ${url.host}\r\nX-Drip: `);
        resolve();
      });
      socket.once('close', () => {
        sockets.delete(socket);
        resolve();
        if (stopped) return;
        seen.closedByServer += 1;
        // Back after a breath, as a loop in an attacker's script would be.
        setTimeout(() => void open(), 1_000).unref();
      });
    });
  const tick = setInterval(() => {
    for (const s of sockets) if (s.writable) s.write('a');
  }, 1_000);
  const ready = (async () => {
    for (let i = 0; i < count; i += 50) await Promise.all(Array.from({ length: Math.min(50, count - i) }, open));
  })();
  return {
    ready,
    stop() {
      stopped = true;
      clearInterval(tick);
      for (const s of sockets) s.destroy();
      return seen;
    },
  };
}
