import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createClient } from '../../packages/client/src/index.js';
import type { StatusRequest } from '../../packages/client/src/index.js';

const REQUEST: StatusRequest = {
  baseUrl: 'https://dw.test/',
  tenant: 'acme',
  publishableKey: 'pk_test',
  customerId: 'cus_1',
  hmac: 'ab12',
};
const KNOWN = {
  status: 'warning',
  card_update_url: 'https://acme.test/card',
  entitlements: { powered_by_watermark: true, custom_domain: false, downstream_webhooks: false },
};

type FakeFetch = ReturnType<typeof vi.fn<typeof fetch>>;

function answering(status: number, body: unknown, contentType = 'application/json'): FakeFetch {
  return vi.fn<typeof fetch>(
    async () =>
      new Response(typeof body === 'string' ? body : JSON.stringify(body), {
        status,
        headers: { 'content-type': contentType },
      }),
  );
}

describe('getSubscriberStatus', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('asks the lookup with the key, the customer and the hmac, and returns the body', async () => {
    const fetchFn = answering(200, KNOWN);
    const client = createClient({ fetch: fetchFn });
    expect(await client.getSubscriberStatus(REQUEST)).toEqual({ ...KNOWN, source: 'service' });
    const [url, init] = fetchFn.mock.calls[0] ?? [];
    expect(url).toBe('https://dw.test/api/subscriber-status/acme?processor_customer_id=cus_1&hmac=ab12');
    expect(init).toMatchObject({ method: 'GET', headers: { Authorization: 'Bearer pk_test' }, credentials: 'omit' });
  });

  it('returns the scheduled lockout and the pay link of a known subscriber, and sends a preview', async () => {
    const body = {
      ...KNOWN,
      lockout_at: '2026-12-03T12:00:00Z',
      pay_url: 'https://invoice.stripe.com/i/acct_1/test_abc',
    };
    const fetchFn = answering(200, body);
    const client = createClient({ fetch: fetchFn, cacheTtlMs: 0 });
    expect(await client.getSubscriberStatus({ ...REQUEST, preview: 'warning' })).toEqual({
      ...body,
      source: 'service',
    });
    await client.getSubscriberStatus({ ...REQUEST, preview: 'lockout' });
    await client.getSubscriberStatus({ ...REQUEST, preview: 'active' as 'warning' });
    await client.getSubscriberStatus({ ...REQUEST, preview: null });
    expect(fetchFn.mock.calls.map(([url]) => String(url).split('?')[1])).toEqual([
      'processor_customer_id=cus_1&hmac=ab12&preview=warning',
      'processor_customer_id=cus_1&hmac=ab12&preview=lockout',
      'processor_customer_id=cus_1&hmac=ab12',
      'processor_customer_id=cus_1&hmac=ab12',
    ]);
  });

  it('keeps a preview apart from the real answer in its cache', async () => {
    const fetchFn = vi.fn<typeof fetch>(
      async (url) =>
        new Response(
          JSON.stringify(
            String(url).includes('preview=lockout') ? { ...KNOWN, status: 'lockout' } : { status: 'active' },
          ),
          { status: 200 },
        ),
    );
    const client = createClient({ fetch: fetchFn, cacheTtlMs: 60_000 });
    expect((await client.getSubscriberStatus({ ...REQUEST, preview: 'lockout' })).status).toBe('lockout');
    expect((await client.getSubscriberStatus(REQUEST)).status).toBe('active');
    expect(fetchFn).toHaveBeenCalledTimes(2);
  });

  it.each([
    ['lockout_at', { lockout_at: 1796385600 }],
    ['pay_url', { pay_url: { href: 'https://invoice.stripe.com/i/x' } }],
  ])('fails open on a %s that is not a string', async (_name, extra) => {
    const client = createClient({ fetch: answering(200, { ...KNOWN, ...extra }) });
    expect(await client.getSubscriberStatus(REQUEST)).toMatchObject({
      status: 'active',
      source: 'fallback',
      error: { kind: 'invalid_response' },
    });
  });

  it.each([
    ['active', { status: 'active' }],
    ['lockout', { ...KNOWN, status: 'lockout', card_update_url: null }],
    ['known active', { ...KNOWN, status: 'active', card_update_url: null }],
  ])('returns %s as the service answered it', async (_name, body) => {
    const client = createClient({ fetch: answering(200, body) });
    expect(await client.getSubscriberStatus(REQUEST)).toEqual({ ...body, source: 'service' });
  });

  it.each([
    [401, 'invalid_publishable_key'],
    [402, 'tenant_suspended'],
    [403, 'hmac_mismatch'],
    [404, 'tenant_not_found'],
    [429, 'rate_limited'],
    [500, 'internal_error'],
    [503, 'store_unavailable'],
  ])('fails open on HTTP %i', async (status, code) => {
    const client = createClient({
      fetch: answering(
        status,
        { type: 'about:blank', title: 'x', status, code, detail: 'x' },
        'application/problem+json',
      ),
    });
    expect(await client.getSubscriberStatus(REQUEST)).toEqual({
      status: 'active',
      source: 'fallback',
      error: { kind: 'http', status, code, message: `HTTP ${status} ${code}` },
    });
  });

  it('fails open on a network error, a non-JSON answer and an answer of the wrong shape', async () => {
    const down = createClient({
      fetch: vi.fn<typeof fetch>(async () => Promise.reject(new TypeError('Failed to fetch'))),
    });
    expect(await down.getSubscriberStatus(REQUEST)).toEqual({
      status: 'active',
      source: 'fallback',
      error: { kind: 'network', message: 'Failed to fetch' },
    });
    const html = createClient({ fetch: answering(200, '<html>captive portal</html>', 'text/html') });
    expect((await html.getSubscriberStatus(REQUEST)).source).toBe('fallback');
    const odd = createClient({ fetch: answering(200, { status: 'blocked' }) });
    expect(await odd.getSubscriberStatus(REQUEST)).toMatchObject({
      status: 'active',
      source: 'fallback',
      error: { kind: 'invalid_response' },
    });
    const thrower = createClient({
      fetch: vi.fn<typeof fetch>(() => {
        throw new Error('sync');
      }),
    });
    expect((await thrower.getSubscriberStatus(REQUEST)).source).toBe('fallback');
  });

  it('fails open after the timeout (default 3 s), and aborts the request', async () => {
    let signal: AbortSignal | undefined;
    const hanging = vi.fn<typeof fetch>((_url, init) => {
      signal = init?.signal ?? undefined;
      return new Promise<Response>(() => {});
    });
    const client = createClient({ fetch: hanging });
    const pending = client.getSubscriberStatus(REQUEST);
    await vi.advanceTimersByTimeAsync(2_999);
    expect(signal?.aborted).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await pending).toEqual({
      status: 'active',
      source: 'fallback',
      error: { kind: 'timeout', message: 'no answer within 3000 ms' },
    });
    expect(signal?.aborted).toBe(true);

    const quick = createClient({ fetch: hanging });
    const short = quick.getSubscriberStatus({ ...REQUEST, timeoutMs: 500 });
    await vi.advanceTimersByTimeAsync(500);
    expect((await short).source).toBe('fallback');
  });

  it('caches answers for the TTL, and not failures', async () => {
    let now = 1_000;
    const fetchFn = answering(200, KNOWN);
    const client = createClient({ fetch: fetchFn, cacheTtlMs: 10_000, now: () => now });
    await client.getSubscriberStatus(REQUEST);
    expect(await client.getSubscriberStatus(REQUEST)).toEqual({ ...KNOWN, source: 'cache' });
    expect(fetchFn).toHaveBeenCalledTimes(1);
    now += 10_001;
    expect((await client.getSubscriberStatus(REQUEST)).source).toBe('service');
    expect(fetchFn).toHaveBeenCalledTimes(2);
    // Another customer is another entry.
    await client.getSubscriberStatus({ ...REQUEST, customerId: 'cus_2' });
    expect(fetchFn).toHaveBeenCalledTimes(3);
    client.clearCache();
    await client.getSubscriberStatus(REQUEST);
    expect(fetchFn).toHaveBeenCalledTimes(4);

    const failing = answering(503, { code: 'store_unavailable' });
    const noCacheOfFailures = createClient({ fetch: failing, now: () => now });
    await noCacheOfFailures.getSubscriberStatus(REQUEST);
    await noCacheOfFailures.getSubscriberStatus(REQUEST);
    expect(failing).toHaveBeenCalledTimes(2);

    const off = answering(200, KNOWN);
    const uncached = createClient({ fetch: off, cacheTtlMs: 0 });
    await uncached.getSubscriberStatus(REQUEST);
    await uncached.getSubscriberStatus(REQUEST);
    expect(off).toHaveBeenCalledTimes(2);
  });

  it('never throws, even for a request missing its fields', async () => {
    const client = createClient({ fetch: answering(200, KNOWN) });
    const result = await client.getSubscriberStatus(undefined as unknown as StatusRequest);
    expect(result).toMatchObject({ status: 'active', source: 'fallback', error: { kind: 'invalid_response' } });
  });

  it('shares frozen answers: a caller cannot change what the others get', async () => {
    const client = createClient({ fetch: answering(200, KNOWN) });
    const first = await client.getSubscriberStatus(REQUEST);
    expect(Object.isFrozen(first)).toBe(true);
    expect(() => {
      if ('entitlements' in first) (first.entitlements as Record<string, boolean>).custom_domain = true;
    }).toThrow();
    const second = await client.getSubscriberStatus(REQUEST);
    expect('entitlements' in second && second.entitlements.custom_domain).toBe(false);
  });

  it('caches nothing with cacheMaxEntries 0', async () => {
    const fetchFn = answering(200, KNOWN);
    const client = createClient({ fetch: fetchFn, cacheMaxEntries: 0 });
    await client.getSubscriberStatus(REQUEST);
    await client.getSubscriberStatus(REQUEST);
    expect(fetchFn).toHaveBeenCalledTimes(2);
  });

  it('bounds the cache', async () => {
    const fetchFn = answering(200, KNOWN);
    const client = createClient({ fetch: fetchFn, cacheMaxEntries: 2 });
    for (const id of ['cus_1', 'cus_2', 'cus_3', 'cus_1'])
      await client.getSubscriberStatus({ ...REQUEST, customerId: id });
    expect(fetchFn).toHaveBeenCalledTimes(4);
  });

  it('makes one request for ten components asking at once', async () => {
    let release: (r: Response) => void = () => {};
    const fetchFn = vi.fn<typeof fetch>(() => new Promise<Response>((resolve) => (release = resolve)));
    const client = createClient({ fetch: fetchFn });
    const all = Promise.all(Array.from({ length: 10 }, () => client.getSubscriberStatus(REQUEST)));
    release(new Response(JSON.stringify(KNOWN), { status: 200 }));
    const results = await all;
    expect(fetchFn).toHaveBeenCalledTimes(1);
    expect(new Set(results.map((r) => r.status))).toEqual(new Set(['warning']));
  });

  it('logs nothing unless debug is set', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    const error = vi.spyOn(console, 'error').mockImplementation(() => {});
    try {
      await createClient({ fetch: answering(500, {}) }).getSubscriberStatus(REQUEST);
      expect(warn).not.toHaveBeenCalled();
      expect(log).not.toHaveBeenCalled();
      expect(error).not.toHaveBeenCalled();
      await createClient({ fetch: answering(500, {}), debug: true }).getSubscriberStatus(REQUEST);
      expect(warn).toHaveBeenCalledTimes(1);
    } finally {
      warn.mockRestore();
      log.mockRestore();
      error.mockRestore();
    }
  });
});
