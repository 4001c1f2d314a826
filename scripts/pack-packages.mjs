#!/usr/bin/env node
/**
 * Packs every package of `packages/*` that is not private into `dist/packages/<folder>.tgz`
 * (run by `npm run build`), with `npm pack`, whose `prepack` builds each package. The service
 * serves these files at `/packages/<folder>.tgz`, so that `npm install https://<dunwall>/packages/client.tgz`
 * installs the client of the very version the service runs: a package whose version differs
 * from the service's fails the build, before anything is packed.
 *
 * The packages are found, not listed: a new folder with a package.json is packed too.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist', 'packages');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
/** A package's own build (tsc) runs inside `npm pack`: bounded all the same. */
const PACK_TIMEOUT_MS = 180_000;
/** The names the service accepts in `/packages/:file` (src/http/package-tarballs.ts). */
const FOLDER_NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;

const readJson = (path) => JSON.parse(readFileSync(path, 'utf8'));
const { version } = readJson(join(root, 'package.json'));

const packages = [];
for (const folder of readdirSync(join(root, 'packages')).sort()) {
  const manifest = join(root, 'packages', folder, 'package.json');
  if (!existsSync(manifest)) continue;
  const pkg = readJson(manifest);
  if (pkg.private === true) continue;
  if (!FOLDER_NAME.test(folder))
    throw new Error(
      `packages/${folder}: a package folder's name must match ${FOLDER_NAME} (it becomes /packages/${folder}.tgz)`,
    );
  packages.push({ folder, name: pkg.name, version: pkg.version });
}

// The service serves these as its own version's packages: every one must be that version.
const stale = packages.filter((p) => p.version !== version);
if (stale.length > 0) {
  for (const p of stale)
    process.stderr.write(`packages: ${p.name} (packages/${p.folder}) is ${p.version}, the service is ${version}\n`);
  process.stderr.write('packages: set every package to the version of the root package.json\n');
  process.exit(1);
}

/** `npm pack` of one package into `dir`; false, its errors written, when it fails. */
function pack(folder, dir) {
  try {
    execFileSync(npm, ['pack', '--workspace', `packages/${folder}`, '--pack-destination', dir, '--silent'], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'inherit'],
      timeout: PACK_TIMEOUT_MS,
    });
    return true;
  } catch (err) {
    // On success stdout holds the tarball's name only; on a failure, the package's build errors (tsc writes them there).
    process.stderr.write(String(err.stdout ?? ''));
    process.stderr.write(
      `packages: npm pack of packages/${folder} failed (${err.signal ?? `exit code ${err.status}`})\n`,
    );
    return false;
  }
}

mkdirSync(out, { recursive: true });
// Run alone (the build empties dist/ first), a tarball left from an earlier run must not outlive its package.
for (const file of readdirSync(out)) if (file.endsWith('.tgz')) rmSync(join(out, file), { force: true });
for (const { folder, name } of packages) {
  // An empty folder of its own, so that the one tarball in it is this package's, whatever npm names it.
  const staging = mkdtempSync(join(out, `.${folder}-`));
  try {
    if (!pack(folder, staging)) {
      process.exitCode = 1;
      break;
    }
    const tarballs = readdirSync(staging).filter((f) => f.endsWith('.tgz'));
    if (tarballs.length !== 1) throw new Error(`npm pack of packages/${folder} wrote ${tarballs.length} tarballs`);
    const target = join(out, `${folder}.tgz`);
    renameSync(join(staging, tarballs[0]), target);
    const bytes = statSync(target).size;
    process.stderr.write(
      `packages: ${relative(root, target)}, ${bytes} bytes (${(bytes / 1024).toFixed(1)} KB), ${name}@${version}\n`,
    );
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
}
if (packages.length === 0) process.stderr.write('packages: none to pack\n');
