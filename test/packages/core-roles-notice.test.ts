import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  createStatusStore,
  DEFAULT_TEXTS,
  dismissKey,
  gateLinks,
  noticeOf,
  roleOf,
  safeUrl,
  shownFor,
  viewOf,
} from '@dunwall/core';
import type { ViewState } from '@dunwall/core';
import { httpsUrl } from '../../packages/react-native/src/native-view.js';

/**
 * What the shared view decides of roles, notices and local links, once for the snippet and
 * both React packages: a member's texts and no link; a notice shown on an active answer only,
 * dismissed on a key of its own; http only to this machine.
 */
const safe = (u: string | null | undefined) => safeUrl(u);
const BASE: ViewState = {
  status: 'warning',
  source: 'service',
  lockoutAt: null,
  payUrl: 'https://pay.stripe.test/i/1',
  cardUpdateUrl: 'https://acme.test/card',
  entitlements: null,
};
const NOTICE = { kind: 'card_expiring', expires: '2027-04' } as const;
const BRANDING = {
  payment_url: 'https://acme.test/pay',
  support_url: 'https://acme.test/help',
  texts: { fr: { member_body: 'Demandez à votre administrateur.', member_gate_body: 'Compte suspendu : demandez.' } },
};

afterEach(() => vi.restoreAllMocks());

describe('roles', () => {
  it('billing_admin by default; member named; anything else a member, said once in the console', () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => {});
    expect([roleOf(undefined, 'acme'), roleOf(null, 'acme'), roleOf('billing_admin', 'acme')]).toEqual([
      'billing_admin',
      'billing_admin',
      'billing_admin',
    ]);
    expect(roleOf('member', 'acme')).toBe('member');
    expect(warn).not.toHaveBeenCalled();
    for (const other of ['Member', 'admin', 'billing-admin', '']) expect(roleOf(other, 'acme')).toBe('member');
    expect(warn.mock.calls.map((c) => String(c[0]))).toContain(
      '[dunwall] unknown_role: "billing-admin" (tenant "acme"): shown as member',
    );
  });

  it("a member reads the branding's member texts in the reader's language, with no pay or card link and no 'contact support to restore'", () => {
    for (const status of ['warning', 'lockout'] as const) {
      const member = viewOf({
        state: { ...BASE, status },
        branding: BRANDING,
        languages: ['fr-FR'],
        own: { cardUpdateUrl: 'https://acme.test/own-card' },
        now: null,
        safe,
        role: 'member',
      }).view;
      expect(member.role).toBe('member');
      expect(member.links).toEqual([]);
      expect(member.message).toBe('Demandez à votre administrateur.');
      expect(member.texts.lockout).toBe('Compte suspendu : demandez.');
      expect(member.texts.noLink).toBe('');
      // The support page is no payment link: it stays.
      expect(gateLinks(member).map((l) => l.href)).toEqual(['https://acme.test/help']);
    }
    const english = viewOf({ state: BASE, branding: {}, languages: ['en'], own: {}, now: null, safe, role: 'member' });
    expect([english.view.message, english.view.texts.lockout]).toEqual([
      DEFAULT_TEXTS.member,
      DEFAULT_TEXTS.memberGate,
    ]);
    const admin = viewOf({ state: BASE, branding: BRANDING, languages: ['fr'], own: {}, now: null, safe }).view;
    expect([admin.role, admin.links.length, admin.message]).toEqual(['billing_admin', 2, DEFAULT_TEXTS.warning]);
  });
});

describe('the notice', () => {
  it('is shown on an active answer only, unless dismissed; never a gate', () => {
    expect(shownFor({ status: 'active', source: 'service', notice: NOTICE }, false)).toBe('notice');
    expect(shownFor({ status: 'active', source: 'persisted', notice: NOTICE }, true)).toBeNull();
    expect(shownFor({ status: 'active', source: 'service', notice: null }, false)).toBeNull();
    expect(shownFor({ status: 'warning', source: 'service', notice: NOTICE }, false)).toBe('banner');
    expect(shownFor({ status: 'lockout', source: 'service', notice: NOTICE }, false)).toBe('gate');
  });

  it('takes the kinds and months it knows only', () => {
    expect(noticeOf(NOTICE)).toEqual(NOTICE);
    for (const bad of [
      null,
      undefined,
      'card_expiring',
      { kind: 'card_expiring' },
      { kind: 'card_expiring', expires: '2027-13' },
      { kind: 'card_expiring', expires: '27-04' },
      { kind: 'trial_ending', expires: '2027-04' },
    ])
      expect(noticeOf(bad)).toBeNull();
  });

  it('says the month as MM/YYYY, with the card link alone (never the pay link or the payment link); a member without it', () => {
    const state: ViewState = { ...BASE, status: 'active', payUrl: null, notice: NOTICE };
    const admin = viewOf({ state, branding: BRANDING, languages: ['en'], own: {}, now: null, safe }).view;
    expect(admin.message).toBe('Your card expires 04/2027. Update it to keep your subscription running.');
    expect(admin.links).toEqual([{ href: 'https://acme.test/card', text: DEFAULT_TEXTS.update, external: false }]);
    const own = viewOf({
      state: { ...state, cardUpdateUrl: null },
      branding: BRANDING,
      languages: ['en'],
      own: { texts: { notice: 'Carte : {expires} ({expires})' } },
      now: null,
      safe,
    }).view;
    expect([own.message, own.links]).toEqual(['Carte : 04/2027 (04/2027)', []]);
    const member = viewOf({ state, branding: {}, languages: ['en'], own: {}, now: null, safe, role: 'member' }).view;
    expect([member.message, member.links]).toEqual([DEFAULT_TEXTS.member, []]);
  });

  it("is dismissed on a key of its own: never a warning's, and another month is told again", () => {
    const warning = dismissKey('acme', 'cus_1');
    const april = dismissKey('acme', 'cus_1', NOTICE);
    expect(new Set([warning, april, dismissKey('acme', 'cus_1', { ...NOTICE, expires: '2027-05' })]).size).toBe(3);
    expect(april).toMatch(/^[A-Za-z0-9_-]+$/);
  });

  it("comes through the status store on an active answer with its card link, and not on another status's", async () => {
    const answers: unknown[] = [
      { status: 'active', entitlements: {}, card_update_url: 'https://acme.test/card', notice: NOTICE },
      { status: 'warning', entitlements: {}, card_update_url: 'https://acme.test/card', notice: NOTICE },
      { status: 'active', entitlements: {}, card_update_url: 'https://acme.test/card' },
    ];
    const seen: unknown[] = [];
    for (const answer of answers) {
      const store = createStatusStore({
        baseUrl: 'https://dunwall.test',
        tenant: 'acme',
        publishableKey: 'pk_test_1',
        customer: 'cus_1',
        storage: null,
        fetch: () => Promise.resolve(new Response(JSON.stringify(answer), { status: 200 })),
      });
      await store.refresh();
      const { notice, cardUpdateUrl } = store.getSnapshot();
      seen.push([notice, cardUpdateUrl]);
    }
    expect(seen).toEqual([
      [NOTICE, 'https://acme.test/card'],
      [null, 'https://acme.test/card'],
      [null, null],
    ]);
  });
});

describe('the kept answer', () => {
  it('keeps the notice, never the pay or the card link (a portal session on the card to whoever holds it)', async () => {
    const kept = new Map<string, string>();
    const storage = {
      getItem: (k: string) => kept.get(k) ?? null,
      setItem: (k: string, v: string) => void kept.set(k, v),
      removeItem: (k: string) => void kept.delete(k),
    };
    const ask = (answer: unknown) =>
      createStatusStore({
        baseUrl: 'https://dunwall.test',
        tenant: 'acme',
        publishableKey: 'pk_test_1',
        customer: 'cus_1',
        storage,
        fetch: () => Promise.resolve(new Response(JSON.stringify(answer), { status: 200 })),
      });
    await ask({
      status: 'active',
      entitlements: {},
      card_update_url: 'https://dunwall.test/card/tok',
      notice: NOTICE,
    }).refresh();
    const copy = JSON.parse(kept.get('dunwall:v1:acme:cus_1') ?? '{}') as Record<string, unknown>;
    expect([copy.status, copy.notice, 'card_update_url' in copy, 'pay_url' in copy]).toEqual([
      'active',
      NOTICE,
      false,
      false,
    ]);
    // Read back (the service down): the notice, without a link of the answer's.
    const down = createStatusStore({
      baseUrl: 'https://dunwall.test',
      tenant: 'acme',
      publishableKey: 'pk_test_1',
      customer: 'cus_1',
      storage,
      fetch: () => Promise.reject(new TypeError('down')),
    });
    expect([down.getSnapshot().source, down.getSnapshot().notice, down.getSnapshot().cardUpdateUrl]).toEqual([
      'persisted',
      NOTICE,
      null,
    ]);
  });
});

describe('links', () => {
  it('https always; http to this machine only (127.0.0.0/8, ::1, localhost); nothing else, in the browser and in React Native alike', () => {
    for (const ok of [
      'http://127.0.0.1:8080/pay/tok_1',
      'http://127.1.2.3/card/tok',
      'http://localhost:3000/pay/x',
      'http://[::1]:8080/pay/x',
      'https://acme.test/card',
    ]) {
      expect(safeUrl(ok)).toBe(ok);
      expect(httpsUrl(ok)).toBe(ok);
    }
    for (const bad of [
      'http://acme.test/card',
      'http://127.0.0.1.acme.test/pay',
      'http://localhost.acme.test/pay',
      'http://10.0.0.1/pay',
      'http://[::2]/pay',
      'ftp://127.0.0.1/x',
      'javascript:alert(1)',
    ]) {
      expect(safeUrl(bad)).toBeNull();
      expect(httpsUrl(bad)).toBeNull();
    }
  });
});
