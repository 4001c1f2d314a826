import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../package-root.js';

/**
 * The npm tarballs of this service's own packages (`dist/packages/<folder>.tgz`, packed by
 * `npm run build` at the service's version), read once at start-up and served from memory
 * at `/packages/<folder>.tgz`: a request names one of these, never a path.
 */
export interface PackageTarball {
  body: Buffer;
  /** A strong validator: the SHA-256 of the bytes. */
  etag: string;
}

/** The names the build writes (scripts/pack-packages.mjs): a package folder's name, then `.tgz`. */
export const TARBALL_FILE = /^[a-z0-9][a-z0-9-]{0,62}\.tgz$/;

/** A package is a few tens of KB: a file far larger is not one the build wrote. */
export const MAX_TARBALL_BYTES = 8 * 1024 * 1024;

export type PackageTarballs = ReadonlyMap<string, PackageTarball>;

export function packagesDir(): string {
  return join(packageRoot(), 'dist', 'packages');
}

export function packageTarball(body: Buffer): PackageTarball {
  return { body, etag: `"${createHash('sha256').update(body).digest('base64url')}"` };
}

/**
 * The tarballs in `dir`, by file name (`client.tgz`), or null when the folder does not exist
 * (the service runs from sources, or was built before the packages were packed). Only regular
 * files with a tarball's name are read: a folder, a link or any other name is left alone.
 */
export function loadPackageTarballs(dir = packagesDir()): PackageTarballs | null {
  if (!existsSync(dir)) return null;
  const tarballs = new Map<string, PackageTarball>();
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isFile() || !TARBALL_FILE.test(entry.name)) continue;
    const path = join(dir, entry.name);
    // Not a file the build wrote: the service does not start on it rather than serve it.
    const bytes = statSync(path).size;
    if (bytes > MAX_TARBALL_BYTES)
      throw new Error(`${path}: ${bytes} bytes, more than a package tarball may be (${MAX_TARBALL_BYTES})`);
    tarballs.set(entry.name, packageTarball(readFileSync(path)));
  }
  return tarballs;
}
