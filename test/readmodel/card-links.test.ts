import { describe, expect, it } from 'vitest';
import { answerBody, noticeBody, prepareTenant } from '../../src/domain/lookup.js';
import { sha256 } from '../../src/domain/keys.js';
import type { TenantAuth, TenantAuthFields } from '../../src/domain/types.js';
import { CardNotices } from '../../src/readmodel/card-notices.js';
import { SubscriberExtras } from '../../src/readmodel/subscriber-extras.js';
import { fingerprint } from '../../src/readmodel/subscriber-index.js';
import { parseSubscriberRows } from '../../src/store/index.js';
import type { SubscriberExtra } from '../../src/store/index.js';

/**
 * A warning's card link through Dunwall (docs/links.md): carried from the change log's COPY
 * rows into the read model's extras, answered as `card_update_url` on a signed lookup of a
 * warning when the tenant set no card update URL of its own, never on an unsigned one, never
 * on a lockout; and carried by a card-expiring notice's answer.
 */

const NOW = Date.parse('2026-05-01T00:00:00Z');
const PAY = 'http://127.0.0.1:3000/pay/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
const CARD = 'http://127.0.0.1:3000/card/BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB';

function tenant(over: Partial<TenantAuthFields> = {}): TenantAuth {
  return prepareTenant({
    id: 7,
    slug: 'acme',
    suspended: false,
    hmacRequired: false,
    cardUpdateUrl: null,
    allowedOrigins: null,
    lookupsPerMinute: null,
    branding: {},
    enforcement: 'gate',
    livemode: null,
    entitlements: { powered_by_watermark: true },
    publishableKeyHashes: [{ value: sha256('pk_acme_0000000000000000000000'), expiresAtMs: null }],
    hmacSecrets: [{ value: 'secret', expiresAtMs: null }],
    secretKeys: [],
    ...over,
  });
}

const json = (b: Buffer): Record<string, unknown> => JSON.parse(b.toString('utf8')) as Record<string, unknown>;

describe('card links in the change log rows', () => {
  it('parses the card link after the pay link, each possibly NULL', () => {
    const rows = Buffer.from(
      [
        `7\tcus_a\twarning\t1800000000\t${PAY}\t${CARD}`,
        `7\tcus_b\twarning\t\\N\t\\N\t${CARD}`,
        `7\tcus_c\tlockout\t\\N\t${PAY}\t\\N`,
        `7\tcus_d\tlockout\t\\N\t\\N\t\\N`,
        `7\tcus_e\tactive\t\\N\t\\N\t\\N`,
        '',
      ].join('\n'),
    );
    const seen: [string, SubscriberExtra | null][] = [];
    parseSubscriberRows(rows, {
      subscriber: (_t, bytes, start, end, _s, extra) =>
        seen.push([Buffer.from(bytes.subarray(start, end)).toString('latin1'), extra]),
    });
    expect(seen).toEqual([
      ['cus_a', { lockoutAtS: 1_800_000_000, payUrl: PAY, cardUrl: CARD }],
      ['cus_b', { lockoutAtS: null, payUrl: null, cardUrl: CARD }],
      ['cus_c', { lockoutAtS: null, payUrl: PAY, cardUrl: null }],
      ['cus_d', null],
      ['cus_e', null],
    ]);
  });
});

describe("a warning's card_update_url", () => {
  const extra = { lockoutAtS: 0, payUrl: PAY, cardUrl: CARD };

  it('is the card link on a signed lookup when the tenant set none, in the contract key order', () => {
    const body = answerBody(tenant(), 'warning', extra, true, NOW).toString('utf8');
    expect(body).toBe(
      `{"status":"warning","card_update_url":"${CARD}","entitlements":{"powered_by_watermark":true},"pay_url":"${PAY}"}`,
    );
  });

  it("is null on an unsigned lookup, and the tenant's own URL when it set one", () => {
    expect(json(answerBody(tenant(), 'warning', extra, false, NOW))).toEqual({
      status: 'warning',
      card_update_url: null,
      entitlements: { powered_by_watermark: true },
    });
    const own = tenant({ cardUpdateUrl: 'https://acme.test/card' });
    expect(json(answerBody(own, 'warning', extra, true, NOW))).toMatchObject({
      card_update_url: 'https://acme.test/card',
      pay_url: PAY,
    });
  });

  it('is not carried by a lockout, stored or reached by the clock; a banner-only lockout is a warning and carries it', () => {
    expect(json(answerBody(tenant(), 'lockout', extra, true, NOW))).toMatchObject({
      status: 'lockout',
      card_update_url: null,
    });
    const reached = { ...extra, lockoutAtS: NOW / 1000 - 1 };
    expect(json(answerBody(tenant(), 'warning', reached, true, NOW))).toMatchObject({
      status: 'lockout',
      card_update_url: null,
    });
    expect(json(answerBody(tenant({ enforcement: 'banner_only' }), 'lockout', extra, true, NOW))).toMatchObject({
      status: 'warning',
      card_update_url: CARD,
    });
  });

  it('is built once in the extras, and a card link alone makes the signed answer differ from the unsigned', () => {
    const t = tenant();
    const extras = new SubscriberExtras();
    extras.set(7, 'cus_a', { lockoutAtS: null, payUrl: null, cardUrl: CARD });
    const fp = new Uint32Array(4);
    fingerprint(7, 'cus_a', fp);
    const signed = extras.answer(fp, t, 'warning', true, NOW);
    const unsigned = extras.answer(fp, t, 'warning', false, NOW);
    expect(signed && json(signed)).toMatchObject({ card_update_url: CARD });
    expect(unsigned && json(unsigned)).toMatchObject({ card_update_url: null });
    expect(extras.answer(fp, t, 'warning', true, NOW)).toBe(signed);
    expect(unsigned).toBe(t.knownBodies.warning);
    // Set again without it: the answer is built again, without the link.
    extras.set(7, 'cus_a', { lockoutAtS: null, payUrl: PAY, cardUrl: null });
    const again = extras.answer(fp, t, 'warning', true, NOW);
    expect(again && json(again)).toMatchObject({ card_update_url: null, pay_url: PAY });
  });
});

describe("a card-expiring notice's card link", () => {
  it("is the tenant's own URL when set, else the card link, else null", () => {
    expect(json(noticeBody(tenant(), '2026-06', CARD))).toEqual({
      status: 'active',
      card_update_url: CARD,
      entitlements: { powered_by_watermark: true },
      notice: { kind: 'card_expiring', expires: '2026-06' },
    });
    expect(json(noticeBody(tenant({ cardUpdateUrl: 'https://acme.test/card' }), '2026-06', CARD))).toMatchObject({
      card_update_url: 'https://acme.test/card',
    });
    expect(json(noticeBody(tenant(), '2026-06'))).toMatchObject({ card_update_url: null });
  });

  it('is carried from the notice the read model holds', () => {
    const notices = new CardNotices();
    const t = tenant();
    notices.set(7, 'cus_a', { expires: '2026-06', untilS: NOW / 1000 + 86_400, cardUrl: CARD });
    const body = notices.answer(t, 'cus_a', NOW);
    expect(body && json(body)).toMatchObject({ card_update_url: CARD, notice: { expires: '2026-06' } });
    expect(notices.answer(t, 'cus_a', NOW)).toBe(body);
  });
});
