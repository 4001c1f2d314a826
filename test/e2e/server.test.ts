import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { createServer as createNetServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/runtime/config.js';
import { computeHmac } from '../../src/domain/hmac.js';
import { createLogger } from '../../src/runtime/logger.js';
import { start } from '../../src/runtime/server.js';
import { openStore } from '../../src/store/index.js';
import { Capture } from '../helpers/log-capture.js';
import { withMigratedStore } from '../helpers/migrated-data-dir.js';
import { availableEngines, schemaScopedUrl } from '../helpers/engines.js';
import { newTenant } from '../helpers/store-fixtures.js';
import { event, invoice, signed } from '../helpers/stripe-fixtures.js';

const engines = await availableEngines();

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'dunwall-e2e-'));
  dirs.push(dir);
  return dir;
}
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** Splits a logged demo curl command into what fetch needs. */
function parseCurl(curl: string): { url: string; authorization: string } {
  const header = /-H 'Authorization: ([^']+)'/.exec(curl)?.[1];
  const url = / '(http[^']+)'$/.exec(curl)?.[1];
  if (!header || !url) throw new Error(`unexpected curl: ${curl}`);
  return { url, authorization: header };
}

describe('the service on a real socket, embedded store', () => {
  const dataDir = tempDir();
  const env = { DUNWALL_DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'info' };
  let tenantKey = '';

  it('first run: generates the admin token file (0600) and seeds a demo tenant whose curl commands work', async () => {
    const logs = new Capture();
    const running = await start(loadConfig(env), createLogger('info', logs));
    try {
      const tokenPath = join(dataDir, 'admin-token');
      expect(statSync(tokenPath).mode & 0o777).toBe(0o600);
      const entries = logs.entries();
      expect(entries.some((e) => e.path === tokenPath)).toBe(true);

      const demo = entries.filter((e) => e.msg === 'demo lookup');
      expect(demo.map((e) => e.customer)).toEqual([
        'cus_demo_active',
        'cus_demo_warning',
        'cus_demo_lockout',
        'cus_demo_unknown',
      ]);
      const answers: unknown[] = [];
      for (const entry of demo) {
        const { url, authorization } = parseCurl(String(entry.curl));
        const res = await fetch(url, { headers: { authorization } });
        expect(res.status).toBe(200);
        answers.push(await res.json());
      }
      expect(answers.map((a) => (a as { status: string }).status)).toEqual(['active', 'warning', 'lockout', 'active']);
      expect(answers[1]).toMatchObject({ card_update_url: 'https://billing.example.com/update-card' });
      expect(answers[3]).toEqual({ status: 'active' });

      const { readAdminTokenFile } = await import('../../src/runtime/admin-token.js');
      const token = readAdminTokenFile(dataDir);
      expect(logs.text).not.toContain(String(token));
      const created = await fetch(`${running.url}/admin/v1/tenants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ slug: 'acme', card_update_url: 'https://acme.test/card' }),
      });
      expect(created.status).toBe(201);
      tenantKey = ((await created.json()) as { publishable_key: string }).publishable_key;
      const put = await fetch(`${running.url}/admin/v1/tenants/acme/subscribers/cus_kept`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ status: 'lockout' }),
      });
      expect(put.status).toBe(200);
    } finally {
      await running.close();
    }
  });

  it('answers the CORS preflight as a browser sends it, and the lookup rows over HTTP', async () => {
    const running = await start(loadConfig(env), createLogger('silent'));
    try {
      const base = `${running.url}/api/subscriber-status/acme`;
      const preflight = await fetch(base, {
        method: 'OPTIONS',
        headers: {
          origin: 'https://app.acme.test',
          'access-control-request-method': 'GET',
          'access-control-request-headers': 'authorization',
        },
      });
      expect(preflight.status).toBe(204);
      expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
      expect(preflight.headers.get('access-control-allow-methods')).toBe('GET, OPTIONS');
      expect(preflight.headers.get('access-control-allow-headers')).toBe('Authorization');
      expect(preflight.headers.get('access-control-max-age')).toBe('7200');

      const missing = await fetch(`${base}?processor_customer_id=cus_kept`, {
        headers: { origin: 'https://app.acme.test' },
      });
      expect(missing.status).toBe(401);
      expect(missing.headers.get('www-authenticate')).toBe('Bearer');
      expect(missing.headers.get('access-control-allow-origin')).toBe('*');
      expect(missing.headers.get('content-type')).toMatch(/^application\/problem\+json/);

      const unknownTenant = await fetch(`${running.url}/api/subscriber-status/nobody?processor_customer_id=cus_1`, {
        headers: { authorization: `Bearer ${tenantKey}` },
      });
      expect(unknownTenant.status).toBe(404);

      const ok = await fetch(`${base}?processor_customer_id=cus_kept`, {
        headers: { authorization: `Bearer ${tenantKey}`, origin: 'https://x.test' },
      });
      expect(ok.status).toBe(200);
      expect(ok.headers.get('cache-control')).toBe('no-store');
      // Request ids: this process's prefix and a counter; a valid presented id is echoed.
      const id = ok.headers.get('x-request-id') ?? '';
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-z]+$/);
      expect(await ok.json()).toMatchObject({ status: 'lockout', card_update_url: null });
      const next = await fetch(`${base}?processor_customer_id=cus_kept`, {
        headers: { authorization: `Bearer ${tenantKey}` },
      });
      const nextId = next.headers.get('x-request-id') ?? '';
      expect(nextId.split('-').slice(0, -1).join('-')).toBe(id.split('-').slice(0, -1).join('-'));
      expect(parseInt(nextId.split('-').at(-1) ?? '', 36)).toBeGreaterThan(parseInt(id.split('-').at(-1) ?? '', 36));
      const traced = await fetch(`${base}?processor_customer_id=cus_kept`, {
        headers: { authorization: `Bearer ${tenantKey}`, 'x-request-id': 'trace-42.a:b' },
      });
      expect(traced.headers.get('x-request-id')).toBe('trace-42.a:b');
      const unusable = await fetch(`${base}?processor_customer_id=cus_kept`, {
        headers: { authorization: `Bearer ${tenantKey}`, 'x-request-id': 'has space' },
      });
      expect(unusable.headers.get('x-request-id')).toMatch(/^[0-9a-f]{8}-[0-9a-z]+$/);
    } finally {
      await running.close();
    }
  });

  it('restart: the data written before is still there, the demo is not seeded again', async () => {
    const logs = new Capture();
    const running = await start(loadConfig(env), createLogger('info', logs));
    try {
      // A second owner of the same folder is refused while the first one runs.
      await expect(openStore({ engine: 'embedded', dataDir: join(dataDir, 'pgdata') })).rejects.toThrow(
        `in use by process ${process.pid}`,
      );
      expect(logs.entries().some((e) => e.msg === 'demo lookup')).toBe(false);
      expect(await running.store.tenants.countTenants()).toBe(2);
      // The demo page is served again from what the first run kept in the data folder.
      const demo = await fetch(`${running.url}/demo/frame?customer=cus_demo_lockout`);
      expect(demo.status).toBe(200);
      expect(await demo.text()).toContain('data-customer="cus_demo_lockout"');
      const res = await fetch(`${running.url}/api/subscriber-status/acme?processor_customer_id=cus_kept`, {
        headers: { authorization: `Bearer ${tenantKey}` },
      });
      expect(((await res.json()) as { status: string }).status).toBe('lockout');
    } finally {
      await running.close();
    }
  });

  it('recovers from an unclean stop: a lock naming a dead or reused pid, an empty or loose token file', async () => {
    const dir = withMigratedStore(tempDir());
    const first = await start(
      loadConfig({ DUNWALL_DATA_DIR: dir, PORT: '0', DUNWALL_DEMO: '0' }),
      createLogger('silent'),
    );
    await first.close();
    // The lock as a killed process leaves it: naming this pid (a container's pid 1 again), or a dead one.
    for (const pid of [process.pid, 2 ** 22 + 17]) {
      writeFileSync(join(dir, 'pgdata.lock'), String(pid));
      writeFileSync(join(dir, 'admin-token'), '');
      chmodSync(join(dir, 'admin-token'), 0o644);
      const again = await start(
        loadConfig({ DUNWALL_DATA_DIR: dir, PORT: '0', DUNWALL_DEMO: '0' }),
        createLogger('silent'),
      );
      await again.close();
      expect(readFileSync(join(dir, 'admin-token'), 'utf8').trim()).toMatch(/^dwa_[A-Za-z0-9]{48}$/);
      expect(statSync(join(dir, 'admin-token')).mode & 0o777).toBe(0o600);
    }
  });

  it('refuses a token file too short to be safe, and releases the folder', async () => {
    const dir = withMigratedStore(tempDir());
    const first = await start(
      loadConfig({ DUNWALL_DATA_DIR: dir, PORT: '0', DUNWALL_DEMO: '0' }),
      createLogger('silent'),
    );
    await first.close();
    writeFileSync(join(dir, 'admin-token'), 'short\n');
    await expect(start(loadConfig({ DUNWALL_DATA_DIR: dir, PORT: '0' }), createLogger('silent'))).rejects.toThrow(
      'shorter than 32 characters',
    );
    expect(existsSync(join(dir, 'pgdata.lock'))).toBe(false);
  });

  it('DUNWALL_DEFAULT_TIER is the tier of a tenant created without one, through the API and the CLI; one that names no tier stops the start', async () => {
    const dir = withMigratedStore(tempDir());
    const base = { DUNWALL_DATA_DIR: dir, PORT: '0', DUNWALL_DEMO: '0' };
    await expect(
      start(loadConfig({ ...base, DUNWALL_DEFAULT_TIER: 'platinum' }), createLogger('silent')),
    ).rejects.toThrow(
      "DUNWALL_DEFAULT_TIER names no tier of this store: 'platinum' (its tiers: growth, scale, starter)",
    );
    expect(existsSync(join(dir, 'pgdata.lock'))).toBe(false);
    expect(() => loadConfig({ DUNWALL_DEFAULT_TIER: 'Not A Tier' })).toThrow(
      'DUNWALL_DEFAULT_TIER must be a tier name',
    );
    expect(loadConfig({}).defaultTier).toBe('starter');

    const running = await start(loadConfig({ ...base, DUNWALL_DEFAULT_TIER: 'growth' }), createLogger('silent'));
    try {
      const { readAdminTokenFile } = await import('../../src/runtime/admin-token.js');
      const token = String(readAdminTokenFile(dir));
      const post = (body: unknown) =>
        fetch(`${running.url}/admin/v1/tenants`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
      const viaApi = (await (await post({ slug: 'by-api' })).json()) as {
        tier: string;
        entitlements: Record<string, boolean>;
      };
      expect(viaApi).toMatchObject({ tier: 'growth', entitlements: { powered_by_watermark: false } });
      expect(((await (await post({ slug: 'on-starter', tier: 'starter' })).json()) as { tier: string }).tier).toBe(
        'starter',
      );

      const { run } = await import('../../src/cli/run.js');
      let out = '';
      const io = {
        stdout: { write: (t: string) => (out += t) },
        stderr: { write: () => true },
        stdin: Readable.from([]),
        env: { DUNWALL_URL: running.url, DUNWALL_ADMIN_TOKEN: token },
      };
      expect(await run(['tenant', 'create', 'by-cli', '--json'], io)).toBe(0);
      expect(JSON.parse(out)).toMatchObject({ tier: 'growth', entitlements: { powered_by_watermark: false } });

      // A default tier deleted since the start: the creation says whose choice it was.
      await running.store.tenants.deleteTenant((await running.store.tenants.getTenant('by-api'))?.id ?? 0);
      await running.store.tenants.deleteTenant((await running.store.tenants.getTenant('by-cli'))?.id ?? 0);
      expect(await running.store.tenants.deleteTier('growth')).toBe('deleted');
      const gone = await post({ slug: 'after' });
      expect(gone.status).toBe(400);
      expect(((await gone.json()) as { detail: string }).detail).toBe(
        "tier: the default tier 'growth' (DUNWALL_DEFAULT_TIER) does not exist: name a tier, or create that one",
      );
    } finally {
      await running.close();
    }
  });

  it('METRICS_PORT serves /metrics on a listener of its own, and the public port no longer does', async () => {
    const running = await start(
      loadConfig({ DUNWALL_DATA_DIR: withMigratedStore(tempDir()), PORT: '0', DUNWALL_DEMO: '0', METRICS_PORT: '0' }),
      createLogger('silent'),
    );
    try {
      expect(running.metricsUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(running.metricsUrl).not.toBe(running.url);
      expect((await fetch(`${running.url}/healthz`)).status).toBe(200);
      const publicMetrics = await fetch(`${running.url}/metrics`);
      expect(publicMetrics.status).toBe(404);
      const scraped = await fetch(`${running.metricsUrl ?? ''}/metrics`);
      expect(scraped.status).toBe(200);
      expect(scraped.headers.get('content-type')).toMatch(/^text\/plain/);
      const text = await scraped.text();
      // The public port's 404 above is counted there.
      expect(text).toMatch(/^dunwall_http_requests_total\{route="unmatched",method="GET",status_code="404"\} 1$/m);
      expect(text).toContain('dunwall_readmodel_tenants');
      expect((await fetch(`${running.metricsUrl ?? ''}/healthz`)).status).toBe(404);
      expect((await fetch(`${running.metricsUrl ?? ''}/metrics`, { method: 'POST' })).status).toBe(405);
    } finally {
      await running.close();
    }
    expect(() => loadConfig({ PORT: '4000', METRICS_PORT: '4000' })).toThrow('METRICS_PORT must differ from PORT');
    expect(() => loadConfig({ METRICS_PORT: 'x' })).toThrow('METRICS_PORT');
    expect(() => loadConfig({ METRICS_PORT: '9100', METRICS_HOST: 'not a host' })).toThrow('METRICS_HOST');
  });

  it("counts a tenant's refused Stripe deliveries in memory and writes them as it stops", async () => {
    const dir = withMigratedStore(tempDir());
    const config = loadConfig({ DUNWALL_DATA_DIR: dir, PORT: '0', DUNWALL_DEMO: '0' });
    const running = await start(config, createLogger('silent'));
    const tenant = { id: 0 };
    try {
      const created = await running.store.tenants.createTenant(newTenant('hooked'), new Date());
      if (!created.ok) throw new Error('tenant');
      tenant.id = created.tenant.id;
      await running.store.keys.rotateCredential(
        tenant.id,
        'stripe_webhook_secret',
        'whsec_e2e_intake_0123456789abcdef',
        0,
        new Date(),
      );
      const fixture = event('invoice.payment_failed', invoice('cus_e2e', { next_payment_attempt: null }), {
        created: Math.floor(Date.now() / 1000),
      });
      const { payload, signature } = signed(fixture, 'whsec_not_the_secret_at_all_0000', Math.floor(Date.now() / 1000));
      const post = () =>
        fetch(`${running.url}/webhooks/stripe/hooked`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'stripe-signature': signature },
          body: payload,
        });
      // The tenant reaches the read model within moments: until then its slug is unknown (404), and not counted.
      await expect.poll(async () => (await post()).status, { timeout: 5_000, interval: 50 }).toBe(400);
      expect((await post()).status).toBe(400);
    } finally {
      await running.close();
    }
    const store = await openStore({ engine: 'embedded', dataDir: join(dir, 'pgdata') });
    try {
      const kept = await store.stripe.stripeIntake(tenant.id, new Date(Date.now() - 86_400_000));
      expect(kept.days.map((d) => d.counts.refused_signature)).toEqual([2]);
      expect(kept.lastAt.refused_signature).not.toBeNull();
    } finally {
      await store.close();
    }
  });

  it('DUNWALL_DEMO=0 turns the demo off', async () => {
    const running = await start(
      loadConfig({ DUNWALL_DATA_DIR: withMigratedStore(tempDir()), PORT: '0', DUNWALL_DEMO: '0' }),
      createLogger('silent'),
    );
    try {
      expect(await running.store.tenants.countTenants()).toBe(0);
    } finally {
      await running.close();
    }
  });
});

describe.each(engines.filter((e) => e.name === 'postgres'))('the service on PostgreSQL ($name)', () => {
  it('never seeds the demo, and keeps the admin API off without DUNWALL_ADMIN_TOKEN', async () => {
    const scoped = await schemaScopedUrl('dunwall_e2e');
    const logs = new Capture();
    const running = await start(
      loadConfig({ DATABASE_URL: scoped.url, PORT: '0', DUNWALL_DATA_DIR: tempDir() }),
      createLogger('info', logs),
    );
    try {
      expect(running.store.maintenance.engine).toBe('postgres');
      expect(await running.store.tenants.countTenants()).toBe(0);
      expect(logs.text).toContain('admin API disabled');
      const res = await fetch(`${running.url}/admin/v1/tenants`, {
        headers: { authorization: 'Bearer whatever-whatever-whatever-whatever' },
      });
      expect(res.status).toBe(404);
      expect(((await res.json()) as { code: string }).code).toBe('admin_disabled');
      expect((await fetch(`${running.url}/readyz`)).status).toBe(200);
    } finally {
      await running.close();
      await scoped.drop();
    }
  });
});

describe('the process', () => {
  const serverArgs = ['--import', 'tsx', 'src/runtime/server.ts'];

  it('refuses a bad configuration with a clear message and exit code 2', () => {
    const res = spawnSync(process.execPath, serverArgs, {
      env: { ...process.env, PORT: 'abc', LOG_LEVEL: 'loud', DATABASE_URL: 'mysql://u:hunter2@h/db' },
      encoding: 'utf8',
    });
    expect(res.status).toBe(2);
    expect(res.stderr).toContain('PORT must be an integer from 0 to 65535 (got "abc")');
    expect(res.stderr).toContain('LOG_LEVEL must be one of');
    expect(res.stderr).toContain('DATABASE_URL must be a postgres:// or postgresql:// URL');
    expect(res.stderr).not.toContain('hunter2');
  });

  it("names PORT when the port is taken, and HOST when it is not this machine's, before anything starts", async () => {
    const taken = createNetServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as AddressInfo).port;
    try {
      const dataDir = tempDir();
      const inUse = spawnSync(process.execPath, serverArgs, {
        env: { ...process.env, PORT: String(port), DUNWALL_DATA_DIR: dataDir },
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(inUse.status).toBe(2);
      expect(inUse.stderr).toContain(`PORT ${port} is already in use on 127.0.0.1`);
      // Refused before the store started: the embedded folder was never created.
      expect(existsSync(join(dataDir, 'pgdata'))).toBe(false);
    } finally {
      taken.close();
    }
    const elsewhere = spawnSync(process.execPath, serverArgs, {
      env: { ...process.env, PORT: '3987', HOST: '192.0.2.1', DUNWALL_DATA_DIR: tempDir() },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(elsewhere.status).toBe(2);
    expect(elsewhere.stderr).toContain('HOST 192.0.2.1 is not an address of this machine');
    const malformed = spawnSync(process.execPath, serverArgs, {
      env: { ...process.env, HOST: 'no such host!' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(malformed.status).toBe(2);
    expect(malformed.stderr).toContain('HOST must be an IP address or a host name');
  });

  it('shuts down cleanly on SIGTERM', async () => {
    const child = spawn(process.execPath, serverArgs, {
      env: {
        ...process.env,
        PORT: '0',
        DUNWALL_DATA_DIR: withMigratedStore(tempDir()),
        DUNWALL_DEMO: '0',
        DATABASE_URL: '',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', () => {
        const m = /Server listening at (http:\/\/[^"]+)/.exec(out);
        if (m?.[1]) resolve(m[1]);
      });
      child.on('exit', (code) => reject(new Error(`exited early with ${code}: ${out}`)));
    });
    expect((await fetch(`${url}/healthz`)).status).toBe(200);
    const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(out).toContain('"msg":"shut down"');
  });
});

describe('hmac helper', () => {
  it('is the lowercase hex HMAC-SHA256 of the customer id under the secret (a known vector)', () => {
    // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
    expect(computeHmac('Jefe', 'what do ya want for nothing?')).toBe(
      '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843',
    );
  });
});
