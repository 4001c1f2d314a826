import { describe, expect, it } from 'vitest';
import { DEFAULT_COLORS, DEFAULT_TEXTS, gateLinks, memoryDismissals, safeUrl, shownFor, viewOf } from '@dunwall/core';
import type { ViewState } from '@dunwall/core';

/**
 * What the snippet, @dunwall/react and @dunwall/react-native show for a status, decided once:
 * a banner, a gate or nothing, and the view each of them draws.
 */
const T0 = Date.parse('2026-03-02T09:00:00Z');
const WARNING: ViewState = {
  status: 'warning',
  source: 'service',
  lockoutAt: '2026-03-05T10:00:00Z',
  payUrl: 'https://pay.stripe.test/i/1',
  cardUpdateUrl: 'https://acme.test/card',
  entitlements: { powered_by_watermark: true, custom_domain: false, downstream_webhooks: false },
};
const BRANDING = {
  support_url: 'https://acme.test/help',
  logo_url: 'javascript:alert(1)',
  colors: { accent: '#0a7cff' },
  texts: { fr: { banner_body: 'Votre dernier paiement a échoué.' } },
};
const safe = (u: string | null | undefined) => safeUrl(u);

describe('what is shown', () => {
  it('a banner for a warning unless dismissed; a gate for a fresh lockout only; nothing else', () => {
    expect(shownFor({ status: 'warning', source: 'persisted' }, false)).toBe('banner');
    expect(shownFor({ status: 'warning', source: 'service' }, true)).toBeNull();
    expect(shownFor({ status: 'lockout', source: 'service' }, false)).toBe('gate');
    expect(shownFor({ status: 'lockout', source: 'api' }, true)).toBe('gate');
    for (const source of ['bootstrap', 'persisted', 'fallback', 'cache'])
      expect(shownFor({ status: 'lockout', source }, false)).toBeNull();
    expect(shownFor({ status: 'active', source: 'service' }, false)).toBeNull();
  });

  it('keeps a dismissal per key for the session, and tells who listens', () => {
    const dismissals = memoryDismissals();
    let told = 0;
    const stop = dismissals.subscribe(() => (told += 1));
    dismissals.add('a');
    stop();
    dismissals.add('b');
    expect([dismissals.has('a'), dismissals.has('b'), dismissals.has('c'), told]).toEqual([true, true, false, 1]);
  });
});

describe('the view', () => {
  it('in the reader’s language, the way to pay first, https links only, the branding’s colours under the app’s', () => {
    const { view, colors, locales } = viewOf({
      state: WARNING,
      branding: BRANDING,
      languages: ['fr-FR'],
      own: { colors: { text: '#000000' } },
      now: T0,
      safe,
    });
    expect(view.texts.warning).toBe('Votre dernier paiement a échoué.');
    expect(view.texts.update).toBe(DEFAULT_TEXTS.update);
    expect(view.links.map((l) => [l.href, l.external])).toEqual([
      ['https://pay.stripe.test/i/1', true],
      ['https://acme.test/card', false],
    ]);
    expect(view.countdown).toBe('Access will be paused in 3 days.');
    expect(locales).toEqual(['en']);
    expect([view.support, view.logo, view.watermark]).toEqual(['https://acme.test/help', null, true]);
    expect(colors).toEqual({ ...DEFAULT_COLORS, accent: '#0a7cff', text: '#000000' });
    expect(gateLinks(view).map((l) => l.text)).toEqual([
      DEFAULT_TEXTS.payNow,
      DEFAULT_TEXTS.update,
      DEFAULT_TEXTS.support,
    ]);
  });

  it('has no countdown before the clock is read (server rendering), and a gate with no link says so', () => {
    const lockout: ViewState = { ...WARNING, status: 'lockout', lockoutAt: null, payUrl: null, cardUpdateUrl: null };
    const { view } = viewOf({ state: WARNING, branding: {}, languages: ['en'], own: {}, now: null, safe });
    expect(view.countdown).toBe('');
    const gate = viewOf({ state: lockout, branding: {}, languages: ['en'], own: {}, now: T0, safe }).view;
    expect([gate.countdown, gateLinks(gate)]).toEqual(['', []]);
    const own = viewOf({
      state: lockout,
      branding: {},
      languages: ['en'],
      own: { supportUrl: 'https://a.test/s' },
      now: T0,
      safe,
    });
    expect(gateLinks(own.view)).toEqual([{ href: 'https://a.test/s', text: DEFAULT_TEXTS.support, external: false }]);
  });
});
