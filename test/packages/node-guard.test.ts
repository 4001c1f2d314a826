import { describe, expect, it, vi } from 'vitest';
import {
  check,
  compileOptions,
  decide,
  isHtmlNavigation,
  prefersHtml,
} from '../../packages/node/src/middleware/guard.js';
import type { Decision, MiddlewareOptions, RequestFacts } from '../../packages/node/src/middleware/guard.js';
import type { Dunwall, StatusAnswer } from '../../packages/node/src/types.js';

/**
 * The decision every adapter shares (packages/node/src/middleware/guard.ts), on its own:
 * what passes, what is refused and how, what a browser's page load gets, what is exempt,
 * and that every failure lets the request through. The adapters are tested in real apps in
 * node-middleware.test.ts.
 */
const BROWSER_ACCEPT = 'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8';

function answer(status: StatusAnswer['status'], extra: Partial<StatusAnswer> = {}): StatusAnswer {
  return { status, lockout_at: null, pay_url: null, entitlements: {}, source: 'feed', ...extra };
}

function facts(path: string, headers: Record<string, string> = {}, method = 'GET'): RequestFacts {
  return { method, path, header: (name) => headers[name] };
}

type Req = { id: string | null };
const options = (extra: Partial<MiddlewareOptions<Req>> = {}) =>
  compileOptions<Req>({ customer: (r) => r.id, ...extra });

describe('decide', () => {
  it('lets active and warning through by default, refuses lockout with the problem, no-store', () => {
    const o = options();
    expect(decide(answer('active'), o, facts('/api'))).toEqual({ action: 'pass' });
    expect(decide(answer('warning', { lockout_at: '2026-03-04T12:00:00Z' }), o, facts('/api'))).toEqual({
      action: 'pass',
    });
    const refused = decide(answer('lockout', { pay_url: 'https://invoice.stripe.com/i/x' }), o, facts('/api'));
    expect(refused).toMatchObject({
      action: 'refuse',
      status: 402,
      headers: { 'content-type': 'application/problem+json', 'cache-control': 'no-store' },
    });
    const body = JSON.parse((refused as Extract<Decision, { action: 'refuse' }>).body) as unknown;
    expect(body).toEqual({
      type: 'about:blank',
      title: 'Payment Required',
      status: 402,
      code: 'billing_lockout',
      detail: expect.any(String),
      pay_url: 'https://invoice.stripe.com/i/x',
      lockout_at: null,
    });
  });

  it('refuses warning under allow ["active"], with its lockout_at; lets everything through under allow of all three', () => {
    const strict = options({ allow: ['active'] });
    const refused = decide(answer('warning', { lockout_at: '2026-03-04T12:00:00Z' }), strict, facts('/api'));
    expect(refused.action).toBe('refuse');
    expect(JSON.parse((refused as Extract<Decision, { action: 'refuse' }>).body)).toMatchObject({
      lockout_at: '2026-03-04T12:00:00Z',
      pay_url: null,
    });
    expect(decide(answer('lockout'), options({ allow: ['active', 'warning', 'lockout'] }), facts('/api')).action).toBe(
      'pass',
    );
  });

  it('never refuses from an answer the copy does not vouch for (stale, starting), whatever allow says', () => {
    const strict = options({ allow: ['active'] });
    expect(decide(answer('lockout', { source: 'stale' }), strict, facts('/api')).action).toBe('pass');
    expect(decide(answer('warning', { source: 'stale' }), strict, facts('/api')).action).toBe('pass');
    expect(decide(answer('lockout', { source: 'starting' }), strict, facts('/api')).action).toBe('pass');
    expect(decide(null, strict, facts('/api')).action).toBe('pass');
  });

  it('redirects a browser page load (303, no-store) only when redirectTo is set; an API call keeps the 402', () => {
    const lockout = answer('lockout', { pay_url: 'https://invoice.stripe.com/i/x' });
    const nav = facts('/projects', { accept: BROWSER_ACCEPT });
    expect(decide(lockout, options(), nav).action).toBe('refuse');
    const o = options({ redirectTo: '/billing?from=lockout' });
    expect(decide(lockout, o, nav)).toEqual({
      action: 'redirect',
      status: 303,
      headers: { location: '/billing?from=lockout', 'cache-control': 'no-store' },
    });
    expect(decide(lockout, o, facts('/projects', { accept: BROWSER_ACCEPT }, 'HEAD')).action).toBe('redirect');
    expect(decide(lockout, o, facts('/projects', { accept: BROWSER_ACCEPT }, 'POST')).action).toBe('refuse');
    expect(decide(lockout, o, facts('/api/projects', { accept: 'application/json' })).action).toBe('refuse');
    expect(decide(lockout, o, facts('/api/projects', { accept: '*/*' })).action).toBe('refuse');
    expect(decide(lockout, o, facts('/api/projects')).action).toBe('refuse');
    expect(decide(lockout, o, facts('/projects', { 'sec-fetch-mode': 'navigate', accept: '*/*' })).action).toBe(
      'redirect',
    );
    // A function of the answer: to the invoice itself.
    const toInvoice = options({ redirectTo: (a) => a.pay_url ?? '/billing' });
    expect(decide(lockout, toInvoice, nav)).toMatchObject({ headers: { location: 'https://invoice.stripe.com/i/x' } });
  });

  it('answers 402 instead of redirecting to the page asked for (a loop), or when redirectTo fails or gives a header-splitting URL', () => {
    const lockout = answer('lockout');
    expect(
      decide(lockout, options({ redirectTo: '/billing' }), facts('/billing', { accept: BROWSER_ACCEPT })).action,
    ).toBe('refuse');
    expect(
      decide(lockout, options({ redirectTo: '/billing?x=1' }), facts('/billing', { accept: BROWSER_ACCEPT })).action,
    ).toBe('refuse');
    const onError = vi.fn();
    const throwing = options({
      redirectTo: () => {
        throw new Error('no page');
      },
      onError,
    });
    expect(decide(lockout, throwing, facts('/p', { accept: BROWSER_ACCEPT })).action).toBe('refuse');
    expect(onError).toHaveBeenCalledWith(new Error('no page'));
    const splitting = options({ redirectTo: () => '/billing\r\nSet-Cookie: a=b' });
    expect(decide(lockout, splitting, facts('/p', { accept: BROWSER_ACCEPT })).action).toBe('refuse');
  });
});

describe('HTML navigation', () => {
  it('is a preference for text/html over every other type named, or Sec-Fetch-Mode: navigate', () => {
    expect(prefersHtml(BROWSER_ACCEPT)).toBe(true);
    expect(prefersHtml('text/html')).toBe(true);
    expect(prefersHtml('text/*')).toBe(true);
    expect(prefersHtml('application/json, text/html;q=0.5')).toBe(false);
    expect(prefersHtml('text/html;q=0.9, application/json')).toBe(false);
    expect(prefersHtml('text/html;q=0')).toBe(false);
    expect(prefersHtml('*/*')).toBe(false);
    expect(prefersHtml('')).toBe(false);
    expect(prefersHtml(null)).toBe(false);
    expect(prefersHtml('text/html;q=bogus')).toBe(false);
    expect(isHtmlNavigation(facts('/', { 'sec-fetch-mode': 'NAVIGATE' }))).toBe(true);
    expect(isHtmlNavigation(facts('/', { 'sec-fetch-mode': 'cors', accept: '*/*' }))).toBe(false);
    expect(isHtmlNavigation(facts('/', { 'sec-fetch-mode': 'navigate' }, 'DELETE'))).toBe(false);
  });
});

describe('check', () => {
  const copy = (answers: Record<string, StatusAnswer>): Dunwall => ({
    status: (id) => answers[id] ?? answer('active'),
    ready: async () => {},
    close: async () => {},
  });
  const locked = copy({ cus_locked: answer('lockout') });

  it('lets exempt paths through without asking customer(): exact paths, and prefixes ending in *', () => {
    const customer = vi.fn((r: Req) => r.id);
    const o = compileOptions<Req>({ customer, exempt: ['/logout', '/billing/*', '/static*'] });
    for (const path of ['/logout', '/billing/', '/billing/invoices/1', '/static', '/static/app.js', '/statics']) {
      expect(check(locked, o, { id: 'cus_locked' }, facts(path)), path).toEqual({ action: 'pass' });
    }
    expect(customer).not.toHaveBeenCalled();
    for (const path of ['/logout/x', '/logou', '/billing', '/api', '/']) {
      expect((check(locked, o, { id: 'cus_locked' }, facts(path)) as Decision).action, path).toBe('refuse');
    }
  });

  it('exempts the identity route /api/me when no exempt list is given; a list given replaces it', () => {
    const byDefault = compileOptions<Req>({ customer: (r) => r.id });
    expect(check(locked, byDefault, { id: 'cus_locked' }, facts('/api/me'))).toEqual({ action: 'pass' });
    for (const path of ['/api/me/', '/api/meta', '/api/projects'])
      expect((check(locked, byDefault, { id: 'cus_locked' }, facts(path)) as Decision).action, path).toBe('refuse');
    const replaced = compileOptions<Req>({ customer: (r) => r.id, exempt: ['/billing'] });
    expect((check(locked, replaced, { id: 'cus_locked' }, facts('/api/me')) as Decision).action).toBe('refuse');
    expect(() => compileOptions<Req>({ customer: (r) => r.id, exempt: '/api/me' as unknown as string[] })).toThrow(
      /array of paths/,
    );
  });

  it('never exempts a path a router could read otherwise: dot segments, doubled or back slashes, encoded dots and slashes', () => {
    const o = compileOptions<Req>({ customer: (r) => r.id, exempt: ['/billing/*'] });
    for (const path of [
      '/billing/../api/data',
      '/billing/..',
      '/billing/./x',
      '/billing//x',
      '/billing/%2e%2e/api',
      '/billing/%2F..%2fapi',
      '/billing/..\\api',
      '/billing/%5c',
    ]) {
      expect((check(locked, o, { id: 'cus_locked' }, facts(path)) as Decision).action, path).toBe('refuse');
    }
    // An ordinary encoded character is not in question.
    expect((check(locked, o, { id: 'cus_locked' }, facts('/billing/caf%C3%A9')) as Decision).action).toBe('pass');
  });

  it('is synchronous for a synchronous customer(), and waits for an async one', async () => {
    const sync = compileOptions<Req>({ customer: (r) => r.id });
    expect(check(locked, sync, { id: 'cus_locked' }, facts('/a'))).toMatchObject({ action: 'refuse' });
    const async = compileOptions<Req>({ customer: async (r) => r.id });
    const pending = check(locked, async, { id: 'cus_locked' }, facts('/a'));
    expect(pending).toBeInstanceOf(Promise);
    expect(await pending).toMatchObject({ action: 'refuse' });
  });

  it('fails open: customer() throwing, rejecting, returning null, undefined, "" or a non-string; status() throwing', async () => {
    const onError = vi.fn();
    const cases: MiddlewareOptions<Req>['customer'][] = [
      () => {
        throw new Error('session store down');
      },
      async () => {
        throw new Error('session store down');
      },
      () => null,
      () => undefined,
      () => '',
      () => 42 as unknown as string,
    ];
    for (const customer of cases) {
      expect(await check(locked, compileOptions<Req>({ customer, onError }), { id: null }, facts('/a'))).toEqual({
        action: 'pass',
      });
    }
    expect(onError).toHaveBeenCalledTimes(2);
    const broken: Dunwall = {
      status: () => {
        throw new Error('copy broken');
      },
      ready: async () => {},
      close: async () => {},
    };
    expect(
      check(broken, compileOptions<Req>({ customer: (r) => r.id, onError }), { id: 'cus_locked' }, facts('/a')),
    ).toEqual({ action: 'pass' });
    expect(onError).toHaveBeenLastCalledWith(new Error('copy broken'));
    // An onError that throws changes nothing.
    const loud = compileOptions<Req>({
      customer: () => {
        throw new Error('x');
      },
      onError: () => {
        throw new Error('logger down');
      },
    });
    expect(check(locked, loud, { id: null }, facts('/a'))).toEqual({ action: 'pass' });
  });

  it('refuses configuration mistakes when the middleware is made, not on a request', () => {
    expect(() => compileOptions<Req>({} as MiddlewareOptions<Req>)).toThrow(/customer/);
    expect(() => compileOptions<Req>({ customer: () => null, allow: ['paid' as 'active'] })).toThrow(
      /unknown status "paid"/,
    );
    expect(() => compileOptions<Req>({ customer: () => null, exempt: ['billing'] })).toThrow(/starts with "\/"/);
    expect(() => compileOptions<Req>({ customer: () => null, exempt: ['/a/*/b'] })).toThrow(/only end/);
    expect(() => compileOptions<Req>({ customer: () => null, redirectTo: '' })).toThrow(/redirectTo/);
    expect(() => compileOptions<Req>({ customer: () => null, redirectTo: '/x\n' })).toThrow(/redirectTo/);
  });
});
