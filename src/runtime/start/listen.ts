import { createServer } from 'node:net';
import type { Logger } from 'pino';
import { serveMetrics } from '../../http/index.js';
import type { App, MetricsServer } from '../../http/index.js';
import type { Metrics } from '../../metrics/index.js';
import type { Config } from '../config.js';

/** The variables that name a listener's address, for its errors. */
export interface ListenVariables {
  host: string;
  port: string;
}
export const PUBLIC_LISTENER: ListenVariables = { host: 'HOST', port: 'PORT' };
export const METRICS_LISTENER: ListenVariables = { host: 'METRICS_HOST', port: 'METRICS_PORT' };

/** Why the service cannot listen on HOST:PORT, in the operator's terms; null when it can. */
export function listenProblem(
  err: NodeJS.ErrnoException,
  host: string,
  port: number,
  names: ListenVariables = PUBLIC_LISTENER,
): string | null {
  const { host: H, port: P } = names;
  switch (err.code) {
    case 'EADDRINUSE':
      return `${P} ${port} is already in use on ${host}: stop what listens there, or set ${P} to a free port`;
    case 'EACCES':
      return `${P} ${port} on ${host} is not allowed to this user (ports below 1024 need privileges): set ${P} to 1024 or above`;
    case 'EADDRNOTAVAIL':
      return `${H} ${host} is not an address of this machine: set ${H} to one of its addresses, 0.0.0.0 or ::`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `${H} ${host} does not resolve to an address: set ${H} to an IP address or a name this machine resolves`;
    default:
      return null;
  }
}

/**
 * Binds HOST:PORT for a moment, before the store starts and before any worker is forked: a
 * port in use or a host that is not this machine's is reported at once, naming the variable.
 */
export async function checkListen(
  host: string,
  port: number,
  names: ListenVariables = PUBLIC_LISTENER,
): Promise<string | null> {
  if (port === 0) return null;
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) =>
      resolve(listenProblem(err, host, port, names) ?? `cannot listen on ${host}:${port}: ${err.message}`),
    );
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve(null)));
  });
}

/** An error of listening, in the operator's terms when it has some. */
function explained(err: NodeJS.ErrnoException, host: string, port: number, names?: ListenVariables): Error {
  const problem = listenProblem(err, host, port, names);
  return problem === null ? err : Object.assign(new Error(problem), { code: err.code });
}

/** The app on HOST:PORT; its URL, `localhost` for the IPv6 loopback. */
export async function listenPublic(app: App, config: Config): Promise<string> {
  const address = await app.listen({ port: config.port, host: config.host }).catch((err: NodeJS.ErrnoException) => {
    throw explained(err, config.host, config.port);
  });
  return address.replace('[::1]', 'localhost');
}

/** /metrics on METRICS_HOST:METRICS_PORT when METRICS_PORT is set; null: served on the app's port. */
export async function listenMetrics(
  config: Config,
  metrics: Metrics,
  text: (() => Promise<string>) | undefined,
  log: Logger,
): Promise<MetricsServer | null> {
  if (config.metricsPort === null) return null;
  const port = config.metricsPort;
  const server = await serveMetrics({
    host: config.metricsHost,
    port,
    contentType: metrics.registry.contentType,
    text: text ?? (() => metrics.registry.metrics()),
    onError: (err) => log.error({ err: { message: (err as Error).message } }, 'metrics scrape failed'),
  }).catch((err: NodeJS.ErrnoException) => {
    throw explained(err, config.metricsHost, port, METRICS_LISTENER);
  });
  log.info({ url: `${server.url}/metrics` }, 'metrics listener');
  return server;
}
