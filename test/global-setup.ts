import { execFileSync } from 'node:child_process';
import type { TestProject } from 'vitest/node';
import { buildEmbeddedTemplate } from './helpers/embedded-template.js';

/**
 * The browser snippet and the console are build products: the suites that serve them need them
 * built first. The embedded store's migrated folder is made once here, and each embedded store a
 * test opens starts from a copy of it (PGlite's initdb costs seconds a store; a copy, a fraction).
 */
export default async function setup(project: TestProject): Promise<() => void> {
  execFileSync(process.execPath, ['snippet/build.mjs'], { stdio: 'inherit' });
  execFileSync(process.execPath, ['console/build.mjs'], { stdio: 'inherit' });
  const template = await buildEmbeddedTemplate();
  project.provide('embeddedTemplate', template.dataDir);
  return template.remove;
}
