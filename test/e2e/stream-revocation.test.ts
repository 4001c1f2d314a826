import { request } from 'node:http';
import type { ClientRequest } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { availableEngines, schemaScopedUrl } from '../helpers/engines.js';
import { REQUEST_TIMEOUT_MS, adminCall, killAllServices, startServiceProcess } from '../helpers/service-process.js';

/**
 * Two `dunwall serve` processes on one PostgreSQL: a key's event streams and long polls on
 * both end when the key is revoked through one of them, and its slots go to the tenant's
 * other key (docs/security.md, "Open connections end with their credential").
 */
const engines = await availableEngines();
const TOKEN = 'stream-revocation-token-0123456789abcdefghij';
const STREAMS_PER_TENANT = 20;

afterAll(killAllServices);

interface Held {
  status: number;
  events: number;
  /** Resolves once the response has ended or its connection is gone, with what ended it. */
  ended: Promise<'end' | 'error'>;
  req: ClientRequest;
}

/** A request held open (a stream or a long poll), its answer counted as it comes. */
function hold(base: string, path: string, headers: Record<string, string>): Promise<Held> {
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    let settle: (how: 'end' | 'error') => void = () => {};
    const ended = new Promise<'end' | 'error'>((r) => (settle = r));
    const req = request(
      { host: url.hostname, port: url.port, path: url.pathname + url.search, headers, agent: false },
      (res) => {
        const held: Held = { status: res.statusCode ?? 0, events: 0, ended, req };
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (held.events += chunk.split('\nevent: status\n').length - 1));
        res.on('end', () => settle('end'));
        res.on('error', () => settle('error'));
        res.on('close', () => settle('end'));
        resolve(held);
      },
    );
    req.on('error', (err) => {
      settle('error');
      reject(err);
    });
    req.end();
  });
}

async function call(base: string, path: string, headers: Record<string, string>): Promise<Response> {
  return fetch(new URL(path, base), { headers, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
}

describe.skipIf(!engines.some((e) => e.name === 'postgres'))('a revoked key on two service processes', () => {
  it("ends every stream and long poll it opened on both, and the tenant's other key gets the slots", async () => {
    const scoped = await schemaScopedUrl('dunwall_streams');
    try {
      const a = await startServiceProcess(scoped.url, TOKEN);
      const b = await startServiceProcess(scoped.url, TOKEN);
      expect((await adminCall(a.base, TOKEN, 'POST', '/tenants', { slug: 'streams' })).status).toBe(201);
      const mint = async () => {
        const res = await adminCall(a.base, TOKEN, 'POST', '/tenants/streams/keys', {
          name: 'feed',
          scopes: ['status:read'],
        });
        expect(res.status).toBe(201);
        return (await res.json()) as { id: string; secret_key: string };
      };
      const old = await mint();
      const fresh = await mint();
      const oldAuth = { authorization: `Bearer ${old.secret_key}` };
      const freshAuth = { authorization: `Bearer ${fresh.secret_key}` };
      // Both keys reach B with the change log.
      for (const key of [oldAuth, freshAuth])
        await expect.poll(async () => (await call(b.base, '/v1/statuses', key)).status, { timeout: 10_000 }).toBe(200);
      const from = ((await (await call(a.base, '/v1/statuses', oldAuth)).json()) as { feed_cursor: string })
        .feed_cursor;
      const path = `/v1/status-changes?after=${from}`;
      const sse = { accept: 'text/event-stream' };

      const streams = await Promise.all(
        [a, b].flatMap((at) =>
          Array.from({ length: STREAMS_PER_TENANT }, () => hold(at.base, path, { ...oldAuth, ...sse })),
        ),
      );
      expect(streams.map((st) => st.status)).toEqual(streams.map(() => 200));
      // The old key holds every slot: the other key is refused on both.
      for (const at of [a, b]) expect((await call(at.base, path, { ...freshAuth, ...sse })).status).toBe(429);
      // And it receives: a change reaches all 40 streams.
      expect(
        (await adminCall(a.base, TOKEN, 'PUT', '/tenants/streams/subscribers/cus_1', { status: 'lockout' })).status,
      ).toBe(200);
      await expect.poll(() => streams.every((st) => st.events === 1), { timeout: 10_000 }).toBe(true);
      // A long poll on each, after that change: nothing comes, it waits (up to 30 s) with its headers unsent.
      const after = ((await (await call(a.base, path, oldAuth)).json()) as { next: string }).next;
      const polls = [a, b].map((at) => hold(at.base, `/v1/status-changes?after=${after}&wait=30`, oldAuth));

      const started = performance.now();
      expect((await adminCall(a.base, TOKEN, 'DELETE', `/tenants/streams/keys/${old.id}`)).status).toBe(204);
      await Promise.all(streams.map((st) => st.ended));
      const streamsEndedMs = performance.now() - started;
      console.info(
        `40 streams on two service processes ended ${streamsEndedMs.toFixed(0)} ms after the revocation was answered`,
      );
      // The long polls answer as a request with the key now would, long before their 30 s.
      expect((await Promise.all(polls)).map((p) => p.status)).toEqual([401, 401]);

      // The slots are free: the other key streams on both, and gets the next change.
      const next = await Promise.all([a, b].map((at) => hold(at.base, path, { ...freshAuth, ...sse })));
      expect(next.map((st) => st.status)).toEqual([200, 200]);
      await expect.poll(() => next.every((st) => st.events === 1), { timeout: 10_000 }).toBe(true);
      expect(
        (await adminCall(a.base, TOKEN, 'PUT', '/tenants/streams/subscribers/cus_1', { status: 'active' })).status,
      ).toBe(200);
      await expect.poll(() => next.every((st) => st.events === 2), { timeout: 10_000 }).toBe(true);
      // None of the revoked key's streams got it.
      expect(streams.every((st) => st.events === 1)).toBe(true);
      for (const st of next) st.req.destroy();
    } finally {
      await killAllServices();
      await scoped.drop();
    }
  });
});
