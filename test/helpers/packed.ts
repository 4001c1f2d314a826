import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../..');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

/** The newest modification time among the files of `dir`, its build outputs and installs left out. */
function newestMs(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name === 'dist') continue;
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMs(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/**
 * The tarball of `packages/<folder>` as `npm pack` makes it. `npm run build` packed every
 * package into `dist/packages/<folder>.tgz` (scripts/pack-packages.mjs, with the same `npm pack`,
 * whose `prepack` builds the package): when that tarball is newer than every source file of the
 * packages (they share code), it is the one installed, instead of a second build of the same
 * files; otherwise the package is packed afresh into `into`.
 */
export function packedTarball(folder: string, into: string): string {
  const built = join(ROOT, 'dist', 'packages', `${folder}.tgz`);
  if (existsSync(built) && statSync(built).mtimeMs > newestMs(join(ROOT, 'packages'))) return built;
  execFileSync(npm, ['pack', '--workspace', `packages/${folder}`, '--pack-destination', into], {
    cwd: ROOT,
    stdio: 'pipe',
    timeout: 180_000,
  });
  const [tarball] = readdirSync(into).filter((f) => f.endsWith('.tgz'));
  if (tarball === undefined) throw new Error(`npm pack of packages/${folder} wrote no tarball`);
  return join(into, tarball);
}
