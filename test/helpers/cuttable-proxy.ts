import { createServer, connect } from 'node:net';
import type { AddressInfo, Socket } from 'node:net';
import { schemaScopedUrl } from './engines.js';

/**
 * A TCP relay on 127.0.0.1 between the service and PostgreSQL, which a test can cut and
 * restore: an outage seen from the service, without stopping a server that other test
 * files share.
 */
export interface CuttableProxy {
  readonly port: number;
  /** Connections the service opened (or tried to) through the proxy so far. */
  readonly connections: number;
  /** Resets every open connection; new ones are reset at once, as by a stopped server. */
  cut(): void;
  /** Relays new connections again. */
  restore(): void;
  /**
   * Stops relaying bytes without closing anything, as a frozen server (SIGSTOP) does:
   * connections stay open, new ones are accepted, nothing answers.
   */
  freeze(): void;
  /** Relays again whatever waited, as the server resuming (SIGCONT) would. */
  thaw(): void;
  close(): Promise<void>;
}

export async function cuttableProxy(target: { host: string; port: number }): Promise<CuttableProxy> {
  const open = new Set<Socket>();
  const pairs = new Set<[Socket, Socket]>();
  let connections = 0;
  let cut = false;
  let frozen = false;
  let waiting: Socket[] = [];

  const relay = (client: Socket) => {
    const upstream = connect(target.port, target.host);
    track(upstream);
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('close', () => {
      pairs.delete(pair);
      upstream.destroy();
    });
    upstream.on('close', () => client.destroy());
  };

  const track = (socket: Socket) => {
    open.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => open.delete(socket));
  };

  const server = createServer((client) => {
    connections += 1;
    client.on('error', () => {});
    if (cut) {
      client.resetAndDestroy();
      return;
    }
    track(client);
    if (frozen) {
      client.pause();
      waiting.push(client);
      return;
    }
    relay(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    port,
    get connections() {
      return connections;
    },
    cut() {
      cut = true;
      for (const socket of open) socket.resetAndDestroy();
    },
    restore() {
      cut = false;
    },
    freeze() {
      frozen = true;
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    },
    thaw() {
      frozen = false;
      for (const [client, upstream] of pairs) {
        client.pipe(upstream);
        upstream.pipe(client);
      }
      const queued = waiting;
      waiting = [];
      for (const client of queued) if (!client.destroyed) relay(client);
    },
    async close() {
      for (const socket of open) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * A fresh schema on the test server, reached through a cuttable proxy: `url` goes through
 * the proxy, `direct` does not. `close` closes the proxy and drops the schema.
 */
export async function proxiedSchema(
  prefix: string,
): Promise<{ url: string; direct: string; proxy: CuttableProxy; close(): Promise<void> }> {
  const scoped = await schemaScopedUrl(prefix);
  const target = new URL(scoped.url);
  const proxy = await cuttableProxy({ host: target.hostname, port: Number(target.port || 5432) });
  const via = new URL(scoped.url);
  via.hostname = '127.0.0.1';
  via.port = String(proxy.port);
  return {
    url: via.toString(),
    direct: scoped.url,
    proxy,
    async close() {
      await proxy.close();
      await scoped.drop();
    },
  };
}
