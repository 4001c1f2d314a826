import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const run = promisify(execFile);
const PEERS = '^18.0.0 || ^19.0.0';

/**
 * `@dunwall/react` as its users get it: packed with `npm pack`, installed alone into an empty
 * project beside React 19 from the registry (its only peers), its declarations read by
 * TypeScript as a consumer's app reads them, and its banner rendered by `react-dom/server`
 * in plain Node.
 */
describe('the @dunwall/react package', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it(
    'packs with React as its only peer, installs beside React 19, type-checks in a consumer, and renders its banner on the server',
    { timeout: 300_000 },
    async () => {
      const packed = mkdtempSync(join(tmpdir(), 'dunwall-react-pack-'));
      const project = mkdtempSync(join(tmpdir(), 'dunwall-react-app-'));
      dirs.push(packed, project);
      // `prepack` builds it (the bundle, its size against the budget, the declarations).
      const pack = await run(npm, ['pack', '--workspace', '@dunwall/react', '--pack-destination', packed], {
        cwd: ROOT,
        timeout: 180_000,
      });
      const [tarball] = readdirSync(packed).filter((f) => f.endsWith('.tgz'));
      if (tarball === undefined) throw new Error('npm pack wrote no tarball');
      const budgetLine =
        `${pack.stdout}${pack.stderr}`.split('\n').find((l) => l.startsWith('@dunwall/react:')) ?? '(no size line)';
      console.log(`${tarball}: ${statSync(join(packed, tarball)).size} bytes packed; ${budgetLine}`);

      writeFileSync(
        join(project, 'package.json'),
        JSON.stringify({ name: 'an-app', version: '1.0.0', private: true, type: 'module' }),
      );
      await run(
        npm,
        [
          'install',
          join(packed, tarball),
          'react@19',
          'react-dom@19',
          '@types/react@19',
          '--no-audit',
          '--no-fund',
          '--prefer-offline',
        ],
        {
          cwd: project,
          timeout: 180_000,
        },
      );
      const installed = join(project, 'node_modules', '@dunwall', 'react');
      const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
        dependencies?: object;
        peerDependencies?: Record<string, string>;
        type: string;
      };
      expect(manifest.dependencies).toBeUndefined();
      expect(manifest.peerDependencies).toEqual({ react: PEERS, 'react-dom': PEERS });
      expect(manifest.type).toBe('module');
      expect(existsSync(join(installed, 'LICENSE'))).toBe(true);
      // Nothing came with it but what the app asked for: React, its DOM (and its scheduler), React's types.
      expect(readdirSync(join(project, 'node_modules')).filter((d) => !d.startsWith('.'))).toEqual([
        '@dunwall',
        '@types',
        'csstype',
        'react',
        'react-dom',
        'scheduler',
      ]);

      // One module, importing React and nothing else; marked for the App Router's client side.
      const bundle = readFileSync(join(installed, 'dist', 'index.js'), 'utf8');
      const imported = new Set(
        [...bundle.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)["']([^"']+)["']/g)].map((m) => m[1]),
      );
      expect([...imported].sort()).toEqual(['react', 'react-dom', 'react/jsx-runtime']);
      expect(bundle).not.toMatch(/\brequire\s*\(/);
      expect(bundle.startsWith("'use client';")).toBe(true);
      console.log(
        `dist/index.js: ${bundle.length} bytes, ${gzipSync(bundle, { level: 9 }).length} gzipped (not minified)`,
      );

      // A consumer's TypeScript, both ways an app resolves packages.
      writeFileSync(
        join(project, 'app.tsx'),
        `import { BillingBanner, DunwallProvider, useBillingFetch, useBillingStatus, useEntitlement } from '@dunwall/react';
import type { BillingBootstrap, BillingState } from '@dunwall/react';

function Plan() {
  const state: BillingState = useBillingStatus();
  const exports: boolean = useEntitlement('csv_export');
  // The app's own API: fetch, with its 402 billing_lockout gating.
  const api: typeof fetch = useBillingFetch();
  void api('/api/projects', { headers: { accept: 'application/json' } });
  return <p>{state.status} {state.lockoutAt ?? ''} {String(exports)}</p>;
}

const bootstrap: BillingBootstrap = { status: 'warning', lockout_at: '2030-01-01T00:00:00Z', at: Date.now() };
// @ts-expect-error: a status Dunwall never answers
const wrong: BillingBootstrap = { status: 'blocked' };

export const app = (
  <DunwallProvider baseUrl="https://dunwall.example.com" tenant="acme" publishableKey="pk_test" customer="cus_1" bootstrap={bootstrap} debug>
    <BillingBanner dismissible={false} texts={{ update: 'Pay' }}>{(view) => <a href={view.links[0]?.href}>{view.texts.update}</a>}</BillingBanner>
    <Plan />
  </DunwallProvider>
);
export { wrong };
`,
      );
      const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
      for (const [module, moduleResolution] of [
        ['esnext', 'bundler'],
        ['nodenext', 'nodenext'],
      ] as const) {
        const config = `tsconfig.${moduleResolution}.json`;
        writeFileSync(
          join(project, config),
          JSON.stringify({
            compilerOptions: {
              strict: true,
              noEmit: true,
              jsx: 'react-jsx',
              target: 'es2022',
              lib: ['es2022', 'dom'],
              module,
              moduleResolution,
              skipLibCheck: false,
            },
            files: ['app.tsx'],
          }),
        );
        const checked = await run(process.execPath, [tsc, '-p', config], { cwd: project, timeout: 120_000 }).then(
          () => 'ok',
          (err: { stdout?: string }) => err.stdout ?? String(err),
        );
        expect(checked, moduleResolution).toBe('ok');
      }

      // Server rendering in plain Node: the bootstrap's banner, a lockout shown as the banner (never the gate), nothing when active.
      writeFileSync(
        join(project, 'render.mjs'),
        `import { createElement as h } from 'react';
import { renderToString } from 'react-dom/server';
import { BillingBanner, BillingGate, DunwallProvider } from '@dunwall/react';
const page = (bootstrap, customer = 'cus_1') =>
  renderToString(h(DunwallProvider, { baseUrl: 'https://dunwall.example.com', tenant: 'acme', publishableKey: 'pk_test', customer, bootstrap }, h(BillingBanner), h('main', null, 'app'), h(BillingGate)));
console.log(JSON.stringify({
  warning: page({ status: 'warning', lockout_at: '2030-01-01T00:00:00Z', pay_url: 'https://invoice.stripe.com/i/acct_1/test_in_1' }),
  lockout: page({ status: 'lockout' }),
  active: page({ status: 'active' }),
  signedOut: page({ status: 'warning' }, null),
}));
`,
      );
      const { stdout } = await run(process.execPath, ['render.mjs'], {
        cwd: project,
        env: { PATH: process.env.PATH ?? '' },
        timeout: 30_000,
      });
      const html = JSON.parse(stdout) as Record<'warning' | 'lockout' | 'active' | 'signedOut', string>;
      console.log(`rendered warning banner: ${html.warning.length} bytes of HTML`);
      expect(html.warning).toMatch(/^<div role="alert" data-status="warning" class="dunwall-banner"><style>/);
      expect(html.warning).toContain('Your last payment did not go through.');
      // React writes the prop's name (`dateTime`); HTML's attribute names ignore case.
      expect(html.warning).toMatch(/<time datetime="2030-01-01T00:00:00Z"><\/time>/i);
      expect(html.warning).toContain(
        '<a href="https://invoice.stripe.com/i/acct_1/test_in_1" class="dunwall-go" rel="noopener" target="_blank">Pay now</a>',
      );
      expect(html.warning).toMatch(/<main>app<\/main>$/);
      expect(html.lockout).toContain('data-status="warning"');
      expect(html.lockout).not.toContain('role="dialog"');
      expect(html.active).toBe('<main>app</main>');
      expect(html.signedOut).toBe('<main>app</main>');
    },
  );
});
