import { describe, expect, it } from 'vitest';
import { createStatusStore, persistKey } from '@dunwall/core';
import type { BillingState, PersistStorage, StatusStoreOptions } from '@dunwall/core';

/**
 * The status store of @dunwall/core, behind @dunwall/react and @dunwall/react-native, driven by a
 * stand-in for the lookup that answers as docs/reference.md#the-lookup says (bodies, problem details), a
 * storage of the three methods, and a clock and timers of the test's own.
 */
const ENTITLEMENTS = { powered_by_watermark: false, custom_domain: true, downstream_webhooks: false };
const T0 = Date.parse('2026-11-26T12:00:00Z');

type Reply =
  { status: number; body: unknown } | 'hang' | 'network' | { after: Promise<void>; status: number; body: unknown };

function lookup() {
  const replies: Reply[] = [];
  const asked: URL[] = [];
  const fetch = (async (input: string) => {
    asked.push(new URL(input));
    const reply = replies.shift() ?? { status: 200, body: { status: 'active' } };
    if (reply === 'network') throw new TypeError('Failed to fetch');
    if (reply === 'hang') return new Promise(() => {});
    if ('after' in reply) await reply.after;
    const json = reply.status === 200 ? 'application/json' : 'application/problem+json';
    return new Response(JSON.stringify(reply.body), { status: reply.status, headers: { 'content-type': json } });
  }) as unknown as typeof globalThis.fetch;
  return { fetch, asked, replies };
}

const known = (status: string, extra: Record<string, unknown> = {}) => ({
  status: 200,
  body: { status, card_update_url: null, entitlements: ENTITLEMENTS, ...extra },
});

function clock() {
  let now = T0;
  const timers: { at: number; fn: () => void; id: number }[] = [];
  let next = 1;
  return {
    now: () => now,
    setTimeout: (fn: () => void, ms: number) => {
      const id = next++;
      timers.push({ at: now + ms, fn, id });
      return id;
    },
    clearTimeout: (id: unknown) => {
      const i = timers.findIndex((t) => t.id === id);
      if (i >= 0) timers.splice(i, 1);
    },
    /** Moves time on, running each timer due on the way, in order. */
    async advance(ms: number) {
      const end = now + ms;
      for (;;) {
        timers.sort((a, b) => a.at - b.at);
        const due = timers[0];
        if (!due || due.at > end) break;
        timers.shift();
        now = due.at;
        due.fn();
        await settle();
      }
      now = end;
    },
    pending: () => timers.length,
  };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 5));

function memoryStorage(
  initial: Record<string, string> = {},
  async = false,
): PersistStorage & { data: Record<string, string> } {
  const data = { ...initial };
  const wrap = <T>(v: T) => (async ? Promise.resolve(v) : v);
  return {
    data,
    getItem: (k) => wrap(data[k] ?? null) as string | null,
    setItem: (k, v) => void wrap((data[k] = v)),
    removeItem: (k) => void wrap(delete data[k]),
  };
}

function open(extra: Partial<StatusStoreOptions> = {}) {
  const service = lookup();
  const time = clock();
  const store = createStatusStore({
    baseUrl: 'https://dunwall.test',
    tenant: 'acme',
    publishableKey: 'pk_test_key',
    customer: 'cus_1',
    hmac: 'ab'.repeat(32),
    fetch: service.fetch,
    now: time.now,
    setTimeout: time.setTimeout,
    clearTimeout: time.clearTimeout,
    ...extra,
  });
  const seen: BillingState[] = [];
  store.subscribe(() => seen.push(store.getSnapshot()));
  return { store, service, time, seen };
}

const copy = (status: string, at: number, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ status, card_update_url: null, entitlements: ENTITLEMENTS, at, ...extra });
const KEY = persistKey('acme', 'cus_1');

describe('the billing status store: never a false gate', () => {
  it('starts active and not ready, asks once, and applies a fresh answer whatever it says, persisting it without the pay link', async () => {
    const storage = memoryStorage();
    const { store, service, seen } = open({ storage });
    expect(store.getSnapshot()).toMatchObject({ status: 'active', ready: false, source: 'fallback', error: null });
    service.replies.push(known('lockout', { pay_url: 'https://invoice.stripe.com/i/acct_1/x' }));
    const stop = store.start();
    await settle();
    expect(service.asked).toHaveLength(1);
    const url = service.asked[0] as URL;
    expect(url.pathname).toBe('/api/subscriber-status/acme');
    expect(url.searchParams.get('processor_customer_id')).toBe('cus_1');
    expect(store.getSnapshot()).toMatchObject({
      status: 'lockout',
      ready: true,
      source: 'service',
      payUrl: 'https://invoice.stripe.com/i/acct_1/x',
      entitlements: ENTITLEMENTS,
    });
    expect(seen.map((s) => s.status)).toEqual(['lockout']);
    const kept = JSON.parse(storage.data[KEY] as string) as Record<string, unknown>;
    expect(kept).toMatchObject({ status: 'lockout', at: T0, entitlements: ENTITLEMENTS });
    expect(kept).not.toHaveProperty('pay_url');
    expect(kept).not.toHaveProperty('source');
    stop();
  });

  it('shows a persisted copy at once, a lockout in it as a warning, and lets a fresh answer decide', async () => {
    for (const status of ['warning', 'lockout']) {
      const lockoutAt = status === 'warning' ? '2026-11-29T12:00:00Z' : null;
      const { store } = open({
        storage: memoryStorage({ [KEY]: copy(status, T0 - 60_000, lockoutAt ? { lockout_at: lockoutAt } : {}) }),
      });
      expect(store.getSnapshot()).toMatchObject({
        status: 'warning',
        source: 'persisted',
        ready: false,
        entitlements: ENTITLEMENTS,
        lockoutAt,
      });
    }
    const { store, service } = open({ storage: memoryStorage({ [KEY]: copy('active', T0 - 60_000) }) });
    expect(store.getSnapshot()).toMatchObject({
      status: 'active',
      source: 'persisted',
      entitlements: ENTITLEMENTS,
      ready: false,
    });
    // The service then says warning: a fresh answer may make it worse.
    service.replies.push(known('warning', { lockout_at: '2026-11-29T12:00:00Z' }));
    const stop = store.start();
    await settle();
    expect(store.getSnapshot()).toMatchObject({
      status: 'warning',
      source: 'service',
      lockoutAt: '2026-11-29T12:00:00Z',
    });
    stop();
    // A copied warning, then the service says active: the banner goes.
    const paid = open({ storage: memoryStorage({ [KEY]: copy('warning', T0 - 60_000) }) });
    paid.service.replies.push({ status: 200, body: { status: 'active' } });
    paid.store.start();
    await settle();
    expect(paid.store.getSnapshot()).toMatchObject({ status: 'active', source: 'service' });
  });

  it('keeps the copied warning through a failed question, whichever comes first, and never as a gate', async () => {
    // localStorage: the copy first, then the failure.
    const sync = open({ storage: memoryStorage({ [KEY]: copy('lockout', T0 - 60_000) }) });
    sync.service.replies.push('network');
    sync.store.start();
    await settle();
    expect(sync.store.getSnapshot()).toMatchObject({
      status: 'warning',
      source: 'fallback',
      ready: true,
      error: { kind: 'network' },
    });
    // AsyncStorage answering after the failure: the same.
    const slow = open({ storage: memoryStorage({ [KEY]: copy('warning', T0 - 60_000) }, true) });
    slow.service.replies.push({ status: 503, body: { code: 'service_unavailable' } });
    slow.store.start();
    await settle();
    expect(slow.store.getSnapshot()).toMatchObject({
      status: 'warning',
      source: 'fallback',
      ready: true,
      error: { kind: 'http', status: 503 },
    });
    // After a fresh answer, a copy read late changes nothing.
    const late = open({ storage: memoryStorage({ [KEY]: copy('warning', T0 - 60_000) }, true) });
    late.service.replies.push({ status: 200, body: { status: 'active' } });
    late.store.start();
    await settle();
    expect(late.store.getSnapshot()).toMatchObject({ status: 'active', source: 'service' });
    // Too old: not used, even with the lookup failing.
    const old = open({ storage: memoryStorage({ [KEY]: copy('warning', T0 - 25 * 3_600_000) }) });
    old.service.replies.push('network');
    old.store.start();
    await settle();
    expect(old.store.getSnapshot()).toMatchObject({ status: 'active', source: 'fallback' });
  });

  it('ignores a copy older than the maximum age, one of another customer, and one that is not a copy', async () => {
    const old = open({ storage: memoryStorage({ [KEY]: copy('active', T0 - 25 * 3_600_000) }) });
    expect(old.store.getSnapshot().source).toBe('fallback');
    const short = open({ maxAgeMs: 1_000, storage: memoryStorage({ [KEY]: copy('active', T0 - 2_000) }) });
    expect(short.store.getSnapshot().source).toBe('fallback');
    const other = open({ customer: 'cus_2', storage: memoryStorage({ [KEY]: copy('active', T0) }) });
    expect(other.store.getSnapshot().source).toBe('fallback');
    for (const junk of ['{', '"x"', '{"status":"paid","at":1}', '{"status":"active"}', 'null']) {
      expect(open({ storage: memoryStorage({ [KEY]: junk }) }).store.getSnapshot().source).toBe('fallback');
    }
  });

  it('renders a bootstrap on the server, a lockout in it as a warning, and a newer copy only when it is better', async () => {
    const lockout = open({
      bootstrap: { status: 'lockout', entitlements: ENTITLEMENTS, pay_url: 'https://invoice.stripe.com/i/x', at: T0 },
    });
    expect(lockout.store.getServerSnapshot()).toMatchObject({
      status: 'warning',
      source: 'bootstrap',
      ready: true,
      payUrl: 'https://invoice.stripe.com/i/x',
    });
    expect(lockout.store.getSnapshot()).toBe(lockout.store.getServerSnapshot());

    // A copy newer than the bootstrap and better: it applies; the server's snapshot stays what the server rendered.
    const newer = open({
      bootstrap: { status: 'warning', at: T0 - 60_000 },
      storage: memoryStorage({ [KEY]: copy('active', T0 - 1_000) }),
    });
    expect(newer.store.getSnapshot()).toMatchObject({ status: 'active', source: 'persisted' });
    expect(newer.store.getServerSnapshot()).toMatchObject({ status: 'warning', source: 'bootstrap' });
    // An older copy does not overrule a newer bootstrap, better or worse.
    const older = open({
      bootstrap: { status: 'warning', at: new Date(T0).toISOString() },
      storage: memoryStorage({ [KEY]: copy('active', T0 - 60_000) }),
    });
    expect(older.store.getSnapshot()).toMatchObject({ status: 'warning', source: 'bootstrap' });
    const worse = open({
      bootstrap: { status: 'active', at: T0 - 60_000 },
      storage: memoryStorage({ [KEY]: copy('warning', T0) }),
    });
    // A newer copy worse than the bootstrap still needs a fresh answer, even with the lookup failing.
    expect(worse.store.getSnapshot()).toMatchObject({ status: 'active', source: 'bootstrap' });
    worse.service.replies.push('network');
    worse.store.start();
    await settle();
    expect(worse.store.getSnapshot()).toMatchObject({ status: 'active', source: 'fallback' });
  });

  it('reads an asynchronous storage (AsyncStorage) when it answers, unless the service answered first', async () => {
    const slow = open({ storage: memoryStorage({ [KEY]: copy('active', T0) }, true) });
    expect(slow.store.getSnapshot().source).toBe('fallback');
    await settle();
    expect(slow.store.getSnapshot()).toMatchObject({ source: 'persisted', entitlements: ENTITLEMENTS });
  });

  it('fails open: a failure keeps what was shown but never as a gate, and says why', async () => {
    const { store, service, time } = open();
    service.replies.push(known('lockout'), {
      status: 401,
      body: { type: 'about:blank', title: 'Unauthorized', status: 401, code: 'invalid_publishable_key', detail: 'x' },
    });
    const stop = store.start();
    await settle();
    expect(store.getSnapshot().status).toBe('lockout');
    await time.advance(1_000);
    await store.refresh();
    expect(store.getSnapshot()).toMatchObject({
      status: 'warning',
      source: 'fallback',
      ready: true,
      error: { kind: 'http', status: 401, code: 'invalid_publishable_key' },
    });
    // Nothing known at all: active.
    const first = open();
    first.service.replies.push('network');
    first.store.start();
    await settle();
    expect(first.store.getSnapshot()).toMatchObject({
      status: 'active',
      source: 'fallback',
      ready: true,
      error: { kind: 'network' },
    });
    stop();
  });

  it('gives up on a service that does not answer within the timeout: ready, active', async () => {
    const { store, service } = open({ timeoutMs: 20 });
    service.replies.push('hang');
    store.start();
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(store.getSnapshot()).toMatchObject({
      status: 'active',
      ready: true,
      source: 'fallback',
      error: { kind: 'timeout' },
    });
  });

  it('asks again at lockout_at, and follows a return while something is shown, one question a second at most', async () => {
    const { store, service, time } = open();
    service.replies.push(known('warning', { lockout_at: new Date(T0 + 3 * 86_400_000).toISOString() }));
    const stop = store.start();
    await settle();
    expect(service.asked).toHaveLength(1);
    // Focus and visibility together, at once: one question, once the second has passed.
    service.replies.push(known('warning', { lockout_at: new Date(T0 + 3 * 86_400_000).toISOString() }));
    store.returned();
    store.returned();
    await settle();
    expect(service.asked).toHaveLength(1);
    await time.advance(1_000);
    expect(service.asked).toHaveLength(2);
    // Followed every 2 s for 30 s while still shown (Stripe's invoice.paid may come a moment after the customer).
    await time.advance(2_000);
    expect(service.asked).toHaveLength(3);
    service.replies.push({ status: 200, body: { status: 'active' } });
    await time.advance(2_000);
    expect(store.getSnapshot()).toMatchObject({ status: 'active', source: 'service' });
    const afterPaid = service.asked.length;
    await time.advance(30_000);
    expect(service.asked.length).toBe(afterPaid);
    stop();

    // The scheduled lockout: asked at its time.
    const later = open();
    later.service.replies.push(
      known('warning', { lockout_at: new Date(T0 + 3 * 86_400_000).toISOString() }),
      known('lockout'),
    );
    const stop2 = later.store.start();
    await settle();
    await later.time.advance(3 * 86_400_000 - 1);
    expect(later.service.asked).toHaveLength(1);
    await later.time.advance(1);
    expect(later.service.asked).toHaveLength(2);
    expect(later.store.getSnapshot()).toMatchObject({ status: 'lockout', source: 'service' });
    stop2();
  });

  it('sends a preview and never persists its answer; asks nothing without a customer', async () => {
    const storage = memoryStorage();
    const { store, service } = open({ storage, preview: 'lockout' });
    service.replies.push(known('lockout'));
    store.start();
    await settle();
    expect((service.asked[0] as URL).searchParams.get('preview')).toBe('lockout');
    expect(store.getSnapshot().status).toBe('lockout');
    expect(storage.data).toEqual({});
    const nobody = open({ customer: null });
    nobody.store.start();
    await settle();
    expect(nobody.service.asked).toHaveLength(0);
    expect(nobody.store.getSnapshot()).toMatchObject({ status: 'active', ready: true });
  });
});

const problem = (extra: Record<string, unknown> = {}) => ({
  type: 'about:blank',
  title: 'Payment Required',
  status: 402,
  code: 'billing_lockout',
  detail: 'This account is locked until its overdue invoice is paid.',
  pay_url: 'https://invoice.stripe.com/i/acct_1/x',
  lockout_at: null,
  ...extra,
});

describe("the billing status store: the tenant's own API refusing", () => {
  it('gates on the 402 billing_lockout problem, with its pay link, and never persists it', async () => {
    const storage = memoryStorage();
    const { store, service } = open({ storage });
    service.replies.push({ status: 200, body: { status: 'active' } });
    const stop = store.start();
    await settle();
    expect(store.getSnapshot()).toMatchObject({ status: 'active', source: 'service' });
    const kept = storage.data[KEY];
    store.refused(problem());
    expect(store.getSnapshot()).toMatchObject({
      status: 'lockout',
      source: 'api',
      ready: true,
      payUrl: 'https://invoice.stripe.com/i/acct_1/x',
      error: null,
    });
    expect(storage.data[KEY]).toBe(kept);
    // A refusal of a warning (an app that lets only active customers in) carries when the lockout comes.
    store.refused(problem({ lockout_at: '2026-11-29T12:00:00Z' }));
    expect(store.getSnapshot()).toMatchObject({ status: 'lockout', source: 'api', lockoutAt: '2026-11-29T12:00:00Z' });
    stop();
  });

  it('ignores anything but the billing_lockout problem', () => {
    const { store } = open();
    for (const other of [null, 'x', {}, { ...problem(), code: 'forbidden' }, [problem()]]) store.refused(other);
    expect(store.getSnapshot()).toMatchObject({ status: 'active', source: 'fallback' });
  });

  it("lets the service's next fresh answer decide, but not an answer to a question asked before the 402", async () => {
    for (const reply of [
      { status: 200, body: { status: 'active' } },
      { status: 503, body: { code: 'service_unavailable' } },
    ]) {
      const { store, service, time } = open();
      let answer = () => {};
      service.replies.push({ ...reply, after: new Promise<void>((resolve) => (answer = resolve)) });
      const stop = store.start();
      await settle();
      // The first question is in flight when the API refuses, a moment later.
      await time.advance(10);
      store.refused(problem());
      answer();
      await settle();
      // Its answer (or failure) came for a question asked before the 402: the gate stands.
      expect(service.asked).toHaveLength(1);
      expect(store.getSnapshot()).toMatchObject({ status: 'lockout', source: 'api' });
      stop();
    }

    const second = open();
    second.service.replies.push({ status: 200, body: { status: 'active' } });
    const stop2 = second.store.start();
    await settle();
    second.store.refused(problem());
    // The customer paid and is back: the service's fresh answer lifts the gate.
    second.service.replies.push({ status: 200, body: { status: 'active' } });
    await second.time.advance(1_000);
    second.store.returned();
    await settle();
    expect(second.store.getSnapshot()).toMatchObject({ status: 'active', source: 'service' });
    // A failed question asked after the 402: fail open, the gate becomes the banner.
    second.store.refused(problem());
    second.service.replies.push('network');
    await second.time.advance(2_000);
    await second.store.refresh();
    expect(second.store.getSnapshot()).toMatchObject({ status: 'warning', source: 'fallback' });
    stop2();
  });

  it('without a customer to ask about, gates on the 402 and lets go on return', () => {
    const { store } = open({ customer: null });
    const stop = store.start();
    store.refused(problem());
    expect(store.getSnapshot()).toMatchObject({ status: 'lockout', source: 'api' });
    store.returned();
    expect(store.getSnapshot()).toMatchObject({ status: 'active', source: 'fallback', ready: true });
    stop();
  });
});
