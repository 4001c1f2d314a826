import { execFileSync } from 'node:child_process';

/** The browser snippet and the console are build products: the suites that serve them need them built first. */
export default function setup(): void {
  execFileSync(process.execPath, ['snippet/build.mjs'], { stdio: 'inherit' });
  execFileSync(process.execPath, ['console/build.mjs'], { stdio: 'inherit' });
}
