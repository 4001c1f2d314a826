import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from './package-root.js';

export interface SnippetAsset {
  body: Buffer;
  /** A strong validator of the exact bytes. */
  etag: string;
}

export function snippetPath(): string {
  return join(packageRoot(), 'dist', 'snippet', 'snippet.js');
}

export function snippetAsset(body: Buffer): SnippetAsset {
  return { body, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"` };
}

/** The built snippet (`npm run build`), or null when it has not been built. */
export function loadSnippet(path = snippetPath()): SnippetAsset | null {
  return existsSync(path) ? snippetAsset(readFileSync(path)) : null;
}
