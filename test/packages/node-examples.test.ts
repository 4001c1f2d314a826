import { readdirSync, readFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { serve } from '@hono/node-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computeHmac } from '../../src/domain/hmac.js';
import type { DunwallCopy } from '../../packages/node/src/types.js';
import { ADMIN_TOKEN } from '../helpers/harness.js';
import { closeServer, httpGet, listening, startService } from '../helpers/dunwall-service.js';
import type { Service } from '../helpers/dunwall-service.js';

/**
 * docs/servers.md's examples, as the page shows them: each code block marked with its file
 * is that file, byte for byte, and each file runs here, against a real Dunwall through the
 * real copy (`createDunwall`, following the status feed), each app on loopback, asked over
 * real sockets with a signed-in customer's session cookie.
 */
const DOC = readFileSync(new URL('../../docs/servers.md', import.meta.url), 'utf8');
const EXAMPLES = new URL('../../docs/examples/', import.meta.url);
/** The sign-in stand-in the page does not show (it is the reader's own). */
const NOT_SHOWN = ['session.ts'];

/** The page's code blocks marked `<!-- docs/examples/NAME -->` on the line before the fence. */
function markedBlocks(): Map<string, string> {
  const blocks = new Map<string, string>();
  for (const m of DOC.matchAll(/<!-- docs\/examples\/(\S+) -->\n```ts\n([\s\S]*?)```\n/g)) {
    const [, name = '', code = ''] = m;
    if (blocks.has(name)) throw new Error(`docs/servers.md shows ${name} twice`);
    blocks.set(name, code);
  }
  return blocks;
}

describe('docs/servers.md', () => {
  it('shows every example file exactly as it is, and no example that is not a file', () => {
    const blocks = markedBlocks();
    const files = readdirSync(EXAMPLES).filter((f) => f.endsWith('.ts') && !NOT_SHOWN.includes(f));
    expect([...blocks.keys()].sort()).toEqual(files.sort());
    for (const [name, code] of blocks) expect(code, name).toBe(readFileSync(new URL(name, EXAMPLES), 'utf8'));
    // Every TypeScript block of the page is one of them.
    expect(DOC.match(/```ts\n/g)?.length).toBe(blocks.size);
  });
});

interface Running {
  port: number;
  close(): Promise<void>;
}

async function running(server: Server): Promise<Running> {
  return { port: await listening(server), close: () => closeServer(server) };
}

describe('the examples, run against a real Dunwall through createDunwall', () => {
  let service: Service;
  let dunwall: DunwallCopy;
  let openSession: (customerId: string) => string;
  const apps = new Map<string, Running>();
  const saved = {
    url: process.env.DUNWALL_URL,
    key: process.env.DUNWALL_SECRET_KEY,
    hmac: process.env.DUNWALL_HMAC_SECRET,
  };
  let hmacSecret = '';

  beforeAll(async () => {
    service = await startService();
    // What the examples' dunwall.ts reads when the server starts.
    process.env.DUNWALL_URL = service.baseUrl;
    process.env.DUNWALL_SECRET_KEY = service.secretKey;
    // The tenant's HMAC secret: a new one, as an operator rotates it.
    const rotated = await service.app.inject({
      method: 'POST',
      url: '/admin/v1/tenants/acme/rotate',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ key: 'hmac' }),
    });
    hmacSecret = String((rotated.json() as { hmac_secret: string }).hmac_secret);
    process.env.DUNWALL_HMAC_SECRET = hmacSecret;
    ({ dunwall } = await import('../../docs/examples/dunwall.js'));
    ({ openSession } = await import('../../docs/examples/session.js'));
    await dunwall.ready();

    const express = (await import('../../docs/examples/express.js')).app;
    apps.set('express', await running(express.listen(0, '127.0.0.1')));
    const fastify = (await import('../../docs/examples/fastify.js')).app;
    await fastify.listen({ port: 0, host: '127.0.0.1' });
    apps.set('fastify', { port: await listening(fastify.server), close: () => fastify.close() });
    const hono = (await import('../../docs/examples/hono.js')).app;
    apps.set('hono', await running(serve({ fetch: hono.fetch, port: 0, hostname: '127.0.0.1' }) as Server));
    // Next.js: its middleware, then the route handler it lets through, or a 404 as Next.js answers.
    const { middleware, config } = await import('../../docs/examples/next-middleware.js');
    const { GET } = await import('../../docs/examples/next-route.js');
    const { signedInCustomer } = await import('../../docs/examples/session.js');
    expect(config.runtime).toBe('nodejs');
    const next = async (request: Request) => {
      const stopped = await middleware(request);
      if (stopped !== undefined) return stopped;
      const path = new URL(request.url).pathname;
      if (path === '/api/projects' && request.method === 'GET') return GET(request);
      // app/api/me/route.ts, not wrapped: who is signed in.
      if (path === '/api/me' && request.method === 'GET')
        return Response.json(dunwall.identity(signedInCustomer(request.headers.get('cookie'))));
      if (path === '/billing') return new Response('Billing: pay the overdue invoice here.');
      return new Response('not found', { status: 404 });
    };
    apps.set('next', await running(serve({ fetch: next, port: 0, hostname: '127.0.0.1' }) as Server));
  });

  afterAll(async () => {
    for (const app of apps.values()) await app.close();
    await dunwall?.close();
    await service?.close();
    process.env.DUNWALL_URL = saved.url;
    process.env.DUNWALL_SECRET_KEY = saved.key;
    process.env.DUNWALL_HMAC_SECRET = saved.hmac;
  });

  const BROWSER = { accept: 'text/html,application/xhtml+xml,*/*;q=0.8', 'sec-fetch-mode': 'navigate' };
  const ask = (name: string, path: string, customer: string | null, headers: Record<string, string> = {}) =>
    httpGet(apps.get(name)?.port ?? 0, path, {
      ...(customer === null ? {} : { cookie: openSession(customer) }),
      ...headers,
    });

  it.each(['express', 'fastify', 'hono', 'next'])(
    '%s: lets active and warning customers through, refuses a lockout, sends its page loads to /billing',
    async (name) => {
      const s = service.subscribers;
      for (const customer of [s.active, s.warning, s.dunning, null]) {
        const res = await ask(name, '/api/projects', customer);
        expect(res.status, `${customer}: ${res.body}`).toBe(200);
        expect(JSON.parse(res.body)).toEqual({ projects: [] });
      }
      const refused = await ask(name, '/api/projects', s.lockout);
      expect(refused.status, refused.body).toBe(402);
      expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(JSON.parse(refused.body)).toMatchObject({
        code: 'billing_lockout',
        pay_url: service.payUrls.lockout,
        lockout_at: null,
      });
      const page = await ask(name, '/api/projects', s.lockout, BROWSER);
      expect(page.status).toBe(303);
      expect(page.headers.location).toBe('/billing');
      const billing = await ask(name, '/billing', s.lockout, BROWSER);
      expect(billing.status).toBe(200);
      expect(billing.body).toBe('Billing: pay the overdue invoice here.');
    },
  );

  it.each(['express', 'fastify', 'hono', 'next'])(
    '%s: /api/me answers a locked-out customer who they are, signed, while every other API route refuses them',
    async (name) => {
      const s = service.subscribers;
      for (const customer of [s.lockout, s.locked, s.active]) {
        const me = await ask(name, '/api/me', customer);
        expect(me.status, `${customer}: ${me.body}`).toBe(200);
        expect(JSON.parse(me.body)).toEqual({ customer, hmac: computeHmac(hmacSecret, customer) });
      }
      expect(JSON.parse((await ask(name, '/api/me', null)).body)).toEqual({ customer: null, hmac: null });
      for (const customer of [s.lockout, s.locked])
        expect((await ask(name, '/api/projects', customer)).status).toBe(402);
    },
  );

  it('follows Dunwall: a customer locked out by the admin API is refused once the feed brings the change, and let in again when it pays', async () => {
    const customer = 'cus_examples_live';
    expect((await ask('express', '/api/projects', customer)).status).toBe(200);
    await service.setStatus(customer, 'lockout');
    await expect.poll(() => dunwall.status(customer).status, { timeout: 10_000 }).toBe('lockout');
    for (const name of apps.keys()) expect((await ask(name, '/api/projects', customer)).status, name).toBe(402);
    await service.setStatus(customer, 'active');
    await expect.poll(() => dunwall.status(customer).status, { timeout: 10_000 }).toBe('active');
    for (const name of apps.keys()) expect((await ask(name, '/api/projects', customer)).status, name).toBe(200);
  });
});
