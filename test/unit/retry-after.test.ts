import { describe, expect, it } from 'vitest';
import { ApiError, retryAfterSeconds } from '../../src/cli/errors.js';

describe('Retry-After, as the CLI reads it', () => {
  it('takes delay-seconds or an HTTP-date, and nothing else', () => {
    const now = Date.parse('2026-06-01T00:00:00Z');
    expect(retryAfterSeconds('42', now)).toBe(42);
    expect(retryAfterSeconds(' 0 ', now)).toBe(0);
    expect(retryAfterSeconds('Mon, 01 Jun 2026 00:01:30 GMT', now)).toBe(90);
    // A date already past: retry now.
    expect(retryAfterSeconds('Sun, 31 May 2026 23:00:00 GMT', now)).toBe(0);
    expect(retryAfterSeconds(null, now)).toBeNull();
    expect(retryAfterSeconds('soon', now)).toBeNull();
    expect(retryAfterSeconds('-5', now)).toBeNull();
  });

  it('words a 429 by the wait, and any other error by its code and detail', () => {
    expect(new ApiError(429, 'rate_limited', 'Too many requests.', 12).message).toBe('rate limited; retry in 12 s');
    expect(new ApiError(429, 'rate_limited', 'Too many requests.').message).toBe('rate limited; retry later');
    expect(new ApiError(404, 'tenant_not_found', 'No tenant has this slug.').message).toBe(
      'tenant_not_found: No tenant has this slug.',
    );
  });
});
