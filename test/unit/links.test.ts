import { afterEach, describe, expect, it, vi } from 'vitest';
import { hostedPageExpiresAtMs, parsePublicUrl } from '../../src/domain/links.js';
import { contactPage, pickLocale } from '../../src/http/routes/links.js';
import { ConfigError, loadConfig } from '../../src/runtime/config.js';
import { redactUrl } from '../../src/runtime/logger.js';
import { checkPublicUrl } from '../../src/runtime/start/links.js';
import { openLink, readerLocale } from '../../src/services/customer-links.js';
import type { OpenLinkDeps } from '../../src/services/customer-links.js';
import type { LinkRedirect } from '../../src/services/stripe-links.js';
import type { LinkOpen, ResolvedLink } from '../../src/store/index.js';

const DAY_MS = 86_400_000;
const TOKEN = 'a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6';

describe('DUNWALL_PUBLIC_URL', () => {
  it.each([
    ['https://billing.example.com', 'https://billing.example.com'],
    ['https://billing.example.com/', 'https://billing.example.com'],
    ['https://example.com/dunwall/', 'https://example.com/dunwall'],
    ['http://127.0.0.1:3000', 'http://127.0.0.1:3000'],
    ['http://localhost:3000', 'http://localhost:3000'],
    ['http://[::1]:3000', 'http://[::1]:3000'],
  ])('takes %s as %s', (value, url) => {
    expect(parsePublicUrl(value)).toEqual({ ok: true, url });
    expect(loadConfig({ DUNWALL_PUBLIC_URL: value }).publicUrl).toBe(url);
  });

  it.each([
    ['http://billing.example.com', 'http:// only for a loopback'],
    ['http://10.0.0.1', 'http:// only for a loopback'],
    ['ftp://example.com', 'must be https://'],
    ['https://user:pw@example.com', 'credentials'],
    ['https://example.com/?a=1', 'query'],
    ['example.com', 'not a URL'],
  ])('refuses %s, naming the variable', (value, why) => {
    expect(parsePublicUrl(value).ok).toBe(false);
    expect(() => loadConfig({ DUNWALL_PUBLIC_URL: value })).toThrow(ConfigError);
    expect(() => loadConfig({ DUNWALL_PUBLIC_URL: value })).toThrow(/DUNWALL_PUBLIC_URL/);
    expect(() => loadConfig({ DUNWALL_PUBLIC_URL: value })).toThrow(why);
  });

  it('is unset by default, and required at boot once a space has a Stripe API key', async () => {
    expect(loadConfig({}).publicUrl).toBeNull();
    const recorded: (string | null)[] = [];
    const store = (keyed: boolean) => ({
      links: {
        anySpaceWithKey: () => Promise.resolve(keyed),
        setPublicUrl: (url: string | null) => {
          recorded.push(url);
          return Promise.resolve(false);
        },
      } as never,
    });
    const log = { info: () => {} };
    await expect(checkPublicUrl({ publicUrl: null }, store(true), log, new Date())).rejects.toThrow(
      /^DUNWALL_PUBLIC_URL is not set, and a tenant has a Stripe API key/,
    );
    expect(recorded).toEqual([]);
    await checkPublicUrl({ publicUrl: null }, store(false), log, new Date());
    await checkPublicUrl({ publicUrl: 'https://b.example' }, store(true), log, new Date());
    expect(recorded).toEqual([null, 'https://b.example']);
  });
});

describe("the stored hosted page's end (Stripe's rule)", () => {
  const finalized = Date.parse('2026-01-01T00:00:00Z') / 1000;
  it('is 30 days after finalization for an invoice charged automatically', () => {
    expect(hostedPageExpiresAtMs({ dueDateS: null, finalizedAtS: finalized })).toBe(finalized * 1000 + 30 * DAY_MS);
  });
  it('is 30 days after the due date, never more than 120 days after finalization', () => {
    const due = finalized + 14 * 86_400;
    expect(hostedPageExpiresAtMs({ dueDateS: due, finalizedAtS: finalized })).toBe(due * 1000 + 30 * DAY_MS);
    const farDue = finalized + 100 * 86_400;
    expect(hostedPageExpiresAtMs({ dueDateS: farDue, finalizedAtS: finalized })).toBe(finalized * 1000 + 120 * DAY_MS);
  });
  it('is not known without a finalization time', () => {
    expect(hostedPageExpiresAtMs({ dueDateS: finalized, finalizedAtS: null })).toBeNull();
  });
});

describe('a link in the logs', () => {
  it('keeps six characters of the token', () => {
    expect(redactUrl(`/pay/${TOKEN}`)).toBe('/pay/a1B2c3…');
    expect(redactUrl(`/card/${TOKEN}?x=1`)).toBe('/card/a1B2c3…');
    expect(redactUrl(`/pay/${TOKEN}`)).not.toContain(TOKEN.slice(6));
  });
});

describe('the contact page', () => {
  it("picks the reader's language among the branding's locales, by weight", () => {
    expect(pickLocale('fr-CA,fr;q=0.9,en;q=0.8', ['en', 'fr'])).toBe('fr');
    expect(pickLocale('de;q=0.1, pt-BR', ['de', 'pt-BR'])).toBe('pt-BR');
    expect(pickLocale('ja', ['de'])).toBe('default');
    expect(pickLocale(undefined, ['de'])).toBe('default');
  });
  it('escapes what the branding holds', () => {
    const { html } = contactPage(
      { support_url: 'https://x.test/?a="b"', texts: { default: { support: '<b>help</b>' } } },
      undefined,
    );
    expect(html).toContain('href="https://x.test/?a=&#34;b&#34;"');
    expect(html).toContain('&#60;b&#62;help&#60;/b&#62;');
    expect(html).not.toContain('<b>');
  });
});

describe("the reader's locale for Stripe's pages", () => {
  it('is the first language of Accept-Language, when it has the form Stripe takes', () => {
    expect(readerLocale('fr-fr,fr;q=0.9')).toBe('fr-FR');
    expect(readerLocale('DE')).toBe('de');
    expect(readerLocale('*')).toBeUndefined();
    expect(readerLocale('zh-Hant-TW')).toBeUndefined();
    expect(readerLocale(undefined)).toBeUndefined();
  });
});

describe('opening a link', () => {
  afterEach(() => vi.useRealTimers());
  const link: ResolvedLink = {
    spaceId: 7,
    kind: 'pay',
    customerId: 'cus_1',
    invoiceId: 'in_1',
    storedPage: 'https://invoice.stripe.com/i/stored',
  };
  function deps(
    open: () => Promise<LinkRedirect>,
    resolve: () => Promise<ResolvedLink | null> = () => Promise.resolve(link),
  ) {
    const opens: LinkOpen[] = [];
    const d: OpenLinkDeps = {
      links: {
        resolve,
        recordOpen: (o) => {
          opens.push(o);
          return Promise.resolve();
        },
      },
      stripe: { open },
      brandingOf: () => ({ payment_url: 'https://acme.test/pay' }),
      now: () => Date.parse('2026-01-01T00:00:00Z'),
      log: { warn: () => {} },
    };
    return { d, opens };
  }

  it('falls back to the stored page once Stripe has not answered in 3 s', async () => {
    vi.useFakeTimers();
    const { d, opens } = deps(() => new Promise(() => {}));
    const answer = openLink(d, 'pay', TOKEN, undefined);
    await vi.advanceTimersByTimeAsync(2_999);
    let settled = false;
    void answer.then(() => (settled = true));
    await vi.advanceTimersByTimeAsync(0);
    expect(settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await answer).toEqual({ kind: 'redirect', location: link.storedPage, sentTo: 'stored_page' });
    expect(opens).toMatchObject([{ spaceId: 7, kind: 'pay', customerId: 'cus_1', sentTo: 'stored_page' }]);
  });

  it('falls back when the Stripe client throws, and shows the page, never an error, when the store is down', async () => {
    const thrown = deps(() => Promise.reject(new Error('boom')));
    expect(await openLink(thrown.d, 'pay', TOKEN, 'fr')).toMatchObject({ kind: 'redirect', sentTo: 'stored_page' });
    const card = deps(
      () => Promise.reject(new Error('boom')),
      () => Promise.resolve({ ...link, kind: 'card', invoiceId: null }),
    );
    expect(await openLink(card.d, 'card', TOKEN, undefined)).toEqual({
      kind: 'redirect',
      location: 'https://acme.test/pay',
      sentTo: 'payment_link',
    });
    const down = deps(
      () => Promise.resolve({ ok: true, location: 'https://x' }),
      () => Promise.reject(new Error('connection refused')),
    );
    expect(await openLink(down.d, 'pay', TOKEN, undefined)).toEqual({ kind: 'page', status: 200, branding: null });
    expect(down.opens).toEqual([]);
  });
});
