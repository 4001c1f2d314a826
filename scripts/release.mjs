#!/usr/bin/env node
/**
 * `npm run release [-- --out DIR]`: a self-contained release folder (default `release/`):
 * the built service (`dist/`, with the tarballs of its npm packages in `dist/packages/`, which
 * it serves at `/packages/<name>.tgz`), its migrations, `package.json` and the lockfile, and
 * the production dependencies only, installed from the lockfile. It starts with `node` alone:
 *
 *   cd release && node --max-semi-space-size=8 dist/src/runtime/server.js
 *
 * The Dockerfile runs exactly this step.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({ options: { out: { type: 'string' }, 'no-build': { type: 'boolean' } }, strict: true });
const out = resolve(values.out ?? join(root, 'release'));
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const step = (text) => process.stderr.write(`release: ${text}\n`);

if (!values['no-build']) {
  step('npm run build');
  execFileSync(npm, ['run', 'build'], { cwd: root, stdio: 'inherit' });
}
if (!existsSync(join(root, 'dist', 'src', 'runtime', 'server.js')))
  throw new Error('dist/ is not built: run npm run build');
const packed = join(root, 'dist', 'packages');
if (!existsSync(packed) || !readdirSync(packed).some((f) => f.endsWith('.tgz')))
  throw new Error('dist/packages holds no package tarball: run npm run build');

step(`writing ${out}`);
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
for (const entry of [
  'dist',
  'migrations',
  'package-lock.json',
  'README.md',
  'LICENSE',
  'CHANGELOG.md',
  'SECURITY.md',
]) {
  cpSync(join(root, entry), join(out, entry), { recursive: true });
}
// The release needs no build step: `prepare` (which compiles) and the dev-only scripts go.
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
pkg.scripts = { start: pkg.scripts.start };
writeFileSync(join(out, 'package.json'), `${JSON.stringify(pkg, null, 2)}\n`);

step('npm ci --omit=dev (production dependencies from the lockfile)');
execFileSync(npm, ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], {
  cwd: out,
  stdio: 'inherit',
});
step(`done: cd ${out} && node --max-semi-space-size=8 dist/src/runtime/server.js`);
