import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { anchorsOf } from '../helpers/markdown.js';

/**
 * Someone who clones the project can follow every citation in it: no tracked file (code,
 * comment, doc, test, migration) points at a document or a path that is not in the
 * repository. The contract lives in docs/reference.md; a citation of it names its section
 * (`docs/reference.md#the-lookup`), and that section exists.
 *
 * The patterns are built from pieces, so that this file, which is tracked too, does not
 * match them itself.
 */

const ROOT = resolve(import.meta.dirname, '../..');

/** Documents that used to be cited and are not in the repository, and paths outside it. */
const OUTSIDE = [
  new RegExp(['CONTRACT', 'md'].join('\\.')),
  new RegExp(['DESIGN', 'md'].join('\\.')),
  // The same document by its name alone, followed by a section number or a colon.
  new RegExp(`\\b${'CONTRACT'}(?: sections? \\d|:)`),
  new RegExp(['\\.\\.', 'shared\\b'].join('/')),
  new RegExp(['(?:^|[\\s(\'"`])', 'work', ''].join('/')),
];

/** Files that cannot hold a citation. */
const BINARY = /\.(?:png|jpe?g|gif|webp|ico|woff2?|ttf|tgz|gz|zip|pdf)$/i;

function trackedFiles(): string[] {
  return execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
    .split('\0')
    .filter((path) => path !== '' && !BINARY.test(path));
}

function readText(path: string): string | null {
  let bytes: Buffer;
  try {
    bytes = readFileSync(join(ROOT, path));
  } catch {
    return null; // listed but absent (deleted in the work tree)
  }
  return bytes.includes(0) ? null : bytes.toString('utf8');
}

describe('citations stay inside the repository', () => {
  const files = trackedFiles();

  it('lists the tracked files', () => {
    expect(files).toContain('docs/reference.md');
    expect(files.length).toBeGreaterThan(100);
  });

  it('no tracked file cites a document or a path outside the repository', () => {
    const found: string[] = [];
    for (const path of files) {
      const text = readText(path);
      if (text === null) continue;
      text.split('\n').forEach((line, i) => {
        if (OUTSIDE.some((re) => re.test(line))) found.push(`${path}:${i + 1}: ${line.trim()}`);
      });
    }
    expect(found).toEqual([]);
  });

  it('every citation of docs/reference.md names a section it has', () => {
    const reference = readFileSync(join(ROOT, 'docs/reference.md'), 'utf8');
    const anchors = anchorsOf(reference);
    const broken: string[] = [];
    for (const path of files) {
      const text = readText(path);
      if (text === null) continue;
      for (const m of text.matchAll(/\breference\.md#([a-z0-9-]+)/g)) {
        if (!anchors.has(m[1] ?? '')) broken.push(`${path}: #${m[1] ?? ''}`);
      }
    }
    expect(broken).toEqual([]);
  });
});
