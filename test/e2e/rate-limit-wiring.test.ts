import { randomInt } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { readAdminTokenFile } from '../../src/runtime/admin-token.js';
import { loadConfig } from '../../src/runtime/config.js';
import { createLogger } from '../../src/runtime/logger.js';
import { Capture } from '../helpers/log-capture.js';
import { redisAvailable, TEST_REDIS_URL } from '../helpers/redis.js';
import { start } from '../../src/runtime/server.js';

const REDIS_URL = TEST_REDIS_URL;
const redisUp = await redisAvailable('the service-through-Redis test is');

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

describe.skipIf(!redisUp)(
  'the service as configured: REDIS_URL, TRUST_PROXY and the limits from the environment',
  () => {
    it('counts in Redis under the documented prefix, per client named by the trusted proxy', async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'dunwall-rl-'));
      dirs.push(dataDir);
      const env = {
        DUNWALL_DATA_DIR: dataDir,
        PORT: '0',
        DUNWALL_DEMO: '0',
        REDIS_URL,
        TRUST_PROXY: 'loopback',
        DUNWALL_RATE_LIMIT_LOOKUP_PER_IP: '3',
      };
      const redis = new Redis(REDIS_URL);
      const running = await start(loadConfig(env), createLogger('silent'));
      // A client address of its own (documentation range), so that no other run shares its keys.
      const client = `198.18.${randomInt(256)}.${randomInt(1, 255)}`;
      try {
        const token = readAdminTokenFile(dataDir);
        const created = await fetch(`${running.url}/admin/v1/tenants`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ slug: 'acme' }),
        });
        const { publishable_key: key } = (await created.json()) as { publishable_key: string };
        const lookup = (from: string) =>
          fetch(`${running.url}/api/subscriber-status/acme?processor_customer_id=cus_1`, {
            headers: { authorization: `Bearer ${key}`, 'x-forwarded-for': from },
          });
        const statuses: number[] = [];
        for (let i = 0; i < 4; i += 1) statuses.push((await lookup(client)).status);
        expect(statuses).toEqual([200, 200, 200, 429]);
        expect((await lookup(`${client.slice(0, client.lastIndexOf('.'))}.0`)).status).toBe(200);

        const keys = await redis.keys(`dunwall:rl:*ip:${client}`);
        expect(keys).toHaveLength(1);
        expect(Number(await redis.get(keys[0] ?? ''))).toBe(4);
      } finally {
        await running.close();
        const keys = await redis.keys(`dunwall:rl:*:${client.slice(0, client.lastIndexOf('.'))}.*`);
        if (keys.length > 0) await redis.del(...keys);
        redis.disconnect();
      }
    });
  },
);

describe('the service with a REDIS_URL that does not answer', () => {
  it('starts all the same, says so, and lets every lookup through uncounted', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'dunwall-rl-'));
    dirs.push(dataDir);
    const logs = new Capture();
    const env = {
      DUNWALL_DATA_DIR: dataDir,
      PORT: '0',
      DUNWALL_DEMO: '0',
      REDIS_URL: 'redis://127.0.0.1:1',
      DUNWALL_RATE_LIMIT_LOOKUP_PER_IP: '2',
    };
    const running = await start(loadConfig(env), createLogger('info', logs));
    try {
      expect(
        logs.entries().some((e) => e.msg === 'redis unavailable at start: rate limits are counted once it answers'),
      ).toBe(true);
      const token = readAdminTokenFile(dataDir);
      const created = await fetch(`${running.url}/admin/v1/tenants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ slug: 'acme' }),
      });
      expect(created.status).toBe(201);
      const { publishable_key: key } = (await created.json()) as { publishable_key: string };
      const statuses: number[] = [];
      for (let i = 0; i < 5; i += 1) {
        const res = await fetch(`${running.url}/api/subscriber-status/acme?processor_customer_id=cus_1`, {
          headers: { authorization: `Bearer ${key}` },
        });
        statuses.push(res.status);
      }
      expect(statuses).toEqual([200, 200, 200, 200, 200]);
    } finally {
      await running.close();
    }
  });
});
