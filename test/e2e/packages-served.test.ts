import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killAllServices, REQUEST_TIMEOUT_MS, startBuiltServiceProcess } from '../helpers/service-process.js';
import type { ServiceProcess } from '../helpers/service-process.js';

const ROOT = resolve(import.meta.dirname, '../..');
const TOKEN = 'packages-test-admin-token-0123456789abcdefghijkl';
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const run = promisify(execFile);
const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };

/**
 * The tarballs `npm run build` packs, served by the built service (as `npm start` runs it)
 * and installed by npm from its URL into an empty project, as the docs tell a tenant to.
 * dist/ is what `npm install` built; rebuilding it here would pull it from under other suites.
 */
const BUILT = existsSync(join(ROOT, 'dist', 'src', 'runtime', 'server.js'));
if (!BUILT && process.env.CI === 'true')
  throw new Error('dist/ is not built: CI builds it with npm ci before the tests');

/** One request with its path sent exactly as written (fetch would resolve `..` first), bounded in time. */
function raw(
  base: string,
  method: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }> {
  const { hostname, port } = new URL(base);
  return new Promise((done, fail) => {
    const req = request(
      { host: hostname, port, method, path, headers, agent: false, timeout: REQUEST_TIMEOUT_MS },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => done({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', fail);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer to ${method} ${path}`)));
    req.on('error', fail);
    req.end();
  });
}

describe.skipIf(!BUILT)('the package tarballs of the built service', () => {
  const dirs: string[] = [];
  let service: ServiceProcess;
  const tempDir = (prefix: string) => {
    const d = mkdtempSync(join(tmpdir(), prefix));
    dirs.push(d);
    return d;
  };

  beforeAll(async () => {
    for (const file of ['client.tgz', 'node.tgz']) {
      if (!existsSync(join(ROOT, 'dist', 'packages', file)))
        throw new Error(`dist/packages/${file} is missing: npm run build packs it`);
    }
    service = await startBuiltServiceProcess(tempDir('dunwall-packages-data-'), TOKEN);
  }, 90_000);
  afterAll(async () => {
    await killAllServices();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("installs @dunwall/client with npm from the service's URL, at the service's version, and it imports", async () => {
    const served = (await (
      await fetch(`${service.base}/openapi.json`, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) })
    ).json()) as {
      info: { version: string };
    };
    expect(served.info.version).toBe(version);

    const project = tempDir('dunwall-packages-app-');
    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({ name: 'an-app', version: '1.0.0', private: true, type: 'module' }),
    );
    // A cache of its own: npm fetches the tarball from the service, not from an earlier run.
    await run(
      npm,
      [
        'install',
        '--no-audit',
        '--no-fund',
        '--cache',
        tempDir('dunwall-packages-cache-'),
        `${service.base}/packages/client.tgz`,
      ],
      {
        cwd: project,
        env: { ...process.env, npm_config_update_notifier: 'false' },
        timeout: 60_000,
      },
    );
    const installed = JSON.parse(
      readFileSync(join(project, 'node_modules', '@dunwall', 'client', 'package.json'), 'utf8'),
    ) as {
      name: string;
      version: string;
    };
    expect([installed.name, installed.version]).toEqual(['@dunwall/client', served.info.version]);
    const manifest = JSON.parse(readFileSync(join(project, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    expect(manifest.dependencies['@dunwall/client']).toBe(`${service.base}/packages/client.tgz`);

    const { stdout } = await run(
      process.execPath,
      ['--input-type=module', '-e', "const m = await import('@dunwall/client'); console.log(typeof m.createClient)"],
      { cwd: project, env: { PATH: process.env.PATH ?? '' }, timeout: 30_000 },
    );
    expect(stdout.trim()).toBe('function');
  });

  it('serves the built bytes with their SHA-256 as the ETag and 304 on it, and 404s any other name', async () => {
    for (const file of ['client.tgz', 'node.tgz']) {
      const bytes = readFileSync(join(ROOT, 'dist', 'packages', file));
      const res = await raw(service.base, 'GET', `/packages/${file}`);
      expect([res.status, res.headers['content-type'], res.headers['cache-control']]).toEqual([
        200,
        'application/gzip',
        'public, max-age=300',
      ]);
      expect(res.body.equals(bytes), file).toBe(true);
      const etag = `"${createHash('sha256').update(bytes).digest('base64url')}"`;
      expect(res.headers.etag).toBe(etag);
      const again = await raw(service.base, 'GET', `/packages/${file}`, { 'if-none-match': etag });
      expect([again.status, again.body.length]).toEqual([304, 0]);
      const head = await raw(service.base, 'HEAD', `/packages/${file}`);
      expect([head.status, head.headers['content-length'], head.body.length]).toEqual([200, String(bytes.length), 0]);
    }
    for (const path of [
      '/packages/../package.json',
      '/packages/..%2Fpackage.json',
      '/packages/%2e%2e%2fpackage.json',
      '/packages/no-such-package.tgz',
      '/packages/client',
    ]) {
      const res = await raw(service.base, 'GET', path);
      expect(res.status, path).toBe(404);
      expect((JSON.parse(res.body.toString('utf8')) as { code: string }).code, path).toBe('not_found');
      expect(res.body.toString('utf8'), path).not.toContain('"version"');
    }
  });
});
