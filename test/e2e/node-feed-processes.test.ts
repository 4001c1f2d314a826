import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { openStore } from '../../src/store/index.js';
import { createDunwallWith } from '../../packages/node/src/follower.js';
import type { DunwallFeedError } from '../../packages/node/src/follower.js';
import type { Server } from 'node:http';
import express from 'express';
import { dunwallExpress } from '../../packages/node/src/index.js';
import type { Dunwall } from '../../packages/node/src/index.js';
import { availableEngines, schemaScopedUrl } from '../helpers/engines.js';
import { FakeClock } from '../helpers/harness.js';
import {
  REQUEST_TIMEOUT_MS,
  adminCall,
  killAllServices,
  postPaymentFailed,
  startServiceProcess,
} from '../helpers/service-process.js';
import type { ServiceProcess } from '../helpers/service-process.js';
import { pruneUntil } from '../helpers/store-fixtures.js';
import { freePort } from '../helpers/socket.js';

/**
 * `@dunwall/node` following one `dunwall serve` process (B) while the writes go to another
 * (A), both on one PostgreSQL: an admin's change and a signed Stripe event reach the copy
 * through the change log's notification; B killed, the copy goes stale on its (fake) clock and
 * never gates; B started again on its port, the copy resumes from its cursor and applies what
 * was changed meanwhile, without listing again; the changes it missed pruned, it lists again.
 */
const engines = await availableEngines();
const TOKEN = 'node-sdk-processes-token-0123456789abcdefghij';
const SECRET = 'whsec_node_sdk_processes_0123456789abcdef';
const DAY_MS = 86_400_000;
const STALE_AFTER_MS = 60_000;
const WAIT = { timeout: 20_000, interval: 25 };

describe.skipIf(!engines.some((e) => e.name === 'postgres'))(
  '@dunwall/node across two Dunwall processes on one PostgreSQL',
  () => {
    let scoped: Awaited<ReturnType<typeof schemaScopedUrl>>;
    let a: ServiceProcess;
    let b: ServiceProcess;
    let portB = 0;
    let dunwall: Dunwall | null = null;
    const onTeardown: (() => Promise<void>)[] = [];

    beforeAll(async () => {
      scoped = await schemaScopedUrl('dunwall_node_sdk');
      a = await startServiceProcess(scoped.url, TOKEN);
      portB = await freePort();
      b = await startServiceProcess(scoped.url, TOKEN, { PORT: String(portB) });
    }, 120_000);
    afterAll(async () => {
      for (const teardown of onTeardown) await teardown();
      await dunwall?.close();
      await killAllServices();
      await scoped?.drop();
    });

    async function onA(method: string, path: string, body?: unknown): Promise<unknown> {
      const res = await adminCall(a.base, TOKEN, method, path, body);
      const text = await res.text();
      if (res.status >= 300) throw new Error(`${method} ${path} on A: ${res.status} ${text}`);
      return text === '' ? null : (JSON.parse(text) as unknown);
    }

    /** A signed invoice.payment_failed (no retry left) posted to A, as Stripe sends it. */
    async function paymentFailedOnA(customer: string, created?: number): Promise<string> {
      const { status, payUrl } = await postPaymentFailed(a.base, 'acme', customer, SECRET, created);
      expect(status).toBe(200);
      return payUrl;
    }

    async function restartB(): Promise<void> {
      b = await startServiceProcess(scoped.url, TOKEN, { PORT: String(portB) });
    }

    async function killB(): Promise<void> {
      b.child.kill('SIGKILL');
      await b.exited;
    }

    it(
      'sees writes made on A, goes stale and never gates while B is down, resumes with no gap, and lists again once its cursor expired',
      { timeout: 180_000 },
      async () => {
        await onA('POST', '/tenants', { slug: 'acme', policy: { grace_days: 3 } });
        await onA('PATCH', '/tenants/acme', { stripe_webhook_secret: SECRET });
        await onA('POST', '/tenants', { slug: 'other' });
        await onA('PUT', '/tenants/other/subscribers/cus_p1', { status: 'lockout' });
        await onA('PUT', '/tenants/other/subscribers/cus_b_only', { status: 'lockout' });
        const { secret_key: secretKey } = (await onA('POST', '/tenants/acme/keys', {
          name: 'web servers',
          scopes: ['status:read'],
        })) as { secret_key: string };
        // B's read model learns of the key from the change log; the copy starts once B takes it.
        await vi.waitFor(async () => {
          const res = await fetch(`${b.base}/v1/subscribers/cus_x/status`, {
            headers: { authorization: `Bearer ${secretKey}` },
            signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
          });
          expect(res.status).toBe(200);
        }, WAIT);

        const clock = new FakeClock(Date.now());
        const errors: DunwallFeedError[] = [];
        const paths: string[] = [];
        dunwall = createDunwallWith(
          {
            baseUrl: b.base,
            secretKey,
            now: clock.now,
            staleAfterMs: STALE_AFTER_MS,
            onError: (err) => errors.push(err as DunwallFeedError),
          },
          {
            backoff: { minMs: 50, maxMs: 400 },
            fetch: (input, init) => {
              paths.push(new URL(String(input)).pathname);
              return fetch(input, init);
            },
          },
        );
        const copy = dunwall;
        const lists = () => paths.filter((p) => p === '/v1/statuses').length;
        await copy.ready(20_000);
        // The tenant's own API, an Express app on loopback, guarded by the copy: only active customers get in.
        const tenantApp = express();
        tenantApp.use(
          dunwallExpress(copy, {
            customer: (req) => req.headers['x-customer'] as string | undefined,
            allow: ['active'],
          }),
        );
        tenantApp.get('/api/projects', (_req, res) => void res.json({ projects: [] }));
        const server: Server = await new Promise((resolve) => {
          const s = tenantApp.listen(0, '127.0.0.1', () => resolve(s));
        });
        const apiCall = async (customer: string) => {
          const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/api/projects`, {
            headers: { 'x-customer': customer },
          });
          return { status: res.status, body: (await res.json()) as Record<string, unknown> };
        };
        onTeardown.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
        expect(copy.status('cus_p1')).toMatchObject({ status: 'active', source: 'feed' });

        // An admin's change on A, and a Stripe event on A: both reach the copy following B.
        await onA('PUT', '/tenants/acme/subscribers/cus_p1', { status: 'lockout' });
        await vi.waitFor(() => expect(copy.status('cus_p1').status).toBe('lockout'), WAIT);
        expect((await apiCall('cus_p2')).status).toBe(200);
        const payUrl = await paymentFailedOnA('cus_p2');
        await vi.waitFor(() => expect(copy.status('cus_p2').status).toBe('warning'), WAIT);
        // The signed Stripe event through A refuses the customer's next call on the tenant's app, with the way to pay.
        const refused = await apiCall('cus_p2');
        expect(refused.status).toBe(402);
        expect(refused.body).toMatchObject({ code: 'billing_lockout', pay_url: payUrl });
        const warning = copy.status('cus_p2');
        expect(warning).toMatchObject({
          pay_url: payUrl,
          source: 'feed',
          lockout_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
        });
        const lockoutAtMs = Date.parse(warning.lockout_at ?? '');
        expect(lockoutAtMs - Date.now()).toBeGreaterThan(3 * DAY_MS - 60_000);
        // The other tenant's subscribers never reach this key's copy.
        expect([copy.status('cus_b_only').status, copy.status('cus_p1').status]).toEqual(['active', 'lockout']);

        // B is killed: the copy answers from what it holds, then, past staleAfterMs on its clock, never gates.
        await killB();
        await vi.waitFor(() => expect(errors.length).toBeGreaterThan(0), WAIT);
        expect(copy.status('cus_p1')).toMatchObject({ status: 'lockout', source: 'feed' });
        clock.advance(STALE_AFTER_MS + 1);
        expect(copy.status('cus_p1')).toMatchObject({ status: 'warning', source: 'stale' });
        // A stale copy blocks nobody on the tenant's app.
        expect((await apiCall('cus_p1')).status).toBe(200);
        expect((await apiCall('cus_p2')).status).toBe(200);
        expect(copy.status('cus_p2')).toEqual({ ...warning, source: 'stale' });
        // Even once the scheduled lockout falls due by its clock.
        clock.ms = lockoutAtMs + 1;
        expect(copy.status('cus_p2')).toMatchObject({
          status: 'warning',
          source: 'stale',
          lockout_at: warning.lockout_at,
        });

        // Meanwhile, on A.
        await onA('PUT', '/tenants/acme/subscribers/cus_p1', { status: 'active' });
        await onA('PUT', '/tenants/acme/subscribers/cus_p3', { status: 'lockout' });
        // Dated 5 s after cus_p2's failure (whatever the machine's speed): its lockout is still ahead of the copy's clock.
        const payUrl4 = await paymentFailedOnA('cus_p4', Math.floor((lockoutAtMs - 3 * DAY_MS) / 1000) + 5);

        // B again, on its port: the copy resumes from its cursor, and applies every change it missed.
        await restartB();
        await vi.waitFor(
          () => expect(copy.status('cus_p3')).toMatchObject({ status: 'lockout', source: 'feed' }),
          WAIT,
        );
        expect(copy.status('cus_p1').status).toBe('active');
        expect(copy.status('cus_p4')).toMatchObject({ status: 'warning', pay_url: payUrl4 });
        // Fresh again, and its clock is past cus_p2's scheduled lockout: answered lockout, as the lookup would.
        expect(copy.status('cus_p2')).toMatchObject({
          status: 'lockout',
          lockout_at: null,
          pay_url: payUrl,
          source: 'feed',
        });
        expect(lists()).toBe(1);
        expect(errors.every((e) => e.status === null)).toBe(true);

        // B down again, changes made, and retention prunes them before the copy read them: 410, list again.
        await killB();
        const failures = errors.length;
        await vi.waitFor(() => expect(errors.length).toBeGreaterThan(failures), WAIT);
        await onA('PUT', '/tenants/acme/subscribers/cus_p5', { status: 'lockout' });
        await onA('PUT', '/tenants/acme/subscribers/cus_p3', { status: 'warning' });
        // Retention prunes until none of those changes is left.
        const maintenance = await openStore({ engine: 'postgres', url: scoped.url });
        const rows = new pg.Client({ connectionString: scoped.url });
        await rows.connect();
        try {
          const none = async () =>
            Number((await rows.query<{ n: string }>('SELECT count(*) AS n FROM status_changes')).rows[0]?.n) === 0;
          expect(await pruneUntil(maintenance.maintenance, 'status_changes', none)).toBeGreaterThan(0);
        } finally {
          await rows.end();
          await maintenance.close();
        }
        await restartB();
        await vi.waitFor(() => expect(copy.status('cus_p5').status).toBe('lockout'), WAIT);
        expect(copy.status('cus_p3').status).toBe('warning');
        expect(errors.some((e) => e.status === 410 && e.code === 'cursor_expired')).toBe(true);
        expect(lists()).toBe(2);
        // And it follows on from the new list.
        await onA('PUT', '/tenants/acme/subscribers/cus_p6', { status: 'warning' });
        await vi.waitFor(() => expect(copy.status('cus_p6').status).toBe('warning'), WAIT);
        expect([copy.status('cus_b_only').status, copy.status('cus_p4').status]).toEqual(['active', 'warning']);
      },
    );
  },
);
