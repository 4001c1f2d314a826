import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ts from 'typescript';
import { packedTarball } from '../helpers/packed.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/http/app.js';
import { computeHmac } from '../../src/domain/hmac.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { ADMIN_TOKEN, buildAppWithModel } from '../helpers/harness.js';
import { portOf } from '../helpers/socket.js';

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/**
 * `@dunwall/client` as its users get it: packed with `npm pack`, installed alone into an
 * empty project (no checkout, no other package beside it), asking a running service.
 */
describe('the @dunwall/client package', () => {
  let store: Store;
  let app: App;
  let base = '';
  let key = '';
  let secret = '';
  const dirs: string[] = [];

  beforeAll(async () => {
    store = await openStore({ engine: 'embedded', dataDir: null });
    app = await buildAppWithModel({ store, adminToken: ADMIN_TOKEN });
    base = `http://127.0.0.1:${await portOf(app)}`;
    const admin = (method: string, path: string, body: unknown) =>
      app.inject({
        method: method as 'POST',
        url: `/admin/v1${path}`,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        payload: JSON.stringify(body),
      });
    const created = (
      await admin('POST', '/tenants', { slug: 'acme', card_update_url: 'https://billing.acme.test/card' })
    ).json() as {
      publishable_key: string;
      hmac_secret: string;
    };
    key = created.publishable_key;
    secret = created.hmac_secret;
    await admin('PUT', '/tenants/acme/subscribers/cus_pkg', { status: 'warning' });
  });
  afterAll(async () => {
    await app.close();
    await store.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('packs with no dependency, installs alone, and answers from a running service, failing open when it is not', async () => {
    const packed = mkdtempSync(join(tmpdir(), 'dunwall-pack-'));
    const project = mkdtempSync(join(tmpdir(), 'dunwall-app-'));
    dirs.push(packed, project);
    const tarball = packedTarball('client', packed);

    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({ name: 'an-app', version: '1.0.0', private: true, type: 'module' }),
    );
    execFileSync(npm, ['install', tarball, '--no-audit', '--no-fund', '--offline'], {
      cwd: project,
      stdio: 'pipe',
      timeout: 120_000,
    });
    const installed = join(project, 'node_modules', '@dunwall', 'client');
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
      dependencies?: object;
      type: string;
    };
    expect(manifest.dependencies).toBeUndefined();
    expect(manifest.type).toBe('module');
    expect(existsSync(join(installed, 'dist', 'index.d.ts'))).toBe(true);
    // Its types, as the app's compiler sees them from this install alone, name what a known
    // subscriber's body may hold and the preview option (and nothing outside the package).
    writeFileSync(
      join(project, 'types.ts'),
      [
        "import type { KnownSubscriberBody, StatusRequest } from '@dunwall/client';",
        'const flags = { powered_by_watermark: true, custom_domain: false, downstream_webhooks: false };',
        "export const body: KnownSubscriberBody = { status: 'warning', card_update_url: null, entitlements: flags, lockout_at: '2026-12-03T12:00:00Z', pay_url: 'https://pay.example/1' };",
        "export const preview: StatusRequest['preview'] = 'lockout';",
        '// @ts-expect-error: active is no preview',
        "export const notPreview: StatusRequest['preview'] = 'active';",
      ].join('\n'),
    );
    const program = ts.createProgram([join(project, 'types.ts')], {
      strict: true,
      noEmit: true,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2022,
      types: [],
    });
    expect(ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))).toEqual(
      [],
    );
    // Nothing else came with it.
    expect(readdirSync(join(project, 'node_modules')).filter((d) => !d.startsWith('.'))).toEqual(['@dunwall']);

    const script = `
      import { createClient } from '@dunwall/client';
      const asked = [];
      const client = createClient({ cacheTtlMs: 0, fetch: (url, init) => (asked.push(String(url)), fetch(url, init)) });
      const ask = (baseUrl, extra = {}) => client.getSubscriberStatus({ baseUrl, tenant: 'acme', publishableKey: process.env.KEY, customerId: 'cus_pkg', hmac: process.env.HMAC, timeoutMs: 2000, ...extra });
      const up = await ask(process.env.BASE);
      const down = await ask('http://127.0.0.1:9');
      // A live tenant treats preview as an unknown parameter: the real answer comes back.
      const preview = await ask(process.env.BASE, { preview: 'lockout' });
      console.log(JSON.stringify({ up: up.source === 'fallback' ? { ...up, error: String(up.error?.message ?? up.error?.kind) } : up, down: { status: down.status, source: down.source, kind: down.error?.kind }, preview: preview.status, sent: new URL(asked[2]).searchParams.get('preview') }));
    `;
    writeFileSync(join(project, 'check.mjs'), script);
    // Asynchronous: the service answering it runs in this process's event loop.
    const { stdout: out } = await promisify(execFile)(process.execPath, ['check.mjs'], {
      cwd: project,
      env: { PATH: process.env.PATH ?? '', BASE: base, KEY: key, HMAC: computeHmac(secret, 'cus_pkg') },
      encoding: 'utf8',
      timeout: 30_000,
    });
    const answer = JSON.parse(out) as {
      up: { status: string; card_update_url: string | null; source: string };
      down: { status: string; source: string; kind: string };
      preview: string;
      sent: string | null;
    };
    expect(answer.up).toMatchObject({
      status: 'warning',
      card_update_url: 'https://billing.acme.test/card',
      source: 'service',
    });
    expect(answer.down).toEqual({ status: 'active', source: 'fallback', kind: 'network' });
    expect([answer.preview, answer.sent]).toEqual(['warning', 'lockout']);
  });
});
