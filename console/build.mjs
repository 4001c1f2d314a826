// Builds the console into dist/console: its page, one script and one stylesheet (named by
// their hashes, so the service caches them for good), and the branding preview's
// stylesheet. The page has no inline script or style: it runs under a strict CSP. The
// whole is held to its size budget.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';

// 60 KB gzipped for everything a first visit loads (51 KB at its first release): uPlot is
// about 21 KB of it, Preact and its router about 7 KB, the console's pages and stylesheet the
// rest. An admin page inside a service loads once per session; the budget keeps a dependency
// from slipping in unnoticed.
const GZIP_BUDGET_BYTES = 60 * 1024;
const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist', 'console');
rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, 'assets'), { recursive: true });

const common = {
  bundle: true,
  minify: true,
  legalComments: 'none',
  write: false,
  outdir: join(out, 'assets'),
  metafile: false,
};
const app = await build({
  ...common,
  entryPoints: { console: join(root, 'console', 'src', 'main.tsx') },
  entryNames: '[name]-[hash]',
  format: 'esm',
  target: 'es2022',
  jsx: 'automatic',
  jsxImportSource: 'preact',
  define: { 'process.env.NODE_ENV': '"production"' },
});
const preview = await build({
  ...common,
  entryPoints: { preview: join(root, 'console', 'src', 'preview.css') },
  entryNames: '[name]-[hash]',
});

let total = 0;
const names = {};
for (const file of [...app.outputFiles, ...preview.outputFiles]) {
  writeFileSync(file.path, file.contents);
  const name = basename(file.path);
  if (name.startsWith('console-')) {
    total += gzipSync(file.contents, { level: 9 }).length;
    names[name.endsWith('.css') ? 'css' : 'js'] = name;
  }
}
if (!names.js || !names.css) throw new Error('console: the build wrote no script or no stylesheet');
writeFileSync(
  join(out, 'index.html'),
  `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Dunwall console</title>
<link rel="stylesheet" href="/console/assets/${names.css}">
<script type="module" src="/console/assets/${names.js}"></script>
</head>
<body>
<div id="app"><p class="loading">Loading the console…</p></div>
<noscript><p>The console needs JavaScript.</p></noscript>
</body>
</html>
`,
);
console.log(`console: ${names.js}, ${names.css}: ${total} bytes gzipped (budget ${GZIP_BUDGET_BYTES})`);
if (total > GZIP_BUDGET_BYTES) {
  console.error(`console: over its gzip budget by ${total - GZIP_BUDGET_BYTES} bytes`);
  process.exit(1);
}
