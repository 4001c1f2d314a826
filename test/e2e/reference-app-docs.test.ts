import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The docs show the reference app's files as they are. A page shows one with the file's path
 * in a comment on the line before its fenced block:
 *
 *     <!-- examples/saas/server/index.ts -->
 *     ```ts
 *     ...the file, byte for byte...
 *     ```
 *
 * Every such block of README.md and docs/*.md is its file; docs/first-hour.md shows every file
 * of the app but the few a reader never edits; and every setting the app reads is named there.
 */
const ROOT = resolve(import.meta.dirname, '../..');
const APP = join(ROOT, 'examples', 'saas');
const FIRST_HOUR = 'docs/first-hour.md';
/** Files the page does not show: the folder's README, the HTML shells, the phone screen's web entry, the compiler's settings. */
const NOT_SHOWN = ['.gitignore', 'README.md', 'index.html', 'mobile.html', 'tsconfig.json', 'web/mobile.tsx'];
const MARKED = /<!-- (examples\/saas\/\S+) -->\n```[a-z]*\n([\s\S]*?)```\n/g;

function pages(): string[] {
  const docs = readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`);
  return ['README.md', ...docs];
}

function appFiles(dir = APP): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (['node_modules', 'dist', 'package-lock.json', '.env'].includes(name)) return [];
    return statSync(path).isDirectory() ? appFiles(path) : [relative(APP, path)];
  });
}

describe('the reference app in the docs', () => {
  it('every block marked with a file of examples/saas is that file, byte for byte', () => {
    let blocks = 0;
    for (const page of pages()) {
      const text = readFileSync(join(ROOT, page), 'utf8');
      const markers = text.match(/<!-- examples\/saas\/\S+ -->/g)?.length ?? 0;
      const marked = [...text.matchAll(MARKED)];
      // A marker not followed by a fenced block is a mistake too.
      expect(marked.length, `${page}: markers without their block`).toBe(markers);
      for (const [, path = '', code = ''] of marked) {
        expect(code, `${page}: ${path}`).toBe(readFileSync(join(ROOT, path), 'utf8'));
        blocks += 1;
      }
    }
    expect(blocks).toBeGreaterThan(0);
  });

  it(`${FIRST_HOUR} shows every file of the app a team edits, each once`, () => {
    const text = readFileSync(join(ROOT, FIRST_HOUR), 'utf8');
    const shown = [...text.matchAll(MARKED)].map((m) => (m[1] ?? '').slice('examples/saas/'.length));
    expect(new Set(shown).size).toBe(shown.length);
    const files = appFiles();
    for (const f of NOT_SHOWN) expect(files, `${f} is listed as not shown but is not a file of the app`).toContain(f);
    expect(shown.sort()).toEqual(files.filter((f) => !NOT_SHOWN.includes(f)).sort());
  });

  it(`${FIRST_HOUR} names every setting the app reads, and README.md links to it`, () => {
    const text = readFileSync(join(ROOT, FIRST_HOUR), 'utf8');
    const read = new Set<string>();
    for (const f of appFiles().filter((f) => /\.tsx?$/.test(f))) {
      const code = readFileSync(join(APP, f), 'utf8');
      for (const m of code.matchAll(/(?:process\.env|import\.meta\.env|env)\.([A-Z][A-Z0-9_]+)/g)) read.add(m[1] ?? '');
    }
    // Expo's values on the web are the page's (vite.config.ts): the page names those.
    const settings = [...read].filter((name) => !name.startsWith('EXPO_PUBLIC_') && !['PORT', 'HOST'].includes(name));
    expect(settings.sort()).toEqual([
      'DUNWALL_HMAC_SECRET',
      'DUNWALL_SECRET_KEY',
      'DUNWALL_URL',
      'VITE_DUNWALL_KEY',
      'VITE_DUNWALL_TENANT',
      'VITE_DUNWALL_URL',
    ]);
    for (const name of settings) expect(text.replace(MARKED, ''), name).toContain(`${name}=`);
    expect(readFileSync(join(ROOT, 'README.md'), 'utf8')).toContain('(docs/first-hour.md)');
  });
});
