import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { availableEngines } from '../helpers/engines.js';
import { harness } from '../helpers/harness.js';
import type { Harness } from '../helpers/harness.js';

/**
 * The console signs in over plain http, with a cookie without Secure, only for a browser on
 * this machine, as the socket's peer address says: never because of the Host header. The
 * service listens on every interface; requests reach it through loopback and through this
 * machine's own non-loopback address.
 */
const engines = await availableEngines();
/** This machine's first non-loopback IPv4 address: a socket from it is not loopback. */
const outside = Object.values(networkInterfaces())
  .flat()
  .find((i) => i !== undefined && i.family === 'IPv4' && !i.internal)?.address;

describe.each(engines)('Console loopback rule ($name)', (engine) => {
  let h: Harness;
  let port = 0;
  let key = '';

  beforeAll(async () => {
    h = await harness(engine);
    await h.createTenant('loop');
    const res = await h.admin('POST', '/tenants/loop/keys', { name: 'console', scopes: ['status:read'] });
    key = (res.json() as { secret_key: string }).secret_key;
    await h.model.catchUp();
    await h.app.listen({ port: 0, host: '0.0.0.0' });
    port = (h.app.server.address() as AddressInfo).port;
  });
  afterAll(() => h.close());

  /** A sign-in sent to `address` (the socket's peer is then the same machine's address), with these headers. */
  function signIn(
    address: string,
    headers: Record<string, string>,
  ): Promise<{ status: number; cookie: string; code: string | null }> {
    const body = JSON.stringify({ credential: key });
    return new Promise((resolve, reject) => {
      const req = request(
        {
          host: address,
          port,
          method: 'POST',
          path: '/console/api/session',
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers },
          timeout: 10_000,
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => {
            const parsed = JSON.parse(text) as { code?: string };
            resolve({
              status: res.statusCode ?? 0,
              cookie: String(res.headers['set-cookie'] ?? ''),
              code: parsed.code ?? null,
            });
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error('no answer in 10 s')));
      req.on('error', reject);
      req.end(body);
    });
  }

  it('signs in over plain http from loopback whatever the Host header says, with a cookie without Secure', async () => {
    for (const host of [`127.0.0.1:${port}`, 'console.example.com', 'dunwall.internal:8080']) {
      const res = await signIn('127.0.0.1', { host });
      expect(res.status, host).toBe(201);
      expect(res.cookie).toMatch(/HttpOnly/);
      expect(res.cookie).not.toMatch(/Secure/);
    }
  });

  it('refuses plain http from loopback when a proxy passed the request on', async () => {
    const proxied: Record<string, string>[] = [
      { 'x-forwarded-for': '203.0.113.7' },
      { forwarded: 'for=203.0.113.7' },
      { 'x-forwarded-proto': 'http' },
    ];
    for (const headers of proxied) {
      const res = await signIn('127.0.0.1', { host: 'localhost', ...headers });
      expect(res.status, JSON.stringify(headers)).toBe(403);
      expect(res.code).toBe('insecure_transport');
    }
  });

  it.skipIf(outside === undefined)(
    'refuses plain http from another address even with a Host header naming loopback',
    async () => {
      for (const host of ['localhost', `localhost:${port}`, `127.0.0.1:${port}`, '[::1]']) {
        const res = await signIn(outside as string, { host });
        expect(res.status, host).toBe(403);
        expect(res.code).toBe('insecure_transport');
        expect(res.cookie).toBe('');
      }
    },
  );
});
