import { execFileSync } from 'node:child_process';

/** The browser snippet is a build product: the suites that serve it need it built first. */
export default function setup(): void {
  execFileSync(process.execPath, ['snippet/build.mjs'], { stdio: 'inherit' });
}
