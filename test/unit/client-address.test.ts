import { describe, expect, it } from 'vitest';
import { clientAddress, parseTrustedProxies } from '../../src/http/client-address.js';
import type { ForwardingHeader, TrustedProxies } from '../../src/http/client-address.js';
import { ConfigError, DEFAULT_RATE_LIMITS, loadConfig } from '../../src/runtime/config.js';

function trusted(value: string, header?: ForwardingHeader): TrustedProxies {
  const parsed = parseTrustedProxies(value, header);
  if (typeof parsed === 'string') throw new Error(parsed);
  return parsed;
}

function req(remoteAddress: string, headers: Record<string, string> = {}) {
  return { socket: { remoteAddress }, headers };
}

describe('parseTrustedProxies', () => {
  it('takes addresses, CIDR ranges and the names loopback and private', () => {
    const t = trusted('loopback, 192.0.2.10, 2001:db8::/32');
    expect(
      ['127.0.0.1', '127.9.9.9', '::1', '::ffff:127.0.0.1', '192.0.2.10', '2001:db8::1'].map((a) => t.trusts(a)),
    ).toEqual([true, true, true, true, true, true]);
    expect(['192.0.2.11', '10.0.0.1', '2001:db9::1', 'unknown', ''].map((a) => t.trusts(a))).toEqual([
      false,
      false,
      false,
      false,
      false,
    ]);
    const p = trusted('private');
    expect(['10.1.2.3', '172.20.0.1', '192.168.1.1', 'fd00::1', '172.32.0.1'].map((a) => p.trusts(a))).toEqual([
      true,
      true,
      true,
      true,
      false,
    ]);
  });

  it.each([
    ['everyone', 'is not an address'],
    ['10.0.0.0/33', 'invalid prefix length'],
    ['10.0.0.0/8/1', 'is not an address'],
    ['10.0.0.0/x', 'invalid prefix length'],
    [' , ', 'names no address'],
  ])('refuses %j', (value, problem) => {
    expect(parseTrustedProxies(value)).toContain(problem);
  });
});

describe('clientAddress', () => {
  const proxies = trusted('10.0.0.0/8');
  const rfc7239 = trusted('10.0.0.0/8', 'forwarded');

  it('is the socket peer when no proxy is trusted, whatever the headers say', () => {
    expect(clientAddress(req('203.0.113.5', { 'x-forwarded-for': '1.2.3.4', forwarded: 'for=1.2.3.4' }), null)).toBe(
      '203.0.113.5',
    );
    expect(clientAddress(req('::ffff:203.0.113.5'), null)).toBe('203.0.113.5');
  });

  it('walks the chain from the nearest hop to the first address that is not a proxy', () => {
    expect(clientAddress(req('10.0.0.1', { 'x-forwarded-for': '198.51.100.1, 203.0.113.5, 10.0.0.2' }), proxies)).toBe(
      '203.0.113.5',
    );
    // Proxies that add the client's port: the port does not make a new client.
    expect(clientAddress(req('10.0.0.1', { 'x-forwarded-for': '203.0.113.5:51234' }), proxies)).toBe('203.0.113.5');
    expect(clientAddress(req('10.0.0.1', { 'x-forwarded-for': '[2001:db8:1:2::9]:443, 10.0.0.2:80' }), proxies)).toBe(
      '2001:db8:1:2::/64',
    );
    expect(
      clientAddress(req('10.0.0.1', { forwarded: 'for=198.51.100.1, for="203.0.113.5:8443";proto=https' }), rfc7239),
    ).toBe('203.0.113.5');
    expect(clientAddress(req('10.0.0.1', { forwarded: 'For="[2001:db8:cafe::17]:4711"' }), rfc7239)).toBe(
      '2001:db8:cafe:0::/64',
    );
    // A peer that is not a proxy: its headers prove nothing.
    expect(clientAddress(req('203.0.113.9', { 'x-forwarded-for': '198.51.100.1' }), proxies)).toBe('203.0.113.9');
    // Only proxies in the chain: the farthest of them is the best we know.
    expect(clientAddress(req('10.0.0.1', { 'x-forwarded-for': '10.0.0.3' }), proxies)).toBe('10.0.0.3');
    expect(clientAddress(req('10.0.0.1'), proxies)).toBe('10.0.0.1');
  });

  it("reads only the header its proxies write: the other one is the client's own", () => {
    const spoofed = { 'x-forwarded-for': '203.0.113.5', forwarded: 'for=6.6.6.6' };
    expect(clientAddress(req('10.0.0.1', spoofed), proxies)).toBe('203.0.113.5');
    expect(
      clientAddress(
        req('10.0.0.1', { ...spoofed, forwarded: 'for=203.0.113.5', 'x-forwarded-for': '6.6.6.6' }),
        rfc7239,
      ),
    ).toBe('203.0.113.5');
    // A Forwarded header without a for= names nobody: the proxy is the best we know.
    expect(clientAddress(req('10.0.0.1', { forwarded: 'proto=https' }), rfc7239)).toBe('10.0.0.1');
  });

  it('counts IPv6 clients per /64 and keeps an obfuscated identifier short', () => {
    expect(clientAddress(req('2001:db8:1:2:aaaa::1'), null)).toBe(clientAddress(req('2001:db8:1:2:bbbb::2'), null));
    expect(clientAddress(req('2001:db8:1:3::1'), null)).not.toBe(clientAddress(req('2001:db8:1:2::1'), null));
    expect(clientAddress(req('2001:db8:1:2:aaaa::1'), null)).toBe('2001:db8:1:2::/64');
    expect(clientAddress(req('2001:0db8:0000:0002:0:0:0:1'), null)).toBe('2001:db8:0:2::/64');
    expect(clientAddress(req('::1'), null)).toBe('0:0:0:0::/64');
    // Groups after '::' can belong to the prefix.
    expect(clientAddress(req('2001::1:aa:bb:cc:dd'), null)).toBe('2001:0:0:1::/64');
    expect(clientAddress(req('2001:0:0:1::5'), null)).toBe('2001:0:0:1::/64');
    expect(clientAddress(req('2001:db8::2:0:0:0:1'), null)).toBe('2001:db8:0:2::/64');
    expect(clientAddress(req('::ffff:1.2.3.4'), null)).toBe('1.2.3.4');
    expect(clientAddress(req('64:ff9b::1.2.3.4'), null)).toBe('64:ff9b:0:0::/64');
    expect(clientAddress(req('fe80::1%eth0'), null)).toBe('fe80:0:0:0::/64');
    expect(clientAddress(req('10.0.0.1', { forwarded: `for=_${'x'.repeat(500)}` }), rfc7239)).toHaveLength(64);
  });
});

describe('loadConfig: rate limits, Redis and proxies', () => {
  it('defaults', () => {
    const config = loadConfig({});
    expect(config.rateLimits).toEqual(DEFAULT_RATE_LIMITS);
    expect(config.rateLimits.perSecretKey).toBe(60_000);
    expect(config.redisUrl).toBeNull();
    expect(config.trustProxy).toBeNull();
  });

  it('takes each limit (0 turns it off), REDIS_URL and TRUST_PROXY', () => {
    const config = loadConfig({
      DUNWALL_RATE_LIMIT_LOOKUP_PER_IP: '0',
      DUNWALL_RATE_LIMIT_LOOKUP_PER_TENANT: '5000',
      DUNWALL_RATE_LIMIT_FAILURES_PER_IP: '7',
      DUNWALL_RATE_LIMIT_ADMIN_PER_IP: '9',
      DUNWALL_RATE_LIMIT_PER_SECRET_KEY: '120',
      REDIS_URL: 'redis://:pw@cache.internal:6379/2',
      TRUST_PROXY: 'loopback,10.0.0.0/8',
      TRUST_PROXY_HEADER: 'Forwarded',
    });
    expect(config.rateLimits).toEqual({
      lookupPerIp: 0,
      lookupPerTenant: 5000,
      failuresPerIp: 7,
      adminPerIp: 9,
      perSecretKey: 120,
    });
    expect(loadConfig({ DUNWALL_RATE_LIMIT_PER_SECRET_KEY: '0' }).rateLimits.perSecretKey).toBe(0);
    expect(config.redisUrl).toBe('redis://:pw@cache.internal:6379/2');
    expect(config.trustProxy?.trusts('10.2.3.4')).toBe(true);
    expect(config.trustProxy?.header).toBe('forwarded');
    expect(loadConfig({ TRUST_PROXY: 'loopback' }).trustProxy?.header).toBe('x-forwarded-for');
  });

  it('reports every bad value without echoing a Redis URL', () => {
    let error: unknown;
    try {
      loadConfig({
        DUNWALL_RATE_LIMIT_LOOKUP_PER_IP: '-1',
        DUNWALL_RATE_LIMIT_PER_SECRET_KEY: '1e5',
        REDIS_URL: 'http://user:s3cret@host',
        TRUST_PROXY: 'anyone',
        TRUST_PROXY_HEADER: 'x-real-ip',
      });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems).toHaveLength(5);
    expect(problems.join('\n')).not.toContain('s3cret');
    expect(problems.join('\n')).toContain('DUNWALL_RATE_LIMIT_LOOKUP_PER_IP');
    expect(problems).toContain('DUNWALL_RATE_LIMIT_PER_SECRET_KEY must be an integer from 0 to 1000000000 (got "1e5")');
  });
});
