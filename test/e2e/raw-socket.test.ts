import { connect } from 'node:net';
import type { Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_HTTP_LIMITS } from '../../src/http/app.js';
import type { App } from '../../src/http/app.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { ADMIN_TOKEN, buildAppWithModel } from '../helpers/harness.js';

/** Tight limits, so that the slow-sender cases end in well under a second each. */
const LIMITS = {
  headersTimeoutMs: 300,
  requestTimeoutMs: 600,
  checkIntervalMs: 50,
  maxHeaderBytes: 8 * 1024,
  keepAliveTimeoutMs: 1_000,
};

describe('malformed and slow HTTP on a raw socket', () => {
  let store: Store;
  let app: App;
  let port = 0;

  beforeAll(async () => {
    store = await openStore({ engine: 'embedded', dataDir: null });
    app = await buildAppWithModel({ store, adminToken: ADMIN_TOKEN, limits: LIMITS });
    await app.listen({ port: 0, host: '127.0.0.1' });
    port = (app.server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await app.close();
    await store.close();
  });

  /** Sends raw bytes, then collects what the server answers until it closes (bounded). */
  function exchange(
    chunks: string[],
    opts: { boundMs?: number } = {},
  ): Promise<{ text: string; closedAfterMs: number }> {
    return new Promise((resolve, reject) => {
      const started = Date.now();
      const socket: Socket = connect(port, '127.0.0.1');
      let text = '';
      const bound = setTimeout(() => {
        socket.destroy();
        reject(new Error(`the server held the connection for ${opts.boundMs ?? 5_000} ms: ${text}`));
      }, opts.boundMs ?? 5_000);
      socket.on('data', (d) => (text += d.toString('latin1')));
      socket.on('close', () => {
        clearTimeout(bound);
        resolve({ text, closedAfterMs: Date.now() - started });
      });
      socket.on('error', () => {});
      socket.on('connect', () => {
        for (const c of chunks) socket.write(c);
      });
    });
  }

  const statusOf = (text: string) => Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);

  it.each([
    ['a garbage request line', 'GARBAGE\r\n\r\n'],
    ['a header without a colon', 'GET /healthz HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n'],
    ['a bad Content-Length', 'POST /admin/v1/tenants HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n'],
    [
      'both Content-Length and chunked',
      'POST /admin/v1/tenants HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc',
    ],
    ['a NUL in the path', 'GET /api/subscriber-status/a\u0000b HTTP/1.1\r\nHost: x\r\n\r\n'],
  ])('answers %s with a 400 problem and closes', async (_name, raw) => {
    const { text } = await exchange([raw]);
    expect(statusOf(text)).toBe(400);
    expect(text).toContain('application/problem+json');
    expect(text).toContain('"code":"bad_request"');
  });

  it('answers headers over the limit with 431', async () => {
    const { text } = await exchange([`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(16 * 1024)}\r\n\r\n`]);
    expect(statusOf(text)).toBe(431);
    expect(text).toContain('"code":"headers_too_large"');
  });

  it('answers a URL longer than the header budget with 431, not a crash', async () => {
    const { text } = await exchange([
      `GET /api/subscriber-status/acme?x=${'a'.repeat(20 * 1024)} HTTP/1.1\r\nHost: x\r\n\r\n`,
    ]);
    expect(statusOf(text)).toBe(431);
  });

  it('cuts off a sender too slow with its headers (slow loris), and keeps serving others meanwhile', async () => {
    const slow = Array.from({ length: 20 }, () =>
      exchange(['GET /healthz HTTP/1.1\r\nHost: x\r\n'], { boundMs: 5_000 }),
    );
    const res = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(res.status).toBe(200);
    for (const s of await Promise.all(slow)) {
      expect([0, 408]).toContain(statusOf(s.text));
      expect(s.closedAfterMs).toBeLessThan(3_000);
    }
  });

  it('destroys the socket of a slow sender that keeps its side open and drips on after the 408', async () => {
    const closed = await new Promise<{ text: string; closed: boolean }>((resolve) => {
      const socket: Socket = connect({ port, host: '127.0.0.1', allowHalfOpen: true });
      let text = '';
      let drip: NodeJS.Timeout | undefined;
      const bound = setTimeout(() => {
        clearInterval(drip);
        socket.destroy();
        resolve({ text, closed: false });
      }, 4_000);
      socket.on('data', (d) => (text += d.toString('latin1')));
      socket.on('error', () => {});
      socket.on('close', () => {
        clearTimeout(bound);
        clearInterval(drip);
        resolve({ text, closed: true });
      });
      socket.on('connect', () => {
        socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
        // One byte every 50 ms, before and after the server's answer, never closing.
        drip = setInterval(() => socket.write('X'), 50);
      });
    });
    expect(statusOf(closed.text)).toBe(408);
    expect(closed.closed).toBe(true);
  });

  it('refuses more than one Authorization header, on the lookup and the admin API alike', async () => {
    const twice = (path: string, first: string) =>
      exchange([
        `GET ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${first}\r\nAuthorization: Bearer pk_second\r\nConnection: close\r\n\r\n`,
      ]);
    const lookup = await twice('/api/subscriber-status/acme?processor_customer_id=cus_1', 'pk_first');
    expect(statusOf(lookup.text)).toBe(401);
    expect(lookup.text).toContain('"code":"invalid_publishable_key"');
    const admin = await twice('/admin/v1/tenants', ADMIN_TOKEN);
    expect(statusOf(admin.text)).toBe(401);
    expect(admin.text).toContain('"code":"invalid_admin_token"');
    // One header, the same token: accepted.
    const once = await exchange([
      `GET /admin/v1/tenants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${ADMIN_TOKEN}\r\nConnection: close\r\n\r\n`,
    ]);
    expect(statusOf(once.text)).toBe(200);
  });

  it('cuts off a body that never completes', async () => {
    const { text, closedAfterMs } = await exchange(
      [
        `POST /admin/v1/tenants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${ADMIN_TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"slug":`,
      ],
      { boundMs: 5_000 },
    );
    expect([0, 408]).toContain(statusOf(text));
    expect(closedAfterMs).toBeLessThan(3_000);
  });

  it('sets every limit explicitly on the server by default', async () => {
    const plain = await buildAppWithModel({ store, adminToken: ADMIN_TOKEN });
    await plain.ready();
    expect({
      headersTimeout: plain.server.headersTimeout,
      requestTimeout: plain.server.requestTimeout,
      keepAliveTimeout: plain.server.keepAliveTimeout,
      maxHeaderSize: (plain.server as unknown as { maxHeaderSize?: number }).maxHeaderSize,
      maxRequestsPerSocket: plain.server.maxRequestsPerSocket,
    }).toEqual({
      headersTimeout: DEFAULT_HTTP_LIMITS.headersTimeoutMs,
      requestTimeout: DEFAULT_HTTP_LIMITS.requestTimeoutMs,
      keepAliveTimeout: DEFAULT_HTTP_LIMITS.keepAliveTimeoutMs,
      maxHeaderSize: DEFAULT_HTTP_LIMITS.maxHeaderBytes,
      maxRequestsPerSocket: DEFAULT_HTTP_LIMITS.maxRequestsPerSocket,
    });
    await plain.close();
  });

  it('still answers a well-formed request on a fresh socket', async () => {
    const { text } = await exchange(['GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n']);
    expect(statusOf(text)).toBe(200);
  });
});
