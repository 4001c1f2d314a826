import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { packageRoot } from '../package-root.js';

/**
 * The console's built files (`npm run build` writes them with console/build.mjs): the one
 * HTML page, whatever the path under /console, and the scripts and styles it names, each
 * under a name that changes with its bytes, so they are cached for good. Read once at
 * start, gzipped once.
 */
export interface ConsoleFile {
  body: Buffer;
  gzipped: Buffer;
  contentType: string;
  etag: string;
}

export interface ConsoleAssets {
  page: ConsoleFile;
  /** By file name (console-<hash>.js ...). */
  files: ReadonlyMap<string, ConsoleFile>;
}

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.html': 'text/html; charset=utf-8',
  '.svg': 'image/svg+xml',
};

export function consoleDir(): string {
  return join(packageRoot(), 'dist', 'console');
}

function file(body: Buffer, name: string): ConsoleFile {
  const tag = createHash('sha256').update(body).digest('base64url').slice(0, 22);
  return {
    body,
    gzipped: gzipSync(body, { level: 9 }),
    contentType: TYPES[extname(name)] ?? 'application/octet-stream',
    etag: `"${tag}"`,
  };
}

/** The built console, or null when it has not been built. */
export function loadConsoleAssets(dir = consoleDir()): ConsoleAssets | null {
  const index = join(dir, 'index.html');
  if (!existsSync(index)) return null;
  const files = new Map<string, ConsoleFile>();
  const assets = join(dir, 'assets');
  if (existsSync(assets)) {
    for (const name of readdirSync(assets))
      if (TYPES[extname(name)] !== undefined) files.set(name, file(readFileSync(join(assets, name)), name));
  }
  return { page: file(readFileSync(index), index), files };
}
