#!/usr/bin/env node
/**
 * `npm install` builds the service (the `prepare` script), so that `npm start` has something
 * to run. An install without the dev dependencies (`npm ci --omit=dev`) has no compiler: it
 * skips the build and says so, instead of failing. A server runs a release folder
 * (`npm run release`), which is built already.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
if (!existsSync(join(root, 'node_modules', 'typescript', 'package.json'))) {
  process.stderr.write('prepare: no dev dependencies (npm ci --omit=dev?): not building; npm start runs dist/ as it is\n');
  process.exit(0);
}
execFileSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['run', 'build'], { cwd: root, stdio: 'inherit' });
