import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { computeHmac } from '../../src/domain/hmac.js';
import { ADMIN_TOKEN } from '../helpers/harness.js';
import { httpGet, startService } from '../helpers/dunwall-service.js';
import type { Service } from '../helpers/dunwall-service.js';
import { freePort } from '../helpers/socket.js';

/**
 * docs/servers.md's start-up file (docs/examples/server.ts: `await dunwall.ready()`, its
 * `.catch` that logs, then `listen`), run as a Node process of its own, as a team runs it:
 * with Dunwall reachable and the right key it enforces from the first request; with Dunwall
 * down, and with a wrong key, the process keeps running, says why, listens, and lets a
 * locked-out customer through (fail open). Nothing here waits for a duration: each step waits
 * for what the process prints.
 */
const ROOT = resolve(import.meta.dirname, '../..');

interface Started {
  child: ChildProcess;
  port: number;
  /** Everything the process wrote to stderr, so far. */
  stderr(): string;
}

const children: ChildProcess[] = [];

/** `node docs/examples/server.ts` (TypeScript through tsx, as the repository runs it), until it prints that it listens. */
async function startServer(env: Record<string, string>): Promise<Started> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'docs/examples/server.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', PORT: String(port), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  let err = '';
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  await new Promise<void>((done, fail) => {
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes(`listening on port ${port}`)) done();
    });
    child.on('exit', (code, signal) =>
      fail(new Error(`the server exited (${code ?? signal}) before it listened:\n${out}\n${err}`)),
    );
  });
  return { child, port, stderr: () => err };
}

describe('docs/examples/server.ts as its own process', () => {
  let service: Service;
  let hmacSecret = '';
  const token = randomBytes(18).toString('base64url');
  const sessions = (customer: string) => JSON.stringify({ [token]: customer });
  const cookie = { cookie: `session=${token}` };

  beforeAll(async () => {
    service = await startService();
    // The tenant's HMAC secret: a new one, as an operator rotates it.
    const rotated = await service.app.inject({
      method: 'POST',
      url: '/admin/v1/tenants/acme/rotate',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ key: 'hmac' }),
    });
    hmacSecret = String((rotated.json() as { hmac_secret: string }).hmac_secret);
  });
  afterEach(async () => {
    for (const child of children.splice(0)) {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((done) => child.once('exit', done));
        child.kill('SIGKILL');
        await exited;
      }
    }
  });
  afterAll(async () => {
    await service?.close();
  });

  it('with Dunwall reachable and the right key: listens once the list is read, and refuses a locked-out customer from the first request', async () => {
    const customer = service.subscribers.lockout;
    const server = await startServer({
      DUNWALL_URL: service.baseUrl,
      DUNWALL_SECRET_KEY: service.secretKey,
      DUNWALL_HMAC_SECRET: hmacSecret,
      EXAMPLE_SESSIONS: sessions(customer),
    });
    const refused = await httpGet(server.port, '/api/projects', cookie);
    expect(refused.status, refused.body).toBe(402);
    expect(JSON.parse(refused.body)).toMatchObject({ code: 'billing_lockout', pay_url: service.payUrls.lockout });
    // The identity route stays reachable, signed with the tenant's secret.
    const me = await httpGet(server.port, '/api/me', cookie);
    expect(me.status).toBe(200);
    expect(JSON.parse(me.body)).toEqual({ customer, hmac: computeHmac(hmacSecret, customer) });
    expect(server.stderr()).toBe('');
  });

  it('with Dunwall down: ready() gives up within its bound saying so, and the server listens anyway, failing open', async () => {
    const server = await startServer({
      DUNWALL_URL: `http://127.0.0.1:${await freePort()}`,
      DUNWALL_SECRET_KEY: service.secretKey,
      EXAMPLE_SESSIONS: sessions(service.subscribers.lockout),
    });
    expect(server.stderr()).toMatch(
      /^dunwall: starting without the list: DunwallReadyError: Dunwall at http:\/\/127\.0\.0\.1:\d+ could not be reached within 10000 ms \(.*ECONNREFUSED/,
    );
    const res = await httpGet(server.port, '/api/projects', cookie);
    expect(res.status, res.body).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ projects: [] });
    expect(JSON.parse((await httpGet(server.port, '/api/me', cookie)).body)).toEqual({
      customer: service.subscribers.lockout,
      hmac: null,
    });
    expect(server.child.exitCode).toBeNull();
  });

  it('with a wrong key: ready() gives up at once with the problem code, and the server listens, failing open, the key never printed', async () => {
    const wrongKey = `sk_test_${randomBytes(20).toString('hex')}`;
    const server = await startServer({
      DUNWALL_URL: service.baseUrl,
      DUNWALL_SECRET_KEY: wrongKey,
      EXAMPLE_SESSIONS: sessions(service.subscribers.lockout),
    });
    expect(server.stderr()).toMatch(
      /^dunwall: starting without the list: DunwallReadyError: Dunwall at http:\/\/127\.0\.0\.1:\d+ refused the secret key \(401 invalid_secret_key\)/,
    );
    expect(server.stderr()).not.toContain(wrongKey);
    const res = await httpGet(server.port, '/api/projects', cookie);
    expect(res.status, res.body).toBe(200);
    expect(server.child.exitCode).toBeNull();
  });
});
