import { describe, expect, it } from 'vitest';
import { redactUrl } from '../../src/runtime/logger.js';

describe('redactUrl', () => {
  it.each([
    [
      '/api/subscriber-status/acme?processor_customer_id=cus_1&hmac=abc',
      '/api/subscriber-status/acme?processor_customer_id=[redacted]&hmac=[redacted]',
    ],
    ['/x?%68mac=abc&a=1', '/x?[redacted]=[redacted]&a=[redacted]'],
    ['/x?HMAC=abc', '/x?HMAC=[redacted]'],
    ['/x?hmac=a&hmac=b', '/x?hmac=[redacted]&hmac=[redacted]'],
    ['/x?%E0%A4%A=abc', '/x?[redacted]=[redacted]'],
    // Separators a client may use that the query parser does not: the value still goes.
    ['/x?processor_customer_id=cus_1;hmac=0123456789abcdef', '/x?processor_customer_id=[redacted]'],
    ['/x?processor_customer_id=cus_1?hmac=0123456789abcdef', '/x?processor_customer_id=[redacted]'],
    ['/x?a=1&0123456789abcdef0123456789abcdef', '/x?a=[redacted]&[redacted]'],
    ['/x?processor_customer_id', '/x?processor_customer_id'],
    ['/x?', '/x?'],
    ['/x', '/x'],
  ])('%s', (url, expected) => {
    expect(redactUrl(url)).toBe(expected);
    expect(redactUrl(url)).not.toMatch(/cus_1|abc|0123/);
  });
});
