import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { packageRoot } from '../package-root.js';

export interface SnippetAsset {
  body: Buffer;
  /** The same, gzipped once at start-up for the clients that accept it. */
  gzipped: Buffer;
  /** A strong validator of the exact bytes (the gzipped variant has its own). */
  etag: string;
  gzippedEtag: string;
}

export function snippetPath(): string {
  return join(packageRoot(), 'dist', 'snippet', 'snippet.js');
}

export function snippetAsset(body: Buffer): SnippetAsset {
  const tag = createHash('sha256').update(body).digest('base64url').slice(0, 22);
  return { body, gzipped: gzipSync(body, { level: 9 }), etag: `"${tag}"`, gzippedEtag: `"${tag}-gz"` };
}

/** The built snippet (`npm run build`), or null when it has not been built. */
export function loadSnippet(path = snippetPath()): SnippetAsset | null {
  return existsSync(path) ? snippetAsset(readFileSync(path)) : null;
}
