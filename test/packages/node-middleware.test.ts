import type { Server } from 'node:http';
import { setImmediate as tick } from 'node:timers/promises';
import { serve } from '@hono/node-server';
import { serve as serveV1 } from '@hono/node-server-v1';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import type { Context } from 'hono';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDunwall } from '../../packages/node/src/index.js';
import {
  checkRequest,
  dunwallExpress,
  dunwallFastify,
  dunwallHono,
  withDunwall,
} from '../../packages/node/src/middleware/index.js';
import type { MiddlewareOptions } from '../../packages/node/src/middleware/index.js';
import type { Dunwall } from '../../packages/node/src/types.js';
import { closeServer, httpGet, listening, startService } from '../helpers/dunwall-service.js';
import type { Service } from '../helpers/dunwall-service.js';

/**
 * Each adapter in a real app of its framework on 127.0.0.1, asked over real sockets, with
 * the statuses of a real Dunwall (tenant, secret key, subscribers set by the admin API and
 * by Stripe's webhook) held by the real copy (createDunwall, following the feed): active and warning pass, lockout gets the 402 problem with pay_url
 * and lockout_at, a page load gets the 303 when redirectTo is set, exempt paths pass, a
 * customer() that throws, rejects or gives null passes, allow: ['active'] refuses warning.
 *
 * The app's routes: /api/projects (JSON), /projects (a page), /billing and /billing/invoices
 * (exempt in the first configuration), /logout. The customer is the X-Customer header here;
 * a real app takes it from its session.
 */

/** The customer() of a configuration, from the X-Customer header's value. */
type CustomerFrom = (value: string | undefined) => string | null | undefined | Promise<string | null | undefined>;

interface Config {
  customerFrom: CustomerFrom;
  allow?: MiddlewareOptions<unknown>['allow'];
  exempt?: string[];
  redirectTo?: string;
}

const CONFIGS = {
  /** Synchronous; "throw" throws. Exempt billing pages and logout, page loads sent to /billing. */
  main: {
    customerFrom: (v) => {
      if (v === 'throw') throw new Error('session store unreachable');
      return v ?? null;
    },
    exempt: ['/billing', '/billing/*', '/logout'],
    redirectTo: '/billing',
  },
  /** Only active customers; no redirect. */
  strict: { customerFrom: (v) => v, allow: ['active'] },
  /** Asynchronous; "reject" rejects, "null" resolves null. */
  async: {
    customerFrom: async (v) => {
      await tick();
      if (v === 'reject') throw new Error('session store unreachable');
      return v === 'null' ? null : v;
    },
  },
} satisfies Record<string, Config>;
type ConfigName = keyof typeof CONFIGS;

const header = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);
const PAGE = '<!doctype html><title>Projects</title>';

interface Running {
  port: number;
  close(): Promise<void>;
}

type Start = (dunwall: Dunwall, config: Config) => Promise<Running>;

const options = <Req>(config: Config, read: (req: Req) => string | undefined): MiddlewareOptions<Req> => ({
  customer: (req) => config.customerFrom(read(req)),
  ...(config.allow ? { allow: config.allow } : {}),
  ...(config.exempt ? { exempt: config.exempt } : {}),
  ...(config.redirectTo ? { redirectTo: config.redirectTo } : {}),
});

async function nodeServer(server: Server): Promise<Running> {
  return { port: await listening(server), close: () => closeServer(server) };
}

/** The routes of every app, as a Fetch API handler. */
async function fetchRoutes(request: Request): Promise<Response> {
  const path = new URL(request.url).pathname;
  if (path === '/api/projects' || path === '/api/inner') return Response.json({ projects: [] });
  if (path === '/projects') return new Response(PAGE, { headers: { 'content-type': 'text/html' } });
  if (path === '/billing' || path === '/billing/invoices' || path === '/logout') return new Response(`page ${path}`);
  return new Response('not found', { status: 404 });
}

/** A Hono app served by `@hono/node-server` 1.x, which sets Content-Length on the headers object a Response was given. */
async function honoApp(dunwall: Dunwall, config: Config): Promise<Hono> {
  const app = new Hono();
  app.use(
    dunwallHono(
      dunwall,
      options<Context>(config, (c) => c.req.header('x-customer')),
    ),
  );
  app.get('/api/projects', (c) => c.json({ projects: [] }));
  app.get('/api/inner', (c) => c.json({ projects: [] }));
  app.get('/projects', (c) => c.html(PAGE));
  for (const path of ['/billing', '/billing/invoices', '/logout']) app.get(path, (c) => c.text(`page ${path}`));
  return app;
}

const ADAPTERS: Record<string, Start> = {
  async express(dunwall, config) {
    const app = express();
    app.use(
      dunwallExpress(
        dunwall,
        options<express.Request>(config, (req) => header(req.headers['x-customer'])),
      ),
    );
    app.get('/api/projects', (_req, res) => {
      res.json({ projects: [] });
    });
    // Mounted under a prefix: exempt paths and the decision still see the full path.
    const inner = express.Router();
    inner.get('/inner', (_req, res) => {
      res.json({ projects: [] });
    });
    app.use('/api', inner);
    app.get('/projects', (_req, res) => {
      res.type('html').send(PAGE);
    });
    for (const path of ['/billing', '/billing/invoices', '/logout']) {
      app.get(path, (_req, res) => {
        res.send(`page ${path}`);
      });
    }
    return nodeServer(app.listen(0, '127.0.0.1'));
  },

  async fastify(dunwall, config) {
    const app = Fastify();
    // At the root, as fastify-plugin would: the hook applies to the root and every child scope.
    await app.register(dunwallFastify, {
      dunwall,
      ...options<{ headers: Record<string, string | string[] | undefined> }>(config, (req) =>
        header(req.headers['x-customer']),
      ),
    });
    app.get('/api/projects', async () => ({ projects: [] }));
    await app.register(async (child) => {
      child.get('/api/inner', async () => ({ projects: [] }));
    });
    app.get('/projects', async (_req, reply) => reply.type('text/html').send(PAGE));
    for (const path of ['/billing', '/billing/invoices', '/logout']) app.get(path, async () => `page ${path}`);
    await app.listen({ port: 0, host: '127.0.0.1' });
    return nodeServer(app.server);
  },

  async hono(dunwall, config) {
    const app = await honoApp(dunwall, config);
    return nodeServer(serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server);
  },

  async 'hono on @hono/node-server 1.x'(dunwall, config) {
    const app = await honoApp(dunwall, config);
    return nodeServer(serveV1({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server);
  },

  /** A route handler wrapped by withDunwall (Next.js's app/.../route.ts), served by a Fetch API runtime. */
  async withDunwall(dunwall, config) {
    const handler = withDunwall(
      dunwall,
      options<Request>(config, (r) => r.headers.get('x-customer') ?? undefined),
      fetchRoutes,
    );
    return nodeServer(serve({ fetch: (request) => handler(request), port: 0, hostname: '127.0.0.1' }) as Server);
  },

  /** The same, served by `@hono/node-server` 1.x. */
  async 'withDunwall on @hono/node-server 1.x'(dunwall, config) {
    const handler = withDunwall(
      dunwall,
      options<Request>(config, (r) => r.headers.get('x-customer') ?? undefined),
      fetchRoutes,
    );
    return nodeServer(serveV1({ fetch: (request) => handler(request), port: 0, hostname: '127.0.0.1' }) as Server);
  },

  /** checkRequest before the routes, as Next.js's middleware.ts runs. */
  async checkRequest(dunwall, config) {
    const opts = options<Request>(config, (r) => r.headers.get('x-customer') ?? undefined);
    const handler = async (request: Request) => (await checkRequest(dunwall, opts, request)) ?? fetchRoutes(request);
    return nodeServer(serve({ fetch: handler, port: 0, hostname: '127.0.0.1' }) as Server);
  },
};

const BROWSER = {
  accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8',
  'sec-fetch-mode': 'navigate',
};

let service: Service;
let dunwall: Dunwall;

beforeAll(async () => {
  service = await startService();
  // The real copy: it lists the tenant's non-active subscribers, then follows the status feed.
  dunwall = createDunwall({ baseUrl: service.baseUrl, secretKey: service.secretKey });
  await dunwall.ready();
});
afterAll(async () => {
  await dunwall?.close();
  await service?.close();
});

describe('the real service, as the copy sees it', () => {
  it('answers each subscriber as the tests expect', () => {
    const s = service.subscribers;
    expect(dunwall.status(s.active)).toMatchObject({ status: 'active', source: 'feed' });
    expect(dunwall.status(s.warning)).toMatchObject({ status: 'warning', pay_url: null, lockout_at: null });
    expect(dunwall.status(s.dunning)).toMatchObject({
      status: 'warning',
      pay_url: service.payUrls.dunning,
      lockout_at: service.lockoutAt,
    });
    expect(dunwall.status(s.lockout)).toMatchObject({
      status: 'lockout',
      pay_url: service.payUrls.lockout,
      lockout_at: null,
    });
    expect(dunwall.status(s.locked)).toMatchObject({ status: 'lockout', pay_url: null });
  });
});

describe.each(Object.keys(ADAPTERS))('%s, in a real app on loopback', (name) => {
  const start = ADAPTERS[name] as Start;
  const apps = {} as Record<ConfigName, Running>;

  beforeAll(async () => {
    for (const config of Object.keys(CONFIGS) as ConfigName[]) apps[config] = await start(dunwall, CONFIGS[config]);
  });
  afterAll(async () => {
    for (const app of Object.values(apps)) await app.close();
  });

  const ask = (
    config: ConfigName,
    path: string,
    customer: string | null,
    headers: Record<string, string> = {},
    method = 'GET',
  ) =>
    httpGet(apps[config].port, path, { ...(customer === null ? {} : { 'x-customer': customer }), ...headers }, method);

  function expectProblem(res: Awaited<ReturnType<typeof ask>>, payUrl: string | null, lockoutAt: string | null): void {
    expect(res.status, res.body).toBe(402);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(JSON.parse(res.body)).toEqual({
      type: 'about:blank',
      title: 'Payment Required',
      status: 402,
      code: 'billing_lockout',
      detail: expect.any(String),
      pay_url: payUrl,
      lockout_at: lockoutAt,
    });
  }

  it('lets active and warning customers through (the default allow), and requests with no customer', async () => {
    const s = service.subscribers;
    for (const customer of [s.active, s.warning, s.dunning, 'cus_never_seen', null]) {
      const res = await ask('main', '/api/projects', customer);
      expect(res.status, `${customer}: ${res.body}`).toBe(200);
      expect(JSON.parse(res.body)).toEqual({ projects: [] });
    }
  });

  it('refuses a lockout with 402 and the problem, pay_url included, on every route (a child scope, a mounted router)', async () => {
    expectProblem(await ask('main', '/api/projects', service.subscribers.lockout), service.payUrls.lockout, null);
    expectProblem(await ask('main', '/api/inner', service.subscribers.lockout), service.payUrls.lockout, null);
    expectProblem(await ask('main', '/api/projects', service.subscribers.locked), null, null);
    // A form post from a page is not a navigation that can be redirected with its body.
    expectProblem(
      await ask('main', '/projects', service.subscribers.lockout, BROWSER, 'POST'),
      service.payUrls.lockout,
      null,
    );
  });

  it('sends a page load to redirectTo with a 303; a fetch from the page keeps the 402', async () => {
    const loads: Record<string, string>[] = [BROWSER, { accept: BROWSER.accept }, { 'sec-fetch-mode': 'navigate' }];
    for (const headers of loads) {
      const res = await ask('main', '/projects', service.subscribers.lockout, headers);
      expect(res.status, res.body).toBe(303);
      expect(res.headers.location).toBe('/billing');
      expect(res.headers['cache-control']).toBe('no-store');
    }
    expectProblem(
      await ask('main', '/api/projects', service.subscribers.lockout, {
        accept: 'application/json',
        'sec-fetch-mode': 'cors',
      }),
      service.payUrls.lockout,
      null,
    );
    // Without redirectTo, a page load gets the 402 too.
    expectProblem(
      await ask('strict', '/projects', service.subscribers.lockout, BROWSER),
      service.payUrls.lockout,
      null,
    );
  });

  it('lets exempt paths through for a locked-out customer, but not a path that only looks exempt', async () => {
    for (const path of ['/billing', '/billing/invoices', '/logout']) {
      const res = await ask('main', path, service.subscribers.lockout, BROWSER);
      expect(res.status, `${path}: ${res.body}`).toBe(200);
      expect(res.body).toBe(`page ${path}`);
    }
    expectProblem(
      await ask('main', '/billing/../api/projects', service.subscribers.lockout),
      service.payUrls.lockout,
      null,
    );
    expectProblem(
      await ask('main', '/billing/%2e%2e/api/projects', service.subscribers.lockout),
      service.payUrls.lockout,
      null,
    );
  });

  it('fails open: a customer() that throws, rejects or gives null lets the request through', async () => {
    expect((await ask('main', '/api/projects', 'throw')).status).toBe(200);
    expect((await ask('async', '/api/projects', 'reject')).status).toBe(200);
    expect((await ask('async', '/api/projects', 'null')).status).toBe(200);
    // The asynchronous customer() still refuses a lockout.
    expectProblem(await ask('async', '/api/projects', service.subscribers.lockout), service.payUrls.lockout, null);
    expect((await ask('async', '/api/projects', service.subscribers.warning)).status).toBe(200);
  });

  it("allow: ['active'] refuses warning, with the scheduled lockout_at and the pay_url", async () => {
    expect((await ask('strict', '/api/projects', service.subscribers.active)).status).toBe(200);
    expectProblem(
      await ask('strict', '/api/projects', service.subscribers.dunning),
      service.payUrls.dunning,
      service.lockoutAt,
    );
    expectProblem(await ask('strict', '/api/projects', service.subscribers.warning), null, null);
  });

  it('answers HEAD like GET, without a body', async () => {
    const res = await ask('main', '/api/projects', service.subscribers.lockout, {}, 'HEAD');
    expect(res.status).toBe(402);
    expect(res.body).toBe('');
    const nav = await ask('main', '/projects', service.subscribers.lockout, BROWSER, 'HEAD');
    expect(nav.status).toBe(303);
  });
});

describe('fastify, hook: preHandler', () => {
  it('reads what an authentication preHandler gives, which an onRequest hook runs too early to see', async () => {
    const start = async (hook: 'onRequest' | 'preHandler') => {
      const app = Fastify();
      app.decorateRequest('customerId', null);
      // An authentication plugin that runs as a preHandler, at the root.
      app.addHook('preHandler', async (request) => {
        (request as unknown as { customerId: string | null }).customerId =
          header(request.headers['x-customer']) ?? null;
      });
      await app.register(dunwallFastify, {
        dunwall,
        hook,
        customer: (request) => (request as unknown as { customerId: string | null }).customerId,
      });
      app.get('/api/projects', async () => ({ projects: [] }));
      await app.listen({ port: 0, host: '127.0.0.1' });
      return app;
    };
    const pre = await start('preHandler');
    const early = await start('onRequest');
    try {
      const port = (app: typeof pre) => (app.server.address() as { port: number }).port;
      const refused = await httpGet(port(pre), '/api/projects', { 'x-customer': service.subscribers.lockout });
      expect(refused.status, refused.body).toBe(402);
      expect(JSON.parse(refused.body)).toMatchObject({ code: 'billing_lockout', pay_url: service.payUrls.lockout });
      expect((await httpGet(port(pre), '/api/projects', { 'x-customer': service.subscribers.warning })).status).toBe(
        200,
      );
      // In onRequest, the customer is not known yet: fail-open, let through.
      expect((await httpGet(port(early), '/api/projects', { 'x-customer': service.subscribers.lockout })).status).toBe(
        200,
      );
    } finally {
      await pre.close();
      await early.close();
    }
  });

  it('refuses a hook name it does not know, and a registration without the copy, when the app starts', async () => {
    const app = Fastify();
    await expect(
      app.register(dunwallFastify, { dunwall, hook: 'onSend' as 'onRequest', customer: () => null }),
    ).rejects.toThrow(/onRequest or preHandler/);
    const other = Fastify();
    await expect(
      other.register(dunwallFastify, { customer: () => null } as unknown as Parameters<typeof dunwallFastify>[1]),
    ).rejects.toThrow(/createDunwall/);
  });
});
