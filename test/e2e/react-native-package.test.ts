import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { packedTarball } from '../helpers/packed.js';
import { afterAll, describe, expect, it } from 'vitest';

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/** Every module a file imports, statically or dynamically, or requires. */
function importsOf(code: string): string[] {
  const found = new Set<string>();
  for (const m of code.matchAll(/(?:^|[;\s}])(?:import|export)\s*(?:[\w*{}\s,$]+\s*from\s*)?["']([^"']+)["']/g))
    found.add(m[1] ?? '');
  for (const m of code.matchAll(/\b(?:import|require)\s*\(\s*["'`]([^"'`]+)["'`]\s*\)/g)) found.add(m[1] ?? '');
  return [...found].sort();
}

/**
 * `@dunwall/react-native` as its users get it: packed with `npm pack`, installed into an
 * empty project beside React alone (React Native is the app's: a stand-in module here),
 * importing nothing but React and React Native, and rendering its banner.
 */
describe('the @dunwall/react-native package', () => {
  const dirs: string[] = [];
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('packs with no dependency, installs alone, imports only react and react-native, and draws the banner', async () => {
    const packed = mkdtempSync(join(tmpdir(), 'dunwall-pack-'));
    const project = mkdtempSync(join(tmpdir(), 'dunwall-rn-app-'));
    dirs.push(packed, project);
    const tarball = packedTarball('react-native', packed);

    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({ name: 'an-app', version: '1.0.0', private: true, type: 'module' }),
    );
    // React Native is the app's (an optional peer: npm does not fetch its 175 MB tree for it).
    execFileSync(npm, ['install', tarball, 'react@19', 'react-dom@19', '--no-audit', '--no-fund', '--offline'], {
      cwd: project,
      stdio: 'pipe',
      timeout: 120_000,
    });
    const installed = join(project, 'node_modules', '@dunwall', 'react-native');
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
      dependencies?: object;
      peerDependencies?: Record<string, string>;
      peerDependenciesMeta?: object;
      type: string;
      types: string;
    };
    expect(manifest.dependencies).toBeUndefined();
    expect(manifest.peerDependencies).toEqual({ react: '^18.0.0 || ^19.0.0', 'react-native': '>=0.72.0' });
    expect(manifest.peerDependenciesMeta).toEqual({ 'react-native': { optional: true } });
    expect(manifest.type).toBe('module');
    // Nothing came with it but what the app installed.
    expect(readdirSync(join(project, 'node_modules')).filter((d) => !d.startsWith('.'))).toEqual([
      '@dunwall',
      'react',
      'react-dom',
      'scheduler',
    ]);
    expect(readdirSync(join(project, 'node_modules', '@dunwall'))).toEqual(['react-native']);

    const bundle = readFileSync(join(installed, 'dist', 'index.js'), 'utf8');
    expect(importsOf(bundle)).toEqual(['react', 'react-native', 'react/jsx-runtime']);
    // The declarations name React Native's own types; the subset the repository checks against is not published.
    expect(existsSync(join(installed, 'types'))).toBe(false);
    const components = readFileSync(
      join(installed, 'dist', 'types', 'packages', 'react-native', 'src', 'components.d.ts'),
      'utf8',
    );
    expect(components).toContain("from 'react-native';");
    expect(components).not.toContain('/// <reference');
    expect(existsSync(join(installed, manifest.types))).toBe(true);

    // A stand-in for React Native: its primitives as host elements, enough for a server render.
    const stub = join(project, 'node_modules', 'react-native');
    mkdirSync(stub);
    writeFileSync(
      join(stub, 'package.json'),
      JSON.stringify({ name: 'react-native', version: '0.79.0', type: 'module', main: 'index.js' }),
    );
    writeFileSync(
      join(stub, 'index.js'),
      `import { createElement } from 'react';
const host = (tag) => (p) => createElement(tag, { role: p.accessibilityRole, 'aria-label': p.accessibilityLabel, 'data-testid': p.testID }, typeof p.children === 'function' ? null : p.children);
export const View = host('div'), SafeAreaView = host('div'), Text = host('span'), Pressable = host('a'), Image = host('img'), Modal = host('dialog');
export const AppState = { currentState: 'active', addEventListener: () => ({ remove() {} }) };
export const Linking = { openURL: async () => true };
`,
    );
    writeFileSync(
      join(project, 'render.mjs'),
      `import { createElement as h } from 'react';
import { renderToString } from 'react-dom/server';
import { BillingBanner, BillingGate, DunwallProvider } from '@dunwall/react-native';
const lockout_at = new Date(Date.now() + 3 * 86400000 + 3600000).toISOString();
const bootstrap = { status: 'warning', lockout_at, pay_url: 'https://pay.acme.test/i/1', card_update_url: 'https://billing.acme.test/card' };
const app = (status) => h(DunwallProvider, { baseUrl: 'https://dunwall.invalid', tenant: 'acme', publishableKey: 'pk_test_x', customer: 'cus_1', bootstrap: { ...bootstrap, status } },
  h(BillingBanner, { languages: 'en-US' }), h(BillingGate));
console.log(JSON.stringify({ warning: renderToString(app('warning')), lockout: renderToString(app('lockout')) }));
`,
    );
    const { stdout } = await promisify(execFile)(process.execPath, ['render.mjs'], {
      cwd: project,
      env: { PATH: process.env.PATH ?? '' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    const html = JSON.parse(stdout) as { warning: string; lockout: string };
    expect(html.warning).toContain('role="alert"');
    expect(html.warning).toContain('Access will be paused in 3 days.');
    expect([...html.warning.matchAll(/role="link" aria-label="([^"]+)"/g)].map((m) => m[1])).toEqual([
      'Pay now',
      'Update card',
    ]);
    expect(html.warning).toContain('role="button" aria-label="Dismiss"');
    // A lockout the app did not hear from the service itself: a banner, never the gate.
    expect(html.lockout).toContain('role="alert"');
    expect(html.lockout).not.toContain('<dialog');
  });
});
