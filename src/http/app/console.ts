import type { FastifyRequest } from 'fastify';
import { DEFAULT_CONSOLE_SESSION_TTL_MS, isLoopbackAddress } from '../../console/session.js';
import type { App } from '../app-instance.js';
import { FORWARDING_HEADERS } from '../client-address.js';
import type { TrustedProxies } from '../client-address.js';
import { consoleRoutes } from '../routes/console.js';
import type { AppContext } from './context.js';

/** Whether the request came over HTTPS: its own socket's, or a trusted TLS-terminating proxy's word. */
function viaHttpsBehind(trusted: TrustedProxies | null) {
  return (req: FastifyRequest) => {
    if (req.protocol === 'https') return true;
    if (trusted === null || !trusted.trusts(req.socket.remoteAddress ?? '')) return false;
    const proto = req.headers['x-forwarded-proto'];
    return proto === 'https' || /(^|[;,\s])proto=https\b/i.test(String(req.headers.forwarded ?? ''));
  };
}

/**
 * Straight from this machine: the socket's peer is loopback, and no proxy stands between
 * (a proxy on this machine passes on other machines' requests; a forwarding header says one
 * did). Never the Host header, which the client writes.
 */
function fromLoopbackBehind(trusted: TrustedProxies | null) {
  return (req: FastifyRequest) => {
    const peer = req.socket.remoteAddress;
    if (!isLoopbackAddress(peer)) return false;
    if (trusted !== null && trusted.trusts(peer ?? '')) return false;
    return (
      FORWARDING_HEADERS.every((h) => req.headers[h] === undefined) && req.headers['x-forwarded-proto'] === undefined
    );
  };
}

/** The console at /console: its files, and the sessions it opens. */
export async function consoleArea(app: App, ctx: AppContext): Promise<void> {
  const { deps, store, model, now, limiter, trusted, adminTokenSha256 } = ctx;
  await app.register(consoleRoutes, {
    assets: deps.console?.assets ?? null,
    sessions: store.sessions,
    model,
    now,
    adminTokenSha256,
    limiter,
    sessionTtlMs: deps.console?.sessionTtlMs ?? DEFAULT_CONSOLE_SESSION_TTL_MS,
    viaHttps: viaHttpsBehind(trusted),
    fromLoopback: fromLoopbackBehind(trusted),
  });
}
