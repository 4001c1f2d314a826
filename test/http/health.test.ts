import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/http/app.js';
import { READY_REUSE_MS } from '../../src/http/routes/health.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { ADMIN_TOKEN, buildAppWithModel } from '../helpers/harness.js';

describe('/readyz under a flood', () => {
  let store: Store;
  let app: App;
  let clockMs = 1_000;
  let pings = 0;
  let failing = false;
  let release: (() => void) | null = null;

  beforeAll(async () => {
    store = await openStore({ engine: 'embedded', dataDir: null });
    const ping = store.maintenance.ping.bind(store.maintenance);
    // The store's own ping, counted; a test can hold it (a slow database) or fail it.
    store.maintenance.ping = async () => {
      pings += 1;
      if (release === null && !failing) return ping();
      if (failing) throw new Error('connect ECONNREFUSED');
      await new Promise<void>((resolve) => {
        const go = release;
        release = () => {
          go?.();
          resolve();
        };
      });
      return ping();
    };
    app = await buildAppWithModel({ store, adminToken: ADMIN_TOKEN, monotonicNow: () => clockMs });
  });
  afterAll(async () => {
    await app.close();
    await store.close();
  });

  const ready = () => app.inject({ method: 'GET', url: '/readyz' });

  it('asks the database once for checks made at once, and reuses a success for a moment only', async () => {
    clockMs += 10_000;
    pings = 0;
    release = () => {};
    const flood = Array.from({ length: 30 }, ready);
    await new Promise((resolve) => setImmediate(resolve));
    expect(pings).toBe(1);
    const go = release as () => void;
    release = null;
    go();
    const answers = await Promise.all(flood);
    expect(answers.map((a) => a.statusCode)).toEqual(Array(30).fill(200));
    expect(pings).toBe(1);
    // Within the reuse window: no query.
    clockMs += READY_REUSE_MS - 1;
    expect((await ready()).statusCode).toBe(200);
    expect(pings).toBe(1);
    // Past it: the next check asks again.
    clockMs += 2;
    expect((await ready()).statusCode).toBe(200);
    expect(pings).toBe(2);
  });

  it('never reuses a failure: the database is asked again, and 503 until it answers', async () => {
    clockMs += 10_000;
    pings = 0;
    failing = true;
    const down = await Promise.all(Array.from({ length: 5 }, ready));
    expect(down.map((a) => a.statusCode)).toEqual(Array(5).fill(503));
    expect(pings).toBe(1);
    expect((await ready()).statusCode).toBe(503);
    expect(pings).toBe(2);
    failing = false;
    expect((await ready()).statusCode).toBe(200);
    expect(pings).toBe(3);
  });
});
