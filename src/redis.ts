import { Redis } from 'ioredis';
import type { Logger } from 'pino';

/** A rate limit check waits at most this long for Redis; past it the request goes on uncounted. */
export const REDIS_COMMAND_TIMEOUT_MS = 250;
const REDIS_CONNECT_TIMEOUT_MS = 2_000;
const REDIS_RETRY_MAX_MS = 5_000;

/**
 * The connection that shares rate limit counts across instances. It never queues commands
 * while disconnected and gives up on slow ones, so that a Redis outage lets requests
 * through uncounted instead of holding them: a broken limiter must not block users. It
 * reconnects by itself, and says so once per outage rather than once per attempt.
 */
export function openRedis(url: string, log: Logger): Redis {
  const redis = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
    connectTimeout: REDIS_CONNECT_TIMEOUT_MS,
    retryStrategy: (times) => Math.min(times * 200, REDIS_RETRY_MAX_MS),
  });
  let down = false;
  redis.on('error', (err: Error & { code?: string }) => {
    if (down) return;
    down = true;
    // The message of a connection error names no credential; the URL is never logged.
    log.warn({ err: { message: err.message, code: err.code } }, 'redis unavailable: rate limits are counted by nobody until it is back');
  });
  redis.on('ready', () => {
    if (down) log.info('redis available again: rate limits shared');
    down = false;
  });
  return redis;
}
