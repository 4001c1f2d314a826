import { spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMMANDS } from '../../src/cli/commands/index.js';
import type { App } from '../../src/http/app.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { ADMIN_TOKEN, buildAppWithModel } from '../helpers/harness.js';
import { portOf } from '../helpers/socket.js';

/**
 * The `dunwall` command as the docs run it: in a clone, `npm run -s dunwall -- ...` (the
 * package's own bin, `dist/src/cli/main.js`, which `npm install` built), never `npx dunwall`,
 * which outside a clone fetches whatever the public registry holds under that name, and inside
 * one used to rebuild the project before its first command.
 */
const ROOT = resolve(import.meta.dirname, '../..');
const BUILT = existsSync(join(ROOT, 'dist', 'src', 'cli', 'main.js'));
if (!BUILT && process.env.CI === 'true')
  throw new Error('dist/ is not built: CI builds it with npm ci before the tests');
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';

const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  bin: Record<string, string>;
  scripts: Record<string, string>;
};
const pages = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
].map((path) => ({ path, text: readFileSync(join(ROOT, path), 'utf8') }));

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

function spawned(command: string, args: string[], env: Record<string, string>, stdin = ''): Promise<Result> {
  return new Promise((done, fail) => {
    const child = spawn(command, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', fail);
    child.on('close', (code) => done({ code, stdout, stderr }));
    child.stdin.end(stdin);
  });
}

describe('the docs run this project’s own command', () => {
  it('say npm run -s dunwall (the package’s own bin) and never npx dunwall or a bare dunwall command', () => {
    expect(pkg.scripts.dunwall).toBe(`node ${pkg.bin.dunwall}`);
    for (const { path, text } of pages) {
      // A page may warn against it (`npx dunwall`), never run a command with it.
      expect(text.match(/(?:npx|npm exec) dunwall [a-z-]/g), path).toBeNull();
      // In a shell block, a command line starting with a bare `dunwall` is "command not found" in a clone.
      const shell = [...text.matchAll(/```sh\n([\s\S]*?)```/g)].flatMap((m) => (m[1] ?? '').split('\n'));
      const bare = shell.filter((line) => /^\s*(\S+=\S+ )*dunwall /.test(line) || /\| *dunwall /.test(line));
      expect(bare, path).toEqual([]);
    }
  });

  it('name commands that exist, wherever they run one', () => {
    const names = new Set(COMMANDS.map((c) => c.name));
    let seen = 0;
    for (const { path, text } of pages) {
      for (const m of text.matchAll(
        /(?:npm run -s dunwall --|node dist\/src\/cli\/main\.js) +([a-z-]+)(?: +([a-z-]+))?/g,
      )) {
        const [one = '', two = ''] = [m[1], m[2]];
        const name = names.has(`${one} ${two}`) ? `${one} ${two}` : one;
        expect(names.has(name) || name === 'help', `${path}: ${m[0]}`).toBe(true);
        seen += 1;
      }
    }
    expect(seen).toBeGreaterThan(50);
  });
});

describe.skipIf(!BUILT)('npm run -s dunwall -- ..., spawned as the docs write it', () => {
  let store: Store;
  let app: App;
  let env: Record<string, string>;

  beforeAll(async () => {
    store = await openStore({ engine: 'embedded', dataDir: null });
    app = await buildAppWithModel({ store, adminToken: ADMIN_TOKEN });
    env = { DUNWALL_URL: `http://127.0.0.1:${await portOf(app)}`, DUNWALL_ADMIN_TOKEN: ADMIN_TOKEN };
  });

  afterAll(async () => {
    await app?.close();
    await store?.close();
  });

  it('prints only what the command prints, takes stdin, and exits with its code', async () => {
    const created = await spawned(NPM, ['run', '-s', 'dunwall', '--', 'tenant', 'create', 'docs-co', '--json'], env);
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    // JSON alone on stdout: no line of npm's.
    expect(JSON.parse(created.stdout)).toMatchObject({
      slug: 'docs-co',
      publishable_key: expect.stringMatching(/^pk_/),
    });

    const key = await spawned(
      NPM,
      ['run', '-s', 'dunwall', '--', 'key', 'create', 'docs-co', '--name', 'ci', '--scopes', 'status:read', '--quiet'],
      env,
    );
    expect(key.code).toBe(0);
    expect(key.stdout).toMatch(/^sk_(live|test)_[A-Za-z0-9_-]+\n$/);

    const secret = await spawned(
      NPM,
      ['run', '-s', 'dunwall', '--', 'tenant', 'update', 'docs-co', '--stripe-webhook-secret', '-'],
      env,
      'whsec_documentedForm0123456789\n',
    );
    expect([secret.code, secret.stderr]).toEqual([0, '']);
    const shown = await spawned(NPM, ['run', '-s', 'dunwall', '--', 'tenant', 'show', 'docs-co', '--json'], env);
    expect(JSON.parse(shown.stdout)).toMatchObject({ stripe_webhook_secret_set: true });

    const missing = await spawned(NPM, ['run', '-s', 'dunwall', '--', 'tenant', 'show', 'nobody-here'], env);
    expect(missing).toEqual({ code: 1, stdout: '', stderr: 'dunwall: tenant_not_found: No tenant has this slug.\n' });
    const usage = await spawned(NPM, ['run', '-s', 'dunwall', '--'], env);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('Usage: dunwall');
  });
});

describe.skipIf(!BUILT)('npx dunwall in a clone', () => {
  let dir = '';
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'dunwall-prepare-'));
    // An npm that records being asked to build, in place of the real one.
    writeFileSync(join(dir, 'npm'), `#!/bin/sh\necho "$@" >> "${join(dir, 'calls')}"\n`);
    chmodSync(join(dir, 'npm'), 0o755);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const prepare = (npmCommand: string) =>
    spawned(process.execPath, [join(ROOT, 'scripts', 'prepare.mjs')], {
      PATH: `${dir}:${process.env.PATH ?? ''}`,
      npm_command: npmCommand,
    });
  const calls = () => (existsSync(join(dir, 'calls')) ? readFileSync(join(dir, 'calls'), 'utf8') : '');

  it('does not rebuild what npm install built: npm links the folder into its cache and runs prepare there', async () => {
    const exec = await prepare('exec');
    expect(exec.code).toBe(0);
    expect(exec.stderr).toMatch(/npm exec: dist\/ is built already; not rebuilding/);
    expect(calls()).toBe('');
    // npm install still builds.
    const install = await prepare('install');
    expect(install.code).toBe(0);
    expect(calls()).toBe('run build\n');
  });
});
