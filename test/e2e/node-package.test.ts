import { execFile, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { packedTarball } from '../helpers/packed.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/http/app.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { ADMIN_TOKEN, adminRequest, buildAppWithModel } from '../helpers/harness.js';
import { portOf } from '../helpers/socket.js';

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/**
 * `@dunwall/node` as its users get it: packed with `npm pack`, installed alone into an empty
 * project, imported by plain Node, following a running service: the first list, then a change
 * made after it; and a copy whose service is out of reach never keeps the process alive.
 */
describe('the @dunwall/node package', () => {
  let store: Store;
  let app: App;
  let base = '';
  let secretKey = '';
  const dirs: string[] = [];

  const admin = async (method: string, path: string, body?: unknown) => {
    const res = await adminRequest(app, method, path, body);
    if (res.statusCode >= 300) throw new Error(`${method} ${path}: ${res.statusCode} ${res.body}`);
    return res.json() as Record<string, unknown>;
  };

  beforeAll(async () => {
    store = await openStore({ engine: 'embedded', dataDir: null });
    app = await buildAppWithModel({ store, adminToken: ADMIN_TOKEN });
    base = `http://127.0.0.1:${await portOf(app)}`;
    await admin('POST', '/tenants', { slug: 'acme' });
    await admin('PUT', '/tenants/acme/subscribers/cus_pkg', { status: 'lockout' });
    secretKey = String(
      (await admin('POST', '/tenants/acme/keys', { name: 'web', scopes: ['status:read'] })).secret_key,
    );
  });
  afterAll(async () => {
    await app?.close();
    await store?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('packs with no dependency, installs alone, follows a running service, and lets the process exit when the service is away', async () => {
    const packed = mkdtempSync(join(tmpdir(), 'dunwall-node-pack-'));
    const project = mkdtempSync(join(tmpdir(), 'dunwall-node-app-'));
    dirs.push(packed, project);
    const tarball = packedTarball('node', packed);

    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({ name: 'a-server', version: '1.0.0', private: true, type: 'module' }),
    );
    execFileSync(npm, ['install', tarball, '--no-audit', '--no-fund', '--offline'], {
      cwd: project,
      stdio: 'pipe',
      timeout: 120_000,
    });
    const installed = join(project, 'node_modules', '@dunwall', 'node');
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
      dependencies?: object;
      type: string;
    };
    expect(manifest.dependencies).toBeUndefined();
    expect(manifest.type).toBe('module');
    const types = readFileSync(join(installed, 'dist', 'index.d.ts'), 'utf8');
    expect(types).toContain('createDunwall');
    expect(readFileSync(join(installed, 'dist', 'types.d.ts'), 'utf8')).toContain(
      "export type AnswerSource = 'feed' | 'stale' | 'starting';",
    );
    expect(existsSync(join(installed, 'README.md')) && existsSync(join(installed, 'LICENSE'))).toBe(true);
    expect(readdirSync(join(project, 'node_modules')).filter((d) => !d.startsWith('.'))).toEqual(['@dunwall']);

    // Follows the service: the list, then (once the test has written) the change.
    writeFileSync(
      join(project, 'follow.mjs'),
      `
      import { createDunwall } from '@dunwall/node';
      const errors = [];
      const dunwall = createDunwall({ baseUrl: process.env.BASE, secretKey: process.env.SK, onError: (e) => errors.push(e.message) });
      const starting = dunwall.status('cus_pkg').source;
      await dunwall.ready(10_000);
      const listed = dunwall.status('cus_pkg');
      console.log(JSON.stringify({ listed: [listed.status, listed.source] }));
      const deadline = Date.now() + 10_000;
      while (dunwall.status('cus_pkg').status !== 'active' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      const changed = dunwall.status('cus_pkg');
      await dunwall.close();
      console.log(JSON.stringify({ starting, changed: [changed.status, changed.source], errors }));
      `,
    );
    const child = spawn(process.execPath, ['follow.mjs'], {
      cwd: project,
      env: { PATH: process.env.PATH ?? '', BASE: base, SK: secretKey },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: string[] = [];
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((done) => child.on('exit', done));
    const listed = new Promise<void>((done) =>
      child.stdout.on('data', (d: Buffer) => {
        lines.push(...d.toString().split('\n').filter(Boolean));
        if (lines.length >= 1) done();
      }),
    );
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    try {
      await Promise.race([listed, exited]);
      expect(JSON.parse(lines[0] ?? '{}')).toEqual({ listed: ['lockout', 'feed'] });
      await admin('PUT', '/tenants/acme/subscribers/cus_pkg', { status: 'active' });
      expect(await exited, err).toBe(0);
    } finally {
      clearTimeout(timer);
    }
    expect(JSON.parse(lines[1] ?? '{}')).toEqual({ starting: 'starting', changed: ['active', 'feed'], errors: [] });

    // A service out of reach, and no close(): the retries' timers let the process end.
    const server = createServer();
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    const { port } = server.address() as AddressInfo;
    await new Promise((done) => server.close(done));
    writeFileSync(
      join(project, 'away.mjs'),
      `
      import { createDunwall } from '@dunwall/node';
      let errors = 0;
      const dunwall = createDunwall({ baseUrl: 'http://127.0.0.1:${port}', secretKey: 'sk_test_0123456789abcdefghijklmnopqrstuvwxyz', onError: () => (errors += 1) });
      process.on('exit', () => console.log(JSON.stringify({ status: dunwall.status('cus_1'), errors })));
      `,
    );
    const { stdout } = await promisify(execFile)(process.execPath, ['away.mjs'], {
      cwd: project,
      env: { PATH: process.env.PATH ?? '' },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(JSON.parse(stdout)).toEqual({
      status: { status: 'active', lockout_at: null, pay_url: null, entitlements: {}, source: 'starting' },
      errors: 1,
    });

    // The middleware, with no framework installed beside the package: a bare node:http server
    // behind dunwallExpress, and a Fetch API handler behind withDunwall.
    expect(readFileSync(join(installed, 'dist', 'middleware', 'index.d.ts'), 'utf8')).toContain('dunwallExpress');
    writeFileSync(
      join(project, 'gate.mjs'),
      `
      import { createServer } from 'node:http';
      import { dunwallExpress, withDunwall } from '@dunwall/node';
      const dunwall = { status: (id) => ({ status: id === 'cus_locked' ? 'lockout' : 'active', lockout_at: null, pay_url: null, entitlements: {}, source: 'feed' }) };
      const gate = dunwallExpress(dunwall, { customer: (req) => req.headers['x-customer'] ?? null });
      const server = createServer((req, res) => gate(req, res, () => res.end('ok')));
      await new Promise((done) => server.listen(0, '127.0.0.1', done));
      const url = 'http://127.0.0.1:' + server.address().port + '/';
      const locked = await fetch(url, { headers: { 'x-customer': 'cus_locked' } });
      const passed = await fetch(url, { headers: { 'x-customer': 'cus_paid' } });
      const handler = withDunwall(dunwall, { customer: (r) => r.headers.get('x-customer') }, () => new Response('ok'));
      const fetched = await handler(new Request(url, { headers: { 'x-customer': 'cus_locked' } }));
      server.close();
      console.log(JSON.stringify({ node: [locked.status, (await locked.json()).code, passed.status, await passed.text()], fetch: fetched.status }));
      `,
    );
    const gated = await promisify(execFile)(process.execPath, ['gate.mjs'], {
      cwd: project,
      env: { PATH: process.env.PATH ?? '' },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(JSON.parse(gated.stdout)).toEqual({ node: [402, 'billing_lockout', 200, 'ok'], fetch: 402 });
  });
});
