import { createServer as createHttpServer } from 'node:http';
import type { Server } from 'node:http';
import { serve } from '@hono/node-server';
import { serve as serveV1 } from '@hono/node-server-v1';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createDunwallWith } from '../../packages/node/src/follower.js';
import { dunwallExpress, dunwallFastify, dunwallHono, withDunwall } from '../../packages/node/src/index.js';
import type { DunwallCopy, MiddlewareOptions } from '../../packages/node/src/index.js';
import { closeServer, httpGet, listening } from '../helpers/dunwall-service.js';
import type { Answer } from '../helpers/dunwall-service.js';
import { availableEngines, schemaScopedUrl } from '../helpers/engines.js';
import { FakeClock } from '../helpers/harness.js';
import { adminCall, killAllServices, postPaymentFailed, startServiceProcess } from '../helpers/service-process.js';
import type { ServiceProcess } from '../helpers/service-process.js';
import { freePort } from '../helpers/socket.js';

/**
 * Each framework's middleware on that framework's own server, on loopback, guarded by one copy
 * following a `dunwall serve` process on PostgreSQL: Express on `node:http`, Fastify's
 * `listen`, Hono on `@hono/node-server` (2.x and the 1.x line), and a Fetch API handler
 * (`withDunwall`) on `node:http` through a Request/Response bridge and on `@hono/node-server`
 * 1.x. A customer locked out by a signed Stripe event is refused with the 402 problem, the
 * active ones pass; Dunwall killed, the copy goes stale on its (fake) clock and every server
 * lets everyone in; Dunwall started again on its port, every server gates again.
 */
const engines = await availableEngines();
const TOKEN = 'node-frameworks-token-0123456789abcdefghijkl';
const STRIPE_SECRET = 'whsec_node_frameworks_0123456789abcdef';
const STALE_AFTER_MS = 60_000;
const WAIT = { timeout: 20_000, interval: 25 };

interface Running {
  port: number;
  close(): Promise<void>;
}

/** The customer is the X-Customer header here; an app takes it from its session. */
const fromHeader = (value: string | null | undefined) =>
  value === undefined || value === null || value === '' ? null : value;

async function onNode(server: Server): Promise<Running> {
  return { port: await listening(server), close: () => closeServer(server) };
}

/** A Fetch API handler on `node:http`: each request bridged to a `Request`, the `Response` written back. */
function fetchOnNodeHttp(handler: (request: Request) => Promise<Response>): Server {
  return createHttpServer((req, res) => {
    const headers = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      for (const v of Array.isArray(value) ? value : value === undefined ? [] : [value]) headers.append(name, v);
    }
    handler(new Request(`http://127.0.0.1${req.url ?? '/'}`, { method: req.method ?? 'GET', headers }))
      .then(async (response) => {
        const headers: Record<string, string> = {};
        response.headers.forEach((value, name) => (headers[name] = value));
        res.writeHead(response.status, headers);
        res.end(Buffer.from(await response.arrayBuffer()));
      })
      .catch((err: unknown) => {
        res.writeHead(500).end(String(err));
      });
  });
}

const projects = async (): Promise<Response> => Response.json({ projects: [] });

const SERVERS: Record<string, (dunwall: DunwallCopy) => Promise<Running>> = {
  async 'Express on node:http'(dunwall) {
    const app = express();
    app.use(dunwallExpress(dunwall, { customer: (req: express.Request) => fromHeader(req.get('x-customer')) }));
    app.get('/api/projects', (_req, res) => void res.json({ projects: [] }));
    return onNode(app.listen(0, '127.0.0.1'));
  },
  async "Fastify's listen"(dunwall) {
    const app = Fastify();
    await app.register(dunwallFastify, {
      dunwall,
      customer: (request) => fromHeader(request.headers['x-customer'] as string | undefined),
    });
    app.get('/api/projects', async () => ({ projects: [] }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    return { port: await listening(app.server), close: () => app.close() };
  },
  async 'Hono on @hono/node-server 2.x'(dunwall) {
    const app = new Hono();
    app.use(dunwallHono(dunwall, { customer: (c) => fromHeader(c.req.header('x-customer')) }));
    app.get('/api/projects', (c) => c.json({ projects: [] }));
    return onNode(serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server);
  },
  async 'Hono on @hono/node-server 1.x'(dunwall) {
    const app = new Hono();
    app.use(dunwallHono(dunwall, { customer: (c) => fromHeader(c.req.header('x-customer')) }));
    app.get('/api/projects', (c) => c.json({ projects: [] }));
    return onNode(serveV1({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server);
  },
  async 'the Fetch handler on node:http'(dunwall) {
    const options: MiddlewareOptions<Request> = {
      customer: (request) => fromHeader(request.headers.get('x-customer')),
    };
    return onNode(fetchOnNodeHttp(withDunwall(dunwall, options, projects)).listen(0, '127.0.0.1'));
  },
  async 'the Fetch handler on @hono/node-server 1.x'(dunwall) {
    const handler = withDunwall(
      dunwall,
      { customer: (request: Request) => fromHeader(request.headers.get('x-customer')) },
      projects,
    );
    return onNode(serveV1({ fetch: (request) => handler(request), port: 0, hostname: '127.0.0.1' }) as Server);
  },
};

describe.skipIf(!engines.some((e) => e.name === 'postgres'))(
  'every framework on its own server, following a Dunwall process that dies and comes back',
  () => {
    let scoped: Awaited<ReturnType<typeof schemaScopedUrl>>;
    let service: ServiceProcess;
    let port = 0;
    let dunwall: DunwallCopy | null = null;
    const servers = new Map<string, Running>();
    const clock = new FakeClock(Date.now());
    const errors: Error[] = [];

    async function admin(method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
      const res = await adminCall(service.base, TOKEN, method, path, body);
      const text = await res.text();
      if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
      return JSON.parse(text) as Record<string, unknown>;
    }

    /** A signed invoice.payment_failed with no retry left, as Stripe sends it: a lockout, with the invoice's pay link. */
    async function paymentFailed(customer: string): Promise<string> {
      const { status, payUrl } = await postPaymentFailed(service.base, 'acme', customer, STRIPE_SECRET);
      expect(status).toBe(200);
      return payUrl;
    }

    beforeAll(async () => {
      scoped = await schemaScopedUrl('dunwall_node_frameworks');
      port = await freePort();
      service = await startServiceProcess(scoped.url, TOKEN, { PORT: String(port) });
    }, 120_000);
    afterAll(async () => {
      for (const s of servers.values()) await s.close();
      await dunwall?.close();
      await killAllServices();
      await scoped?.drop();
    });

    const ask = (name: string, customer: string): Promise<Answer> =>
      httpGet(servers.get(name)?.port ?? 0, '/api/projects', { 'x-customer': customer });

    async function expectEveryServer(customer: string, status: number, payUrl?: string): Promise<void> {
      for (const name of servers.keys()) {
        const res = await ask(name, customer);
        expect(res.status, `${name}, ${customer}: ${res.body}`).toBe(status);
        if (status === 402) {
          expect(res.headers['content-type'], name).toMatch(/^application\/problem\+json/);
          expect(JSON.parse(res.body), name).toEqual({
            type: 'about:blank',
            title: 'Payment Required',
            status: 402,
            code: 'billing_lockout',
            detail: expect.any(String),
            pay_url: payUrl ?? null,
            lockout_at: null,
          });
        } else {
          expect(JSON.parse(res.body), name).toEqual({ projects: [] });
        }
      }
    }

    it(
      'refuses the locked-out customer with the 402 problem on each, lets everyone in once the copy is stale, and gates again after Dunwall restarts',
      { timeout: 180_000 },
      async () => {
        await admin('POST', '/tenants', { slug: 'acme' });
        await admin('PATCH', '/tenants/acme', { stripe_webhook_secret: STRIPE_SECRET });
        const { secret_key: secretKey } = (await admin('POST', '/tenants/acme/keys', {
          name: 'web servers',
          scopes: ['status:read'],
        })) as { secret_key: string };
        dunwall = createDunwallWith(
          {
            baseUrl: service.base,
            secretKey,
            now: clock.now,
            staleAfterMs: STALE_AFTER_MS,
            onError: (err) => errors.push(err),
          },
          // Retries in tens of milliseconds, so that the copy is back within moments of the restart.
          { backoff: { minMs: 50, maxMs: 400 } },
        );
        const copy = dunwall;
        await copy.ready(20_000);
        for (const [name, start] of Object.entries(SERVERS)) servers.set(name, await start(copy));

        // A signed Stripe event locks a customer out; the copy hears of it through the feed.
        const payUrl = await paymentFailed('cus_fw_locked');
        await vi.waitFor(
          () => expect(copy.status('cus_fw_locked')).toMatchObject({ status: 'lockout', source: 'feed' }),
          WAIT,
        );
        await expectEveryServer('cus_fw_locked', 402, payUrl);
        await expectEveryServer('cus_fw_active', 200);

        // Dunwall dies. Within staleAfterMs the copy's last word holds; past it, nobody is refused.
        service.child.kill('SIGKILL');
        await service.exited;
        await vi.waitFor(() => expect(errors.length).toBeGreaterThan(0), WAIT);
        await expectEveryServer('cus_fw_locked', 402, payUrl);
        clock.advance(STALE_AFTER_MS + 1);
        expect(copy.status('cus_fw_locked')).toMatchObject({ status: 'warning', source: 'stale', pay_url: payUrl });
        await expectEveryServer('cus_fw_locked', 200);
        await expectEveryServer('cus_fw_active', 200);

        // Dunwall again, on its port: the copy hears from it, and every server gates again.
        service = await startServiceProcess(scoped.url, TOKEN, { PORT: String(port) });
        await vi.waitFor(
          () => expect(copy.status('cus_fw_locked')).toMatchObject({ status: 'lockout', source: 'feed' }),
          WAIT,
        );
        await expectEveryServer('cus_fw_locked', 402, payUrl);
        await expectEveryServer('cus_fw_active', 200);
      },
    );
  },
);
