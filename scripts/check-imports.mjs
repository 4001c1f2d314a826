#!/usr/bin/env node
/**
 * `npm run lint` runs this after ESLint: the imports between the folders of `src/` follow
 * the layers of the design, and no module imports itself through others (no cycle).
 *
 *   domain               imports only the domain
 *   store, readmodel, secrets, services, metrics, demo, downstream, console
 *                        never http, runtime or cli
 *   http                 never runtime or cli
 *   runtime, cli         anything below them
 *
 * Type-only imports count: a lower layer must not even name a higher one's types.
 *
 * The store has one way in, src/store/index.ts: no file outside src/store/ (the tests and the
 * bench included) imports another of its files. The store's own tests (test/store/) may
 * reach inside it, to hold a statement's plan or a module's parts.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const src = join(root, 'src');
const FORBIDDEN = {
  domain: (to) => to !== 'domain',
  store: (to) => ['http', 'runtime', 'cli'].includes(to),
  readmodel: (to) => ['http', 'runtime', 'cli'].includes(to),
  secrets: (to) => ['http', 'runtime', 'cli'].includes(to),
  services: (to) => ['http', 'runtime', 'cli'].includes(to),
  metrics: (to) => ['http', 'runtime', 'cli'].includes(to),
  demo: (to) => ['http', 'runtime', 'cli'].includes(to),
  downstream: (to) => ['http', 'runtime', 'cli'].includes(to),
  console: (to) => ['http', 'runtime', 'cli'].includes(to),
  http: (to) => ['runtime', 'cli'].includes(to),
};

function files(dir, out = [], pattern = /\.ts$/) {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist') continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) files(path, out, pattern);
    else if (pattern.test(name)) out.push(path);
  }
  return out;
}

/** The folder of `src/` a file belongs to ('' for a file at the top). */
const layerOf = (file) => {
  const parts = relative(src, file).split('/');
  return parts.length > 1 ? parts[0] : '';
};

/** Every folder of src/ has its place in the layers: a new one must be given it here. */
const PLACED = new Set([...Object.keys(FORBIDDEN), 'runtime', 'cli', '']);

const IMPORT_RE =
  /(?:^|[^\w.])(?:import|export)\s[^'"]*?from\s*['"](\.{1,2}\/[^'"]+)['"]|import\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g;
const graph = new Map();
const problems = [];
for (const file of files(src)) {
  if (!PLACED.has(layerOf(file)))
    problems.push(`${relative(root, file)}: src/${layerOf(file)}/ is in no layer of scripts/check-imports.mjs`);
  const text = readFileSync(file, 'utf8');
  const targets = [];
  for (const m of text.matchAll(IMPORT_RE)) {
    const spec = m[1] ?? m[2];
    if (!spec.endsWith('.js')) continue;
    const target = resolve(dirname(file), spec.replace(/\.js$/, '.ts'));
    if (!target.startsWith(src)) continue;
    targets.push(target);
    const from = layerOf(file);
    const to = layerOf(target);
    if (from !== to && FORBIDDEN[from]?.(to))
      problems.push(
        `${relative(root, file)} imports ${relative(root, target)}: ${from}/ must not import ${to === '' ? 'the top of src/' : `${to}/`}`,
      );
  }
  graph.set(file, targets);
}

// The store's one entry.
const storeDir = join(src, 'store');
const storeEntry = join(storeDir, 'index.ts');
const storeInsiders = [storeDir, join(root, 'test', 'store')];
for (const dir of ['src', 'test', 'bench', 'scripts'].map((d) => join(root, d))) {
  for (const file of files(dir, [], /\.(ts|tsx|mts|mjs)$/)) {
    if (storeInsiders.some((inside) => file.startsWith(inside + '/'))) continue;
    for (const m of readFileSync(file, 'utf8').matchAll(IMPORT_RE)) {
      const spec = m[1] ?? m[2];
      const target = resolve(dirname(file), spec.replace(/\.js$/, '.ts'));
      if (target.startsWith(storeDir + '/') && target !== storeEntry)
        problems.push(
          `${relative(root, file)} imports ${relative(root, target)}: outside src/store/, import src/store/index.ts`,
        );
    }
  }
}

// Cycles: strongly connected components of more than one file (Tarjan).
let index = 0;
const stack = [];
const meta = new Map();
function visit(v) {
  meta.set(v, { index, low: index, onStack: true });
  index += 1;
  stack.push(v);
  for (const w of graph.get(v) ?? []) {
    if (!graph.has(w)) continue;
    if (!meta.has(w)) {
      visit(w);
      meta.get(v).low = Math.min(meta.get(v).low, meta.get(w).low);
    } else if (meta.get(w).onStack) {
      meta.get(v).low = Math.min(meta.get(v).low, meta.get(w).index);
    }
  }
  if (meta.get(v).low === meta.get(v).index) {
    const component = [];
    let w;
    do {
      w = stack.pop();
      meta.get(w).onStack = false;
      component.push(w);
    } while (w !== v);
    if (component.length > 1)
      problems.push(
        `import cycle: ${component
          .map((f) => relative(root, f))
          .sort()
          .join(', ')}`,
      );
  }
}
for (const v of graph.keys()) if (!meta.has(v)) visit(v);

// The browser core (`packages/core`, `@dunwall/core`) is held apart: from outside it is imported
// by its name only, never by a path into its folder, and never by src/ (the server does not
// depend on a browser package); it imports nothing of the snippet, the React packages or src/,
// except the domain's types (its vocabularies, such as the branding's). Every import of every
// file of ours is read, relative or by name.
const core = join(root, 'packages', 'core');
const inCore = (path) => path === core || path.startsWith(`${core}/`);
const SPEC_RE =
  /(?:^|[^\w.])(import|export)\s+(type\s)?[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;
function codeFiles(dir, out = []) {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist' || name.startsWith('.')) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) codeFiles(path, out);
    else if (/\.(ts|tsx|mts|mjs)$/.test(name) && !name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}
let coreFiles = 0;
for (const top of ['src', 'packages', 'snippet', 'console', 'test', 'bench', 'docs', 'scripts']) {
  for (const file of codeFiles(join(root, top))) {
    const text = readFileSync(file, 'utf8');
    const here = relative(root, file);
    if (inCore(file)) coreFiles += 1;
    for (const m of text.matchAll(SPEC_RE)) {
      const spec = m[3] ?? m[4];
      const typeOnly = m[2] !== undefined;
      if (spec === '@dunwall/core' || spec.startsWith('@dunwall/core/')) {
        if (inCore(file)) problems.push(`${here} imports ${spec}: the core imports its own files by their paths`);
        else if (spec !== '@dunwall/core')
          problems.push(`${here} imports ${spec}: the core is imported by its name only`);
        else if (file.startsWith(`${src}/`))
          problems.push(`${here} imports ${spec}: src/ must not import the browser core`);
        continue;
      }
      if (!spec.startsWith('.')) {
        if (inCore(file) && spec.startsWith('@dunwall/'))
          problems.push(`${here} imports ${spec}: the core imports no package of ours by its name`);
        continue;
      }
      const target = resolve(dirname(file), spec);
      if (!inCore(file)) {
        if (inCore(target)) problems.push(`${here} imports ${spec}: the core is imported by its name, @dunwall/core`);
        continue;
      }
      if (inCore(target) || target.startsWith(join(root, 'packages', 'client', 'src'))) continue;
      if (typeOnly && target.startsWith(join(src, 'domain'))) continue;
      problems.push(
        `${here} imports ${spec}: the core imports only itself, the client and the domain's types (import type)`,
      );
    }
  }
}
if (coreFiles === 0) problems.push('packages/core: no file found (the browser core moved?)');

if (problems.length > 0) {
  process.stderr.write(`${problems.join('\n')}\n`);
  process.exit(1);
}
process.stdout.write(`imports: ${graph.size} files, layers respected, no cycle\n`);
