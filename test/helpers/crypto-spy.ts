import type * as Crypto from 'node:crypto';
import { vi } from 'vitest';
import type { Mock } from 'vitest';

/** The spy that wraps the real `timingSafeEqual` once a test file mocks `node:crypto` with it. */
export const timingSafeEqualSpy: { fn: Mock<typeof Crypto.timingSafeEqual> } = { fn: vi.fn() };

/**
 * The `node:crypto` module with `timingSafeEqual` wrapped, so that a test can show every
 * secret comparison goes through it. Use as:
 * `vi.mock('node:crypto', async (orig) => (await import('./crypto-spy.js')).spiedCrypto(orig))`.
 */
export async function spiedCrypto(importOriginal: () => Promise<typeof Crypto>): Promise<typeof Crypto> {
  const actual = await importOriginal();
  timingSafeEqualSpy.fn = vi.fn(actual.timingSafeEqual);
  return {
    ...actual,
    default: { ...actual, timingSafeEqual: timingSafeEqualSpy.fn },
    timingSafeEqual: timingSafeEqualSpy.fn,
  } as typeof Crypto;
}
