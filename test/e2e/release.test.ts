import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { computeHmac } from '../../src/domain/hmac.js';
import { event, invoice, signed } from '../helpers/stripe-fixtures.js';

const ROOT = resolve(import.meta.dirname, '../..');
const TOKEN = 'release-test-admin-token-0123456789abcdefghijklmn';
const dirs: string[] = [];
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'dunwall-release-'));
  dirs.push(d);
  return d;
}

/**
 * `npm run release` as the Dockerfile runs it, then the folder copied elsewhere and started
 * with `node` alone: no build tools, no dev dependencies, no checkout beside it.
 */
const BUILT = existsSync(join(ROOT, 'dist', 'src', 'runtime', 'server.js'));
if (!BUILT && process.env.CI === 'true')
  throw new Error('dist/ is not built: CI builds it with npm ci before the tests');

describe.skipIf(!BUILT)('the release folder', () => {
  it('holds the production dependencies only, and serves a lookup, a webhook and the admin API from a clean copy', async () => {
    const built = join(tempDir(), 'release');
    // dist/ is what `npm install` built; rebuilding it here would pull it from under other suites.
    const res = spawnSync(process.execPath, [join(ROOT, 'scripts', 'release.mjs'), '--out', built, '--no-build'], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 240_000,
    });
    expect(res.status, res.stderr).toBe(0);
    const copy = join(tempDir(), 'dunwall');
    cpSync(built, copy, { recursive: true });

    const pkg = JSON.parse(readFileSync(join(copy, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    expect(Object.keys(pkg.scripts)).toEqual(['start']);
    for (const dep of Object.keys(pkg.dependencies))
      expect(existsSync(join(copy, 'node_modules', ...dep.split('/'))), dep).toBe(true);
    for (const dev of ['typescript', 'vitest', 'esbuild', 'tsx', 'playwright-core'])
      expect(existsSync(join(copy, 'node_modules', dev)), dev).toBe(false);
    expect(existsSync(join(copy, 'src'))).toBe(false);
    // The packages of the service's version, which it serves for npm install.
    for (const file of ['client.tgz', 'node.tgz'])
      expect(existsSync(join(copy, 'dist', 'packages', file)), file).toBe(true);

    const child = spawn(process.execPath, ['--max-semi-space-size=8', 'dist/src/runtime/server.js'], {
      cwd: copy,
      env: {
        PATH: process.env.PATH ?? '',
        PORT: '0',
        HOST: '127.0.0.1',
        DUNWALL_DATA_DIR: join(tempDir(), 'data'),
        DUNWALL_DEMO: '0',
        DUNWALL_ADMIN_TOKEN: TOKEN,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(child);
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
    const base = await new Promise<string>((done, fail) => {
      const timer = setTimeout(() => fail(new Error(`no listening line in 60 s:\n${out}`)), 60_000);
      child.stdout?.on('data', () => {
        const m = /Server listening at (http:\/\/[^"]+)/.exec(out);
        if (m?.[1]) {
          clearTimeout(timer);
          done(m[1]);
        }
      });
      child.on('exit', (code) => fail(new Error(`exited with ${code}:\n${out}`)));
    });

    const admin = (method: string, path: string, body?: unknown) =>
      fetch(`${base}/admin/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    const created = await admin('POST', '/tenants', { slug: 'acme' });
    expect(created.status).toBe(201);
    const tenant = (await created.json()) as { publishable_key: string; hmac_secret: string };
    const secret = 'whsec_release_0123456789abcdef';
    expect((await admin('PATCH', '/tenants/acme', { stripe_webhook_secret: secret })).status).toBe(200);

    const lookup = async () => {
      const r = await fetch(
        `${base}/api/subscriber-status/acme?processor_customer_id=cus_r1&hmac=${computeHmac(tenant.hmac_secret, 'cus_r1')}`,
        {
          headers: { authorization: `Bearer ${tenant.publishable_key}` },
        },
      );
      return [r.status, ((await r.json()) as { status: string }).status];
    };
    expect(await lookup()).toEqual([200, 'active']);
    const nowS = Math.floor(Date.now() / 1000);
    const { payload, signature } = signed(
      event('invoice.payment_failed', invoice('cus_r1', { next_payment_attempt: null }), {
        created: nowS - 1,
        id: 'evt_release_1',
      }),
      secret,
      nowS,
    );
    const hook = await fetch(`${base}/webhooks/stripe/acme`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      body: payload,
    });
    expect([hook.status, ((await hook.json()) as { outcome: string }).outcome]).toEqual([200, 'applied']);
    expect(await lookup()).toEqual([200, 'lockout']);
    expect((await fetch(`${base}/snippet.js`)).status).toBe(200);
    expect((await fetch(`${base}/openapi.json`)).status).toBe(200);
    // The console, with the script its page names.
    const consolePage = await fetch(`${base}/console`);
    const script = /src="(\/console\/assets\/[^"]+\.js)"/.exec(await consolePage.text())?.[1];
    expect([consolePage.status, (await fetch(`${base}${script ?? '/console/assets/none.js'}`)).status]).toEqual([
      200, 200,
    ]);
    const tarball = await fetch(`${base}/packages/client.tgz`);
    expect([tarball.status, tarball.headers.get('content-type')]).toEqual([200, 'application/gzip']);
    expect(
      Buffer.from(await tarball.arrayBuffer()).equals(readFileSync(join(copy, 'dist', 'packages', 'client.tgz'))),
    ).toBe(true);
    child.kill('SIGTERM');
    expect(await new Promise((done) => child.on('exit', done))).toBe(0);
  });
});
