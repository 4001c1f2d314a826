import { Redis } from 'ioredis';

/** The test Redis: TEST_REDIS_URL, or the local default (never REDIS_URL, which is production's). */
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL || 'redis://127.0.0.1:6379';

async function reachable(): Promise<boolean> {
  const probe = new Redis(TEST_REDIS_URL, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    connectTimeout: 1_000,
    enableOfflineQueue: false,
  });
  probe.on('error', () => {});
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}

/**
 * True when the test Redis answers. In CI an unreachable Redis fails the run; elsewhere
 * the suites that need it are skipped, loudly (`what` names them).
 */
export async function redisAvailable(what: string): Promise<boolean> {
  if (await reachable()) return true;
  if (process.env.CI === 'true')
    throw new Error(`Redis is required in CI and is not reachable at ${new URL(TEST_REDIS_URL).host}`);
  process.stderr.write(`\n*** Redis not reachable: ${what} SKIPPED. ***\n\n`);
  return false;
}
