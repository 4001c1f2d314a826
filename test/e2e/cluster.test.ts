import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { availableEngines, schemaScopedUrl } from '../helpers/engines.js';

const engines = await availableEngines();
const TOKEN = 'cluster-test-token-0123456789abcdefghijklmnop';

describe.each(engines.filter((e) => e.name === 'postgres'))('dunwall serve --workers 2 ($name)', () => {
  it('answers from two worker processes, aggregates /metrics across them, and stops on SIGTERM', async () => {
    const scoped = await schemaScopedUrl('dunwall_cluster');
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--workers', '2'], {
      env: { ...process.env, DATABASE_URL: scoped.url, DUNWALL_ADMIN_TOKEN: TOKEN, PORT: '0', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    try {
      // With PORT=0 each worker would get its own port: read both, and check each answers.
      await expect.poll(() => (out.match(/Server listening at/g) ?? []).length, { timeout: 45_000, interval: 100 }).toBe(2);
      const urls = [...out.matchAll(/Server listening at (http:\/\/[^"]+)/g)].map((m) => m[1] ?? '');
      const pids = new Set([...out.matchAll(/"pid":(\d+)[^\n]*Server listening/g)].map((m) => m[1]));
      expect(pids.size).toBe(2);
      // Ready means loaded: each worker loads its read model before it takes a connection.
      for (const pid of pids) {
        const lines = out.split('\n').filter((line) => line.includes(`"pid":${pid},`));
        const loaded = lines.findIndex((line) => line.includes('read model loaded'));
        const listening = lines.findIndex((line) => line.includes('Server listening'));
        expect(loaded, `worker ${pid}`).toBeGreaterThanOrEqual(0);
        expect(loaded, `worker ${pid}`).toBeLessThan(listening);
      }
      const base = urls[0] ?? '';
      const created = await fetch(`${base}/admin/v1/tenants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ slug: 'acme' }),
      });
      const key = ((await created.json()) as { publishable_key: string }).publishable_key;
      for (const u of urls) {
        for (let i = 0; i < 5; i += 1) {
          const res = await fetch(`${u}/api/subscriber-status/acme?processor_customer_id=cus_${i}`, { headers: { authorization: `Bearer ${key}` } });
          expect(res.status).toBe(200);
        }
      }
      const metrics = await (await fetch(`${base}/metrics`)).text();
      expect(metrics).toMatch(/^dunwall_http_requests_total\{route="\/api\/subscriber-status\/:tenantSlug",method="GET",status_code="200"\} 10$/m);
      // Each worker holds the whole model: its size is the largest worker's, not the sum.
      expect(metrics).toMatch(/^dunwall_readmodel_tenants 1$/m);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(out).toContain('all workers stopped');
    } finally {
      child.kill('SIGKILL');
      await scoped.drop();
    }
  });
});
