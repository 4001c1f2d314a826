// Builds a browser package (`react`, `react-native`): one ES module bundling its sources
// and what it shares with the snippet (`@dunwall/core`, private: inlined, never a dependency)
// and the client, React and React Native left to the app; its declarations, the core's among
// them; and its size, minified and gzipped, against the package's budget.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';

/**
 * Gzipped bytes of the minified bundle, React itself not counted. 6 KB held the status, the
 * banner and the gate (6,105 and 5,820 bytes); 7 KB since the lockout from the app's own API
 * (`useBillingFetch`), the misconfigurations said in the console with their codes, `debug`,
 * and the persisted warning kept through a failed lookup (6,890 and 6,612 bytes). 7.5 KB since
 * roles (the provider's `role`: a member's texts, no pay or card link), the card-expiring
 * notice (a soft banner, dismissed on its own) and http links to this machine (7,597 and 7,279).
 */
const BUDGETS = { react: 7.5 * 1024, 'react-native': 7.5 * 1024 };
const name = process.argv[2];
if (!(name in BUDGETS)) throw new Error(`build-package: unknown package ${name}`);
const dir = join(dirname(fileURLToPath(import.meta.url)), name);
rmSync(join(dir, 'dist'), { recursive: true, force: true });

const common = {
  entryPoints: [join(dir, 'src', 'index.ts')],
  bundle: true,
  format: 'esm',
  target: 'es2022',
  jsx: 'automatic',
  external: ['react', 'react-dom', 'react/jsx-runtime', 'react-native'],
  // The App Router renders these in the browser: a server component may not import them.
  banner: { js: "'use client';" },
  legalComments: 'none',
  logLevel: 'warning',
};
await build({ ...common, outfile: join(dir, 'dist', 'index.js') });
const minified = await build({ ...common, minify: true, write: false });
const gzipped = gzipSync(minified.outputFiles[0].contents, { level: 9 }).length;
// On stderr: `npm pack` keeps its stdout for the tarball's name.
console.error(
  `@dunwall/${name}: ${minified.outputFiles[0].contents.length} bytes minified, ${gzipped} bytes gzipped (budget ${BUDGETS[name]})`,
);
if (gzipped > BUDGETS[name]) {
  console.error(`@dunwall/${name}: over its gzip budget by ${gzipped - BUDGETS[name]} bytes`);
  process.exit(1);
}
execFileSync(
  process.execPath,
  [
    join(dirname(fileURLToPath(import.meta.url)), '..', 'node_modules', 'typescript', 'bin', 'tsc'),
    '-p',
    join(dir, 'tsconfig.json'),
  ],
  { stdio: 'inherit' },
);

// The declarations name the core as the sources do, `@dunwall/core`, which an app that installs
// the package alone does not have: each names the core's declarations beside it instead.
const types = join(dir, 'dist', 'types');
const coreEntry = join(types, 'packages', 'core', 'src', 'index.js');
for (const entry of readdirSync(types, { recursive: true })) {
  const file = join(types, String(entry));
  if (!file.endsWith('.d.ts')) continue;
  const text = readFileSync(file, 'utf8');
  let path = relative(dirname(file), coreEntry);
  if (!path.startsWith('.')) path = `./${path}`;
  const named = text.replaceAll(
    /(from\s*|import\()(['"])@dunwall\/core\2/g,
    (_, lead, quote) => `${lead}${quote}${path}${quote}`,
  );
  if (named !== text) writeFileSync(file, named);
}
