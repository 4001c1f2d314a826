#!/usr/bin/env node
/**
 * `npm install` builds the service (the `prepare` script), so that `npm start` and
 * `npm run dunwall` have something to run. An install without the dev dependencies
 * (`npm ci --omit=dev`) has no compiler: it skips the build and says so, instead of failing.
 * A server runs a release folder (`npm run release`), which is built already.
 *
 * `npx dunwall` (or `npm exec dunwall`) typed in this folder does not run the build that
 * `npm install` made: npm sees that this package has a `dunwall` bin, links the folder into
 * its own cache and runs its `prepare` there, the whole build, before the command. When the
 * build is there, that run skips it: `npm run build` rebuilds on purpose.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
if (!existsSync(join(root, 'node_modules', 'typescript', 'package.json'))) {
  process.stderr.write(
    'prepare: no dev dependencies (npm ci --omit=dev?): not building; npm start runs dist/ as it is\n',
  );
  process.exit(0);
}
if (process.env.npm_command === 'exec' && existsSync(join(root, 'dist', 'src', 'cli', 'main.js'))) {
  process.stderr.write('prepare: npm exec: dist/ is built already; not rebuilding (npm run build does)\n');
  process.exit(0);
}
execFileSync(process.platform === 'win32' ? 'npm.cmd' : 'npm', ['run', 'build'], { cwd: root, stdio: 'inherit' });
