import { Redis } from 'ioredis';
import type { Logger } from 'pino';

/** A rate limit count waits at most this long for Redis; past it the request goes on uncounted. */
export const REDIS_COMMAND_TIMEOUT_MS = 250;
const REDIS_CONNECT_TIMEOUT_MS = 2_000;
const REDIS_RETRY_MAX_MS = 5_000;

/**
 * The connection that shares rate limit counts across instances. It never queues commands
 * while disconnected and gives up on slow ones, so that a Redis outage lets requests
 * through uncounted instead of holding them: a broken limiter must not block users. It
 * reconnects by itself; the rate limiter logs an outage once, when a count first fails.
 */
export async function openRedis(url: string, log: Logger): Promise<Redis> {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
    retryStrategy: (times) => Math.min(times * 200, REDIS_RETRY_MAX_MS),
  });
  // Without a listener, a connection error would be thrown as an uncaught 'error' event.
  redis.on('error', () => {});
  // The first requests are counted too when Redis is up; when it is not, the service
  // starts all the same, uncounted, and Redis is used once it answers.
  const ready = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), REDIS_CONNECT_TIMEOUT_MS);
    redis.once('ready', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
  if (!ready) log.warn('redis unavailable at start: rate limits are counted once it answers');
  return redis;
}
