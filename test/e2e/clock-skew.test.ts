import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { loadConfig } from '../../src/runtime/config.js';
import { start } from '../../src/runtime/server.js';
import { Capture } from '../helpers/log-capture.js';
import { withMigratedStore } from '../helpers/migrated-data-dir.js';

/**
 * A service whose clock runs 90 s ahead of its database's says so, as it runs: a warning in
 * its log, `dunwall_clock_skew_seconds` on /metrics and `clock` in /readyz, which stays 200.
 */
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe('Clock skew, as the service reports it', () => {
  it('an instance 90 s ahead logs it, reports it on /metrics and shows it in /readyz while staying ready', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dunwall-clock-'));
    dirs.push(dir);
    const capture = new Capture();
    const running = await start(
      loadConfig({ DUNWALL_DATA_DIR: withMigratedStore(dir), PORT: '0', DUNWALL_DEMO: '0' }),
      pino({ level: 'info' }, capture),
      {
        clock: () => Date.now() + 90_000,
      },
    );
    try {
      // The policy clock compares at its first tick, a moment after the start.
      await expect
        .poll(
          async () =>
            ((await (await fetch(`${running.url}/readyz`)).json()) as { clock?: { within_bound: boolean } }).clock
              ?.within_bound,
          {
            timeout: 15_000,
          },
        )
        .toBe(false);
      const ready = await fetch(`${running.url}/readyz`);
      expect(ready.status).toBe(200);
      const body = (await ready.json()) as { status: string; clock: { skew_seconds: number; bound_seconds: number } };
      expect(body.status).toBe('ok');
      expect(body.clock.bound_seconds).toBe(2);
      expect(body.clock.skew_seconds).toBeGreaterThan(85);
      expect(body.clock.skew_seconds).toBeLessThan(95);
      const text = await (await fetch(`${running.url}/metrics`)).text();
      const line = text.split('\n').find((l) => l.startsWith('dunwall_clock_skew_seconds '));
      expect(Number(line?.split(' ')[1])).toBeGreaterThan(85);
      const warned = capture.entries().filter((e) => String(e.msg).startsWith('clock:'));
      expect(warned).toEqual([
        expect.objectContaining({ level: 40, bound_seconds: 2, skew_seconds: expect.any(Number) }),
      ]);
    } finally {
      await running.close();
    }
  });
});
