import { createDunwallWith } from './follower.js';
import type { DunwallCopy, DunwallOptions } from './types.js';

/**
 * A copy of the tenant's non-active subscribers in this process's memory, following Dunwall's
 * status feed (see ./follower.ts). `status()` answers synchronously from it; nothing throws
 * into the application once it is created (bad options throw a TypeError here, at once).
 */
export function createDunwall(options: DunwallOptions): DunwallCopy {
  return createDunwallWith(options, {});
}
