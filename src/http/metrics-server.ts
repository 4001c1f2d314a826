import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** How long a scrape may take to be answered before its connection is cut. */
const SCRAPE_TIMEOUT_MS = 10_000;

export interface MetricsServer {
  url: string;
  close(): Promise<void>;
}

/**
 * `/metrics` on a listener of its own (METRICS_PORT), for a scraper on a private network:
 * the public port then does not serve it. Nothing else is answered here.
 */
export async function serveMetrics(opts: {
  host: string;
  port: number;
  contentType: string;
  text: () => Promise<string>;
  onError(err: unknown): void;
}): Promise<MetricsServer> {
  const server: Server = createServer(
    { requestTimeout: SCRAPE_TIMEOUT_MS, headersTimeout: SCRAPE_TIMEOUT_MS },
    (req, res) => {
      const path = (req.url ?? '').split('?')[0];
      if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
        res
          .writeHead(path === '/metrics' ? 405 : 404, { 'content-type': 'text/plain; charset=utf-8' })
          .end(path === '/metrics' ? 'method not allowed\n' : 'not found: this listener serves /metrics only\n');
        return;
      }
      opts.text().then(
        (body) => res.writeHead(200, { 'content-type': opts.contentType, 'cache-control': 'no-store' }).end(body),
        (err: unknown) => {
          opts.onError(err);
          res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('metrics unavailable\n');
        },
      );
    },
  );
  server.setTimeout(SCRAPE_TIMEOUT_MS);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: opts.host, port: opts.port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
