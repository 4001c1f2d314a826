import { BaseSequencer } from 'vitest/node';
import type { TestSpecification } from 'vitest/node';

/**
 * The files that took longest on a loaded 2-core machine, longest first (seconds, measured
 * with `npx vitest run --reporter=json`). With two workers the run ends when the last file
 * does: a file of a minute and a half started last keeps one core busy alone at the end.
 * Starting the longest first lets the short ones fill in around them.
 */
const LONGEST_FIRST = [
  'test/downstream/delivery.test.ts',
  'test/e2e/reference-app.test.ts',
  'test/e2e/rate-limit-wiring.test.ts',
  'test/routes/rate-limit.test.ts',
  'test/cli/stripe-sync.test.ts',
  'test/e2e/browser.test.ts',
  'test/routes/stripe-webhook.property.test.ts',
  'test/e2e/server.test.ts',
  'test/downstream/stuck-tenants.test.ts',
  'test/routes/stripe-episodes.test.ts',
  'test/e2e/react-ssr.test.ts',
  'test/e2e/secrets.test.ts',
  'test/cli.test.ts',
  'test/e2e/webhook-crash.test.ts',
  'test/store/request-bound.test.ts',
];

/**
 * Vitest's own order, with the files of `LONGEST_FIRST` in front when the run has no durations
 * of its own to go by (a fresh clone, CI): vitest then orders by file size, which puts a long
 * end-to-end file of few lines last.
 */
export class LongestFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const root = this.ctx.config.root;
    const known = (spec: TestSpecification) =>
      this.ctx.cache.getFileTestResults(`${spec.project.name}:${spec.moduleId.slice(root.length + 1)}`) !== undefined;
    if (sorted.every(known)) return sorted;
    const rank = (spec: TestSpecification) => {
      const at = LONGEST_FIRST.indexOf(spec.moduleId.slice(root.length + 1));
      return at === -1 ? LONGEST_FIRST.length : at;
    };
    // Array.prototype.sort is stable: the rest keep vitest's order.
    return sorted.sort((a, b) => rank(a) - rank(b));
  }
}
