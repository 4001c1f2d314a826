import { describe, expect, it } from 'vitest';
import { redactUrl } from '../../src/logger.js';

describe('redactUrl', () => {
  it.each([
    ['/api/subscriber-status/acme?processor_customer_id=cus_1&hmac=abc', '/api/subscriber-status/acme?processor_customer_id=cus_1&hmac=[redacted]'],
    ['/x?%68mac=abc&a=1', '/x?%68mac=[redacted]&a=1'],
    ['/x?HMAC=abc', '/x?HMAC=[redacted]'],
    ['/x?hmac=a&hmac=b', '/x?hmac=[redacted]&hmac=[redacted]'],
    ['/x?%E0%A4%A=abc', '/x?%E0%A4%A=[redacted]'],
    ['/x?processor_customer_id=cus_1', '/x?processor_customer_id=cus_1'],
    ['/x', '/x'],
  ])('%s', (url, expected) => {
    expect(redactUrl(url)).toBe(expected);
  });
});
