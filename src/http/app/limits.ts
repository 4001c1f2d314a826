import { DEFAULT_MAX_CONNECTIONS_PER_ADDRESS } from '../connections.js';

/**
 * What one connection may cost, set explicitly rather than left to defaults: a slow or
 * oversized request is cut off instead of holding the server.
 */
export interface HttpLimits {
  /** All of a request's headers (and its request line) must arrive within this. */
  headersTimeoutMs: number;
  /** The whole request, body included. */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeoutMs: number;
  /** A socket with no activity at all is destroyed after this. */
  idleSocketTimeoutMs: number;
  /** The request line and headers together. */
  maxHeaderBytes: number;
  /** How often the server checks the timeouts above. */
  checkIntervalMs: number;
  maxRequestsPerSocket: number;
  /** Connections one address may hold open at once (IPv6: one /64); 0: no cap. Trusted proxies are not capped. */
  maxConnectionsPerAddress: number;
}

export const DEFAULT_HTTP_LIMITS: HttpLimits = Object.freeze({
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  idleSocketTimeoutMs: 60_000,
  maxHeaderBytes: 16 * 1024,
  checkIntervalMs: 1_000,
  maxRequestsPerSocket: 10_000,
  maxConnectionsPerAddress: DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
});
