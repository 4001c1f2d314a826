#!/usr/bin/env node
/**
 * Writes the OpenAPI document of the built service to `dist/openapi.json` (run by
 * `npm run build`): the document `/openapi.json` serves, as a file that ships with the
 * release and that `redocly lint` checks in CI.
 */
import { writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { openApiDocument } = await import(join(root, 'dist', 'src', 'http', 'index.js'));
const doc = await openApiDocument();
writeFileSync(join(root, 'dist', 'openapi.json'), `${JSON.stringify(doc, null, 2)}\n`);
process.stderr.write(`openapi: dist/openapi.json, ${Object.keys(doc.paths ?? {}).length} paths\n`);
