import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import express from 'express';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { computeHmac } from '../../src/domain/hmac.js';
import { openSession, signedInCustomer } from '../../docs/examples/session.js';
import { closeServer, listening } from '../helpers/dunwall-service.js';

/**
 * Every TypeScript and JavaScript code block of the README and of docs/*.md (fences
 * ```ts, ```tsx and ```js) type-checks, as a team that copies it would check it: strict, with
 * the unused-name checks of Vite's React template, and JavaScript checked as an editor checks
 * it (`checkJs`). One program holds every block, so the whole check is one `tsc` pass.
 *
 * How a block is checked:
 * - A block preceded by a marker line `<!-- docs/examples/PATH -->` or `<!-- examples/PATH -->`
 *   (the reference app's files) is that file: it is checked at that path, in place of the file,
 *   so that its relative imports find the other example files (and the page's other marked
 *   blocks).
 * - Any other block is a module of its own, and may only import packages.
 * - A block with an `import` or an `export` is a file a team copies whole: every check applies.
 *   A block without one is a fragment of a file: unused names are not reported. Nor, in
 *   JavaScript, are the names that implicitly have the type `any`.
 * - Two pages may show the same marked file, as long as they show it alike.
 * - The names a block uses without declaring them (the reader's own: `app`, their sign-in,
 *   their components) are declared by its page's prelude below, `name: type`, each only for the
 *   blocks that use the name and do not declare it. The declarations go on the block's first
 *   line, so that a diagnostic's line is the page's line.
 * A failure names the page, the line and the column: `docs/react.md:52:7 TS2304 ...`.
 */

const ROOT = resolve(import.meta.dirname, '../..');

/** The names each page's blocks take from the reader's code, as TypeScript types. */
const PRELUDES: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  'README.md': {
    app: "import('express').Express",
    signedInCustomer: "(req: import('express').Request) => string | null",
  },
  'docs/snippet-and-client.md': {
    customerId: 'string',
    hmac: 'string',
    showGate: '(payUrl: string) => void',
    yourBillingPage: 'string',
  },
  'docs/react.md': {
    useBillingStatus: "typeof import('@dunwall/react').useBillingStatus",
    useBillingFetch: "typeof import('@dunwall/react').useBillingFetch",
    BillingBanner: "typeof import('@dunwall/react').BillingBanner",
    Callout:
      "(props: { tone: 'danger' | 'warning'; onClose?: () => void; children?: import('react').ReactNode }) => import('react').ReactNode",
  },
  'docs/react-native.md': {
    useSafeAreaInsets: '() => { top: number; right: number; bottom: number; left: number }',
    useBillingFetch: "typeof import('@dunwall/react-native').useBillingFetch",
    BillingBanner: "typeof import('@dunwall/react-native').BillingBanner",
    BillingGate: "typeof import('@dunwall/react-native').BillingGate",
    MyNotice:
      "(props: { text: string; action?: string; onAction: () => void; onClose: () => void }) => import('react').ReactNode",
  },
};

/** The snippet's browser API, as a page that loads the snippet sees it (snippet/index.ts). */
const BROWSER_GLOBALS = `
interface Window {
  Dunwall?: {
    check(options: { tenant: string; key: string; customer: string; hmac?: string | null; supportUrl?: string | null; [option: string]: unknown }): Promise<unknown>;
    clear(): void;
  };
}
interface DocumentEventMap {
  'dunwall:status': CustomEvent<{ status: 'active' | 'warning' | 'lockout'; source: string }>;
}
`;

const EXTENSIONS: Readonly<Record<string, string>> = { ts: '.ts', tsx: '.tsx', js: '.mjs' };
/** "declared but never read" and its kin: not reported in a fragment of a file. */
const UNUSED = new Set([6133, 6138, 6192, 6196, 6198, 6199, 6205]);
/** "implicitly has an 'any' type": JavaScript has no annotations to give. */
const IMPLICIT_ANY = new Set([7005, 7006, 7008, 7010, 7011, 7018, 7019, 7022, 7023, 7024, 7031, 7034]);

export interface Page {
  path: string;
  text: string;
}

interface Block {
  page: string;
  /** The page's line (1-based) of the block's first line of code. */
  line: number;
  indent: number;
  lang: string;
  code: string;
  /** The path it is checked at. */
  file: string;
  prelude: string;
  complete: boolean;
}

/** The blocks of a page: the fenced ones in a language above, their indentation removed. */
function blocksOf(page: Page): Omit<Block, 'prelude' | 'complete'>[] {
  const lines = page.text.split('\n');
  const blocks: Omit<Block, 'prelude' | 'complete'>[] = [];
  for (let i = 0; i < lines.length; i += 1) {
    const open = /^( *)```(\S*)/.exec(lines[i] ?? '');
    if (open === null) continue;
    const indent = open[1]?.length ?? 0;
    const lang = open[2] ?? '';
    let end = i + 1;
    while (end < lines.length && !/^ *```\s*$/.test(lines[end] ?? '')) end += 1;
    const extension = EXTENSIONS[lang];
    if (extension !== undefined) {
      const code = lines
        .slice(i + 1, end)
        .map((l) => l.slice(Math.min(indent, l.length - l.trimStart().length)))
        .join('\n');
      const marker = /^<!-- ((?:docs\/)?examples\/\S+\.(?:tsx?|mjs|js)) -->$/.exec(lines[i - 1] ?? '')?.[1];
      const file =
        marker !== undefined
          ? join(ROOT, marker)
          : join(ROOT, 'docs', '.fragments', page.path.replace(/\.md$/, ''), `line-${i + 2}${extension}`);
      blocks.push({ page: page.path, line: i + 2, indent, lang, code, file });
    }
    i = end;
  }
  return blocks;
}

/** The names a block declares at its top level (imports included). */
function declaredNames(source: ts.SourceFile): Set<string> {
  const names = new Set<string>();
  const bind = (name: ts.BindingName): void => {
    if (ts.isIdentifier(name)) names.add(name.text);
    else for (const element of name.elements) if (!ts.isOmittedExpression(element)) bind(element.name);
  };
  for (const statement of source.statements) {
    if (ts.isImportDeclaration(statement)) {
      const clause = statement.importClause;
      if (clause?.name) names.add(clause.name.text);
      const bindings = clause?.namedBindings;
      if (bindings && ts.isNamespaceImport(bindings)) names.add(bindings.name.text);
      if (bindings && ts.isNamedImports(bindings))
        for (const element of bindings.elements) names.add(element.name.text);
    } else if (ts.isVariableStatement(statement)) {
      for (const declaration of statement.declarationList.declarations) bind(declaration.name);
    } else if (
      (ts.isFunctionDeclaration(statement) ||
        ts.isClassDeclaration(statement) ||
        ts.isInterfaceDeclaration(statement) ||
        ts.isTypeAliasDeclaration(statement)) &&
      statement.name
    ) {
      names.add(statement.name.text);
    }
  }
  return names;
}

function preludeOf(block: Omit<Block, 'prelude' | 'complete'>, source: ts.SourceFile): string {
  const declared = declaredNames(source);
  const wanted = Object.entries(PRELUDES[block.page] ?? {}).filter(
    ([name]) => !declared.has(name) && new RegExp(`\\b${name}\\b`).test(block.code),
  );
  if (block.lang === 'js')
    return wanted.map(([name, type]) => `/** @type {${type}} */ const ${name} = /** @type {any} */ (null); `).join('');
  return wanted.map(([name, type]) => `declare const ${name}: ${type}; `).join('');
}

const OPTIONS: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2023,
  lib: ['lib.es2023.d.ts', 'lib.dom.d.ts', 'lib.dom.iterable.d.ts'],
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  jsx: ts.JsxEmit.ReactJSX,
  strict: true,
  noUncheckedIndexedAccess: true,
  noUnusedLocals: true,
  noUnusedParameters: true,
  noFallthroughCasesInSwitch: true,
  allowJs: true,
  checkJs: true,
  esModuleInterop: true,
  resolveJsonModule: true,
  skipLibCheck: true,
  noEmit: true,
  types: ['node', 'vite/client'],
  baseUrl: ROOT,
  // The packages by their names, as their users import them.
  paths: {
    '@dunwall/client': ['packages/client/src/index.ts'],
    '@dunwall/core': ['packages/core/src/index.ts'],
    '@dunwall/node': ['packages/node/src/index.ts'],
    '@dunwall/react': ['packages/react/src/index.ts'],
    '@dunwall/react-native': ['packages/react-native/src/index.ts'],
  },
};

/** Declarations of the libraries a React Native app imports, which the repository does not install. */
const DECLARATIONS = [
  join(ROOT, 'packages/react-native/types/react-native.d.ts'),
  join(ROOT, 'test/types/react-native-libraries.d.ts'),
];

/** Type-checks every block of `pages` in one program; the problems as `page:line:column TSxxxx message`. */
export function checkFragments(pages: readonly Page[]): { blocks: number; problems: string[] } {
  const blocks: Block[] = [];
  for (const page of pages) {
    for (const b of blocksOf(page)) {
      const source = ts.createSourceFile(b.file, b.code, ts.ScriptTarget.ES2023, true);
      const complete = source.statements.some(
        (s) =>
          ts.isImportDeclaration(s) ||
          ts.isExportDeclaration(s) ||
          ts.isExportAssignment(s) ||
          (ts.canHaveModifiers(s) && ts.getModifiers(s)?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)),
      );
      blocks.push({ ...b, prelude: preludeOf(b, source), complete });
    }
  }
  const byFile = new Map<string, Block>();
  const problems: string[] = [];
  for (const b of blocks) {
    const shown = byFile.get(b.file);
    if (shown === undefined) byFile.set(b.file, b);
    else if (shown.code !== b.code)
      problems.push(`${b.page}:${b.line} shows ${b.file.slice(ROOT.length + 1)} unlike ${shown.page}:${shown.line}`);
  }
  const globals = join(ROOT, 'docs', '.fragments', 'browser-globals.d.ts');
  const text = (file: string): string | undefined => {
    const b = byFile.get(file);
    if (b !== undefined) return `${b.prelude}${b.code}${b.complete || b.lang === 'js' ? '' : '\nexport {};'}\n`;
    return file === globals ? BROWSER_GLOBALS : undefined;
  };
  const host = ts.createCompilerHost(OPTIONS, true);
  const { fileExists, readFile, getSourceFile, directoryExists } = host;
  host.fileExists = (file) => byFile.has(resolve(file)) || resolve(file) === globals || fileExists.call(host, file);
  host.readFile = (file) => text(resolve(file)) ?? readFile.call(host, file);
  host.directoryExists = (dir) =>
    [...byFile.keys(), globals].some((f) => f.startsWith(`${resolve(dir)}/`)) ||
    (directoryExists?.call(host, dir) ?? true);
  host.getSourceFile = (file, language, onError, create) => {
    const own = text(resolve(file));
    return own !== undefined
      ? ts.createSourceFile(file, own, language, true)
      : getSourceFile.call(host, file, language, onError, create);
  };
  const program = ts.createProgram({ rootNames: [...byFile.keys(), globals, ...DECLARATIONS], options: OPTIONS, host });
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const b = d.file ? byFile.get(resolve(d.file.fileName)) : undefined;
    if (d.file === undefined || b === undefined) {
      // Only a block's own problems count; anything else would be a problem of this test.
      if (d.file === undefined || resolve(d.file.fileName) === globals)
        problems.push(`(the check itself) TS${d.code} ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`);
      continue;
    }
    const { line, character } = d.file.getLineAndCharacterOfPosition(d.start ?? 0);
    // A prelude's name a block does not use after all (a parameter of the same name).
    const inPrelude = line === 0 && character < b.prelude.length;
    if ((!b.complete || inPrelude) && UNUSED.has(d.code)) continue;
    if (b.lang === 'js' && IMPLICIT_ANY.has(d.code)) continue;
    const column = (line === 0 ? Math.max(character - b.prelude.length, 0) : character) + b.indent + 1;
    problems.push(
      `${b.page}:${b.line + line}:${column} TS${d.code} ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`,
    );
  }
  const where = (p: string) => /^(\S+?):(\d+)/.exec(p) ?? ['', p, '0'];
  problems.sort((x, y) => {
    const [, px = '', lx = '0'] = where(x);
    const [, py = '', ly = '0'] = where(y);
    return px.localeCompare(py) || Number(lx) - Number(ly) || x.localeCompare(y);
  });
  return { blocks: blocks.length, problems };
}

function docsPages(): Page[] {
  const paths = [
    'README.md',
    ...readdirSync(join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .sort()
      .map((f) => `docs/${f}`),
  ];
  return paths.map((path) => ({ path, text: readFileSync(join(ROOT, path), 'utf8') }));
}

describe("the docs' code blocks", () => {
  it('type-check, every TypeScript and JavaScript block of the README and of docs/', () => {
    const { blocks, problems } = checkFragments(docsPages());
    expect(problems).toEqual([]);
    // The README, React, React Native, Next.js, the servers, the snippet and the webhooks pages have some.
    expect(blocks).toBeGreaterThanOrEqual(20);
  });

  it('name the page, the line and the column of a problem, in a fragment, an indented block and a marked file', () => {
    const page: Page = {
      path: 'docs/example.md',
      text: [
        '# A page', // 1
        '', // 2
        '```ts', // 3
        "const ok: string = 'yes';", // 4: a fragment: unused is fine
        'const wrong: number = ok;', // 5
        '```', // 6
        '', // 7
        '1. A step:', // 8
        '', // 9
        '   ```js', // 10
        "   import { createHmac } from 'node:crypto';", // 11
        "   export const mac = createHmac('sha256', process.env.NOPE).digest('hex');", // 12
        '   ```', // 13
        '', // 14
        '<!-- docs/examples/express.ts -->', // 15
        '```ts', // 16
        "import { dunwall } from './dunwall.js';", // 17
        'export const n: number = dunwall;', // 18
        '```', // 19
        '```tsx', // 20
        'const unusedInAFile = 1;', // 21
        'export const el = <p>{missingName}</p>;', // 22
        '```', // 23
        '```sh', // 24
        'not checked', // 25
        '```', // 26
      ].join('\n'),
    };
    const { blocks, problems } = checkFragments([page]);
    expect(blocks).toBe(4);
    expect(problems).toEqual([
      expect.stringMatching(/^docs\/example\.md:5:7 TS2322 Type 'string' is not assignable to type 'number'/),
      expect.stringMatching(/^docs\/example\.md:12:44 TS2345 Argument of type 'string \| undefined' is not assignable/),
      expect.stringMatching(
        /^docs\/example\.md:18:14 TS2322 Type 'Dunwall(?:Copy)?' is not assignable to type 'number'/,
      ),
      expect.stringMatching(/^docs\/example\.md:21:7 TS6133 'unusedInAFile' is declared but its value is never read/),
      expect.stringMatching(/^docs\/example\.md:22:23 TS2304 Cannot find name 'missingName'/),
    ]);
  });
});

describe("the README's hmac example", () => {
  it('answers the identity route with 200: the customer and its hmac, or null and null for a signed-out visitor', async () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const block = blocksOf({ path: 'README.md', text: readme }).find((b) => b.code.includes('createHmac'));
    expect(block?.lang).toBe('js');
    // The example as written, with the reader's own `app` and sign-in given to it.
    const dir = mkdtempSync(join(tmpdir(), 'dunwall-readme-'));
    const app = express();
    (globalThis as { readmeExample?: unknown }).readmeExample = {
      app,
      signedInCustomer: (req: express.Request) => signedInCustomer(req.headers.cookie),
    };
    const saved = process.env.DUNWALL_HMAC_SECRET;
    const secret = 'readme-hmac-secret-0123456789abcdef';
    process.env.DUNWALL_HMAC_SECRET = secret;
    let server: Server | undefined;
    try {
      const file = join(dir, 'readme-example.mjs');
      writeFileSync(file, `const { app, signedInCustomer } = globalThis.readmeExample;\n${block?.code ?? ''}\n`);
      await import(pathToFileURL(file).href);
      server = app.listen(0, '127.0.0.1');
      const base = `http://127.0.0.1:${await listening(server)}`;
      const me = async (cookie?: string) => {
        const res = await fetch(`${base}/api/me`, {
          headers: cookie ? { cookie } : {},
          signal: AbortSignal.timeout(10_000),
        });
        return { status: res.status, body: (await res.json()) as unknown };
      };
      expect(await me()).toEqual({ status: 200, body: { customer: null, hmac: null } });
      expect(await me('session=not-a-session')).toEqual({ status: 200, body: { customer: null, hmac: null } });
      expect(await me(openSession('cus_readme'))).toEqual({
        status: 200,
        body: { customer: 'cus_readme', hmac: computeHmac(secret, 'cus_readme') },
      });
    } finally {
      if (server) await closeServer(server);
      delete (globalThis as { readmeExample?: unknown }).readmeExample;
      if (saved === undefined) delete process.env.DUNWALL_HMAC_SECRET;
      else process.env.DUNWALL_HMAC_SECRET = saved;
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
