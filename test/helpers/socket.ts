import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { IncomingHttpHeaders } from 'node:http';
import type { App } from '../../src/http/app.js';

/** An answer read off a real socket, shaped like `inject`'s so that tests can use either. */
export interface SocketAnswer {
  statusCode: number;
  headers: IncomingHttpHeaders;
  body: string;
  /** Untyped, as `inject`'s is: tests read the fields they assert. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  json(): any;
}

/** The app's port, listening on loopback from the first call on. */
export async function portOf(app: App): Promise<number> {
  if (!app.server.listening) await app.listen({ port: 0, host: '127.0.0.1' });
  return (app.server.address() as AddressInfo).port;
}

/**
 * One request through a real socket (the lookup's fast path answers there, `inject` never
 * reaches it), with `body` when given. Repeated headers are sent repeated. Bounded: a server
 * that does not answer in 10 s fails the test.
 */
export async function socketRequest(
  app: App,
  method: string,
  path: string,
  headers: Record<string, string | string[]> = {},
  body?: string,
): Promise<SocketAnswer> {
  const port = await portOf(app);
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers, agent: false, timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        resolve({
          statusCode: res.statusCode ?? 0,
          headers: res.headers,
          body,
          json: () => JSON.parse(body) as unknown,
        });
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer to ${method} ${path} in 10 s`)));
    req.on('error', reject);
    req.end(body);
  });
}

/** A port free on loopback now, for a process a test starts that must be told its port. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
