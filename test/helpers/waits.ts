import { vi } from 'vitest';

/**
 * How long `expect.poll` and `vi.waitFor` wait for what they are told to wait for, when the
 * test gives no bound of its own. Both return as soon as the awaited event has happened (a page
 * shows the gate, a message is delivered): this is no margin that a passing test spends, only
 * how long a test that will fail takes to say so. Their own default, one second, was a margin:
 * on a loaded 2-core machine a page load or a worker's catch-up takes longer, and a test that
 * would have passed failed. Kept below the test's own timeout (vitest.config.ts), so that the
 * failure names what was awaited.
 */
export const WAIT_FOR_EVENT_MS = 60_000;

const waitFor = vi.waitFor.bind(vi);
vi.waitFor = ((callback, options) =>
  waitFor(
    callback,
    typeof options === 'number' ? options : { timeout: WAIT_FOR_EVENT_MS, ...options },
  )) as typeof vi.waitFor;
