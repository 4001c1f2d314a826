import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { countdown, DEFAULT_TEXTS, payLinks, safeUrl } from '@dunwall/core';
import { deviceLanguages, httpsUrl } from '../../packages/react-native/src/native-view.js';

/** The sentence of the shared countdown, which React Native shows. */
const countdownText = (at: number, locales: readonly string[], text: string, now: number) =>
  countdown(at, locales, text, now)[0];

/**
 * What React Native needs beside the shared view: links checked without `URL` (React
 * Native's throws on `protocol`), in the shared order, and a countdown on Hermes, which has
 * no `Intl.RelativeTimeFormat`.
 */
describe('links without URL', () => {
  it('takes https links with a host as given, and nothing else', () => {
    for (const ok of [
      'https://pay.stripe.com/i/acct_1/test_YWNjdA?s=ap',
      'HTTPS://billing.acme.test',
      'https://acme.test:8443/card#top',
    ])
      expect(httpsUrl(ok)).toBe(ok);
    for (const bad of [
      null,
      '',
      'http://acme.test/card',
      'javascript:alert(1)',
      'data:text/html,<b>x</b>',
      'https://',
      'https:///path',
      'https://acme.test/a b',
      ' https://acme.test',
      'https:\\\\acme.test',
      `https://acme.test/${'a'.repeat(2048)}`,
    ])
      expect(httpsUrl(bad)).toBeNull();
  });

  it('takes the links the browser takes (the shared safeUrl), and leads with them in the shared order', () => {
    const url = fc.oneof(
      fc.constant(null),
      fc
        .webUrl({ validSchemes: ['https'], withQueryParameters: true, withFragments: true })
        .filter((u) => new URL(u).href === u),
      fc.constantFrom('http://acme.test/card', 'javascript:alert(1)'),
    );
    fc.assert(
      fc.property(
        fc.constantFrom('warning', 'lockout'),
        url,
        url,
        url,
        url,
        fc.boolean(),
        (status, payUrl, cardUpdateUrl, own, payment, withPay) => {
          for (const u of [payUrl, cardUpdateUrl, own, payment]) expect(httpsUrl(u)).toBe(safeUrl(u));
          const texts = withPay ? { ...DEFAULT_TEXTS, pay: 'Pay the invoice' } : DEFAULT_TEXTS;
          const branding = payment ? { payment_url: payment } : {};
          const answer = { status, payUrl, cardUpdateUrl };
          expect(payLinks(answer, texts, branding, own, httpsUrl)).toEqual(
            payLinks(answer, texts, branding, own, (u) => safeUrl(u)),
          );
        },
      ),
      { numRuns: 150 },
    );
  });
});

describe('the countdown on Hermes', () => {
  afterEach(() => {
    vi.unstubAllGlobals();
  });
  const at = Date.parse('2026-03-05T10:00:00Z');
  const now = Date.parse('2026-03-02T09:00:00Z');

  it('says the time left where Intl.RelativeTimeFormat exists', () => {
    expect(countdownText(at, ['en-US'], DEFAULT_TEXTS.countdown, now)).toBe('Access will be paused in 3 days.');
  });

  it('says the date instead, in the reader’s language, where it does not', () => {
    vi.stubGlobal('Intl', {
      ...Object.fromEntries(Object.getOwnPropertyNames(Intl).map((k) => [k, Intl[k as keyof typeof Intl]])),
      RelativeTimeFormat: undefined,
    });
    const date = new Intl.DateTimeFormat(['en-US'], { dateStyle: 'medium', timeStyle: 'short' }).format(at);
    expect(countdownText(at, ['en-US'], DEFAULT_TEXTS.countdown, now)).toBe(`Access will be paused ${date}.`);
    expect(countdownText(at, ['fr'], 'Accès suspendu {time} ({date}).', now)).toMatch(
      /^Accès suspendu 5 mars 2026.*\(5 mars 2026.*\)\.$/,
    );
  });

  it("takes the device's language from Intl", () => {
    expect(deviceLanguages()).toEqual([Intl.DateTimeFormat().resolvedOptions().locale]);
  });
});
