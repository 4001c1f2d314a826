import type { Server } from 'node:http';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { peerAddress } from './client-address.js';
import type { TrustedProxies } from './client-address.js';
import { problemAnswer } from './problems.js';
import type { ErrorCode } from './problems.js';

/**
 * Errors the HTTP parser meets before any route (a malformed request line, oversized
 * headers, a sender too slow): a problem on the socket, then the connection is closed.
 */
export function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const code: ErrorCode =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? 'headers_too_large'
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? 'request_timeout'
        : 'bad_request';
  const answer = problemAnswer(code);
  let head = `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status] ?? ''}\r\n`;
  for (let i = 0; i < answer.headers.length; i += 2)
    head += `${answer.headers[i] ?? ''}: ${answer.headers[i + 1] ?? ''}\r\n`;
  const body = Buffer.from(answer.body);
  socket.end(Buffer.concat([Buffer.from(`${head}Content-Length: ${body.length}\r\nConnection: close\r\n\r\n`), body]));
  // end() only half-closes: a peer that keeps its side open and drips bytes (slow loris)
  // would hold the descriptor for ever. It gets a moment to read the answer, then the
  // socket is destroyed.
  const linger = setTimeout(() => socket.destroy(), CLIENT_ERROR_LINGER_MS);
  linger.unref();
  socket.once('close', () => clearTimeout(linger));
}

/** How long a connection answered with a client error may stay open for its peer to read the answer. */
export const CLIENT_ERROR_LINGER_MS = 1_000;

/**
 * Open connections per address (IPv6: per /64): a browser holds about six to one origin, so
 * this leaves room for a few dozen browsers behind one NAT address holding theirs at once.
 */
export const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS = 256;

/** What the per-address connection cap has refused, for /metrics. */
export interface ConnectionStats {
  refused: number;
}

/**
 * Caps the connections one address holds open at once (IPv6 by its /64): past `max`, a new
 * connection is closed as it arrives, so that one host cannot hold every descriptor while
 * others wait. Trusted proxies are not capped (every client behind them shares their
 * address; the proxy caps its own clients). `max` 0: no cap.
 */
export function capConnectionsPerAddress(server: Server, max: number, trusted: TrustedProxies | null): ConnectionStats {
  const stats: ConnectionStats = { refused: 0 };
  if (max <= 0) return stats;
  const open = new Map<string, number>();
  server.on('connection', (socket: Socket) => {
    const raw = socket.remoteAddress;
    if (raw === undefined) return;
    if (trusted !== null && trusted.trusts(raw)) return;
    const address = peerAddress(socket);
    const held = open.get(address) ?? 0;
    if (held >= max) {
      stats.refused += 1;
      socket.destroy();
      return;
    }
    open.set(address, held + 1);
    socket.once('close', () => {
      const left = (open.get(address) ?? 1) - 1;
      if (left <= 0) open.delete(address);
      else open.set(address, left);
    });
  });
  return stats;
}

/** What a sweep of `closeIdleSockets` saw of one socket: its byte counts, and since when they have not moved. */
interface Activity {
  read: number;
  written: number;
  sinceMs: number;
}

/**
 * Destroys a socket after `idleMs` without a byte read or written, as `server.setTimeout`
 * does, but from one sweep every `intervalMs` over the open sockets (comparing their byte
 * counts with the last sweep's) instead of a timer re-armed on every read and write of every
 * socket: a silent socket goes at most `intervalMs` after its `idleMs`. `idleMs` 0: never.
 */
export function closeIdleSockets(server: Server, idleMs: number, intervalMs: number): void {
  if (idleMs <= 0) return;
  const sockets = new Map<Socket, Activity>();
  server.on('connection', (socket: Socket) => {
    if (socket.destroyed) return;
    sockets.set(socket, { read: socket.bytesRead, written: socket.bytesWritten, sinceMs: performance.now() });
    socket.once('close', () => sockets.delete(socket));
  });
  const sweep = (): void => {
    const nowMs = performance.now();
    for (const [socket, seen] of sockets) {
      const read = socket.bytesRead;
      const written = socket.bytesWritten;
      if (read !== seen.read || written !== seen.written) {
        seen.read = read;
        seen.written = written;
        seen.sinceMs = nowMs;
      } else if (nowMs - seen.sinceMs >= idleMs) {
        sockets.delete(socket);
        socket.destroy();
      }
    }
  };
  let timer: NodeJS.Timeout | null = null;
  server.on('listening', () => {
    timer ??= setInterval(sweep, Math.max(1, Math.min(intervalMs, idleMs))).unref();
  });
  server.on('close', () => {
    if (timer !== null) clearInterval(timer);
    timer = null;
  });
}
