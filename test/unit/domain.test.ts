import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/runtime/config.js';
import { HmacKey, computeHmac, hmacDigest, verifyHmac } from '../../src/domain/hmac.js';
import {
  generateHmacSecret,
  generatePublishableKey,
  PUBLISHABLE_KEY_RE,
  randomBase62,
  sha256,
} from '../../src/domain/keys.js';
import { eventShapeProblem } from '../../src/domain/stripe/event.js';
import { isLivemodeMismatch } from '../../src/domain/stripe/outcomes.js';
import {
  allowedOrigin,
  checkBearer,
  checkLookup,
  lookupBody,
  parseBearer,
  prepareTenant,
} from '../../src/domain/lookup.js';
import type { TenantAuth, TenantAuthFields } from '../../src/domain/types.js';
import { cardUpdateUrlProblem, originProblem } from '../../src/domain/validation.js';

const NOW = Date.parse('2026-05-01T00:00:00Z');
const KEY = 'pk_abcdefghijklmnopqrstuvwx';

function tenant(over: Partial<TenantAuthFields> = {}): TenantAuth {
  return prepareTenant({
    id: 1,
    slug: 'acme',
    suspended: false,
    hmacRequired: false,
    cardUpdateUrl: 'https://acme.test/card',
    allowedOrigins: null,
    lookupsPerMinute: null,
    branding: {},
    enforcement: 'gate',
    livemode: null,
    entitlements: { powered_by_watermark: true, custom_domain: false, downstream_webhooks: false },
    publishableKeyHashes: [{ value: sha256(KEY), expiresAtMs: null }],
    hmacSecrets: [{ value: 'secret', expiresAtMs: null }],
    secretKeys: [],
    ...over,
  });
}

describe('parseBearer', () => {
  it.each([
    [undefined, { ok: false, code: 'missing' }],
    ['', { ok: false, code: 'missing' }],
    ['   ', { ok: false, code: 'missing' }],
    ['Bearer abc', { ok: true, token: 'abc' }],
    ['bearer   abc', { ok: true, token: 'abc' }],
    ['BEARER a.b-c_d~e+f/g==', { ok: true, token: 'a.b-c_d~e+f/g==' }],
    ['Bearer', { ok: false, code: 'malformed' }],
    ['Bearer a b', { ok: false, code: 'malformed' }],
    ['Basic abc', { ok: false, code: 'malformed' }],
    ['abc', { ok: false, code: 'malformed' }],
  ])('%j', (header, expected) => {
    expect(parseBearer(header)).toEqual(expected);
  });
});

describe('checkBearer', () => {
  it('maps a missing header and a malformed one to their codes', () => {
    expect(checkBearer(undefined)).toEqual({ ok: false, code: 'missing_publishable_key' });
    expect(checkBearer('Basic x')).toEqual({ ok: false, code: 'invalid_publishable_key' });
    expect(checkBearer(`Bearer ${KEY}`)).toEqual({ ok: true, token: KEY });
  });
});

describe('checkLookup', () => {
  const req = (query: Record<string, unknown>, token = KEY) => ({ token, query });

  it('passes a good request and returns the customer id, and the space its key addresses', () => {
    const t = tenant();
    expect(checkLookup(req({ processor_customer_id: 'cus_1' }), t, NOW)).toEqual({
      ok: true,
      customerId: 'cus_1',
      signed: false,
      preview: null,
      keyId: null,
      space: t,
    });
  });

  it("finds a key in the tenant's other mode (its twin), and answers from that space", () => {
    const TEST_KEY = 'pk_test_abcdefghijklmnopqrstuvwx';
    const twin = tenant({
      id: 2,
      tenantId: 1,
      mode: 'test',
      publishableKeyHashes: [{ value: sha256(TEST_KEY), expiresAtMs: null }],
    });
    const t = tenant({ twin });
    const query = { processor_customer_id: 'cus_1', preview: 'lockout' };
    const test = checkLookup({ token: TEST_KEY, query }, t, NOW);
    expect(test.ok && { space: test.space.id, preview: test.preview }).toEqual({ space: 2, preview: 'lockout' });
    // Remembered on its space: found again without hashing, and still the test space.
    expect(twin.acceptedKeys.has(TEST_KEY)).toBe(true);
    const again = checkLookup({ token: TEST_KEY, query }, t, NOW);
    expect(again.ok && again.space).toBe(twin);
    // The live key: the tenant's own space, and no preview there.
    const live = checkLookup({ token: KEY, query }, t, NOW);
    expect(live.ok && { space: live.space.id, preview: live.preview }).toEqual({ space: 1, preview: null });
    expect(checkLookup({ token: 'pk_test_zzzzzzzzzzzzzzzzzzzzzzzz', query }, t, NOW)).toEqual({
      ok: false,
      code: 'invalid_publishable_key',
    });
  });

  it('ignores an expired key and an expired secret', () => {
    const expired = tenant({ publishableKeyHashes: [{ value: sha256(KEY), expiresAtMs: NOW }] });
    expect(checkLookup(req({ processor_customer_id: 'cus_1' }), expired, NOW)).toEqual({
      ok: false,
      code: 'invalid_publishable_key',
    });
    const oldSecret = tenant({ hmacSecrets: [{ value: 'secret', expiresAtMs: NOW - 1 }] });
    const hmac = computeHmac('secret', 'cus_1');
    expect(checkLookup(req({ processor_customer_id: 'cus_1', hmac }), oldSecret, NOW)).toEqual({
      ok: false,
      code: 'hmac_mismatch',
    });
  });

  it('treats a repeated parameter as one bad value, never a guess', () => {
    expect(checkLookup(req({ processor_customer_id: ['cus_1', 'cus_1'] }), tenant(), NOW)).toEqual({
      ok: false,
      code: 'invalid_processor_customer_id',
    });
    const hmac = computeHmac('secret', 'cus_1');
    expect(checkLookup(req({ processor_customer_id: 'cus_1', hmac: [hmac] }), tenant(), NOW)).toEqual({
      ok: false,
      code: 'hmac_mismatch',
    });
  });
});

describe('hmac', () => {
  it('accepts either of two secrets and rejects anything that is not 64 hex characters', () => {
    const hmac = computeHmac('new', 'cus_1');
    const keys = (secrets: string[]) => secrets.map((s) => ({ value: new HmacKey(s), expiresAtMs: null }));
    expect(verifyHmac(hmac, 'cus_1', keys(['old', 'new']), NOW)).toBe(true);
    expect(verifyHmac(hmac.toUpperCase(), 'cus_1', keys(['new']), NOW)).toBe(true);
    expect(verifyHmac(hmac, 'cus_1', keys(['old']), NOW)).toBe(false);
    expect(verifyHmac(hmac, 'cus_2', keys(['new']), NOW)).toBe(false);
    expect(verifyHmac(hmac, 'cus_1', [], NOW)).toBe(false);
    expect(verifyHmac(` ${hmac.slice(1)}`, 'cus_1', keys(['new']), NOW)).toBe(false);
    // Mixed case is hex too; anything else in any position, or another length, is not.
    const mixed = [...hmac].map((c, i) => (i % 2 ? c.toUpperCase() : c)).join('');
    expect(verifyHmac(mixed, 'cus_1', keys(['new']), NOW)).toBe(true);
    for (const bad of ['g', 'G', ':', '/', '@', '`', '\u0161', '\u0041\u0300']) {
      for (const at of [0, 31, 63])
        expect(
          verifyHmac(hmac.slice(0, at) + bad + hmac.slice(at + 1), 'cus_1', keys(['new']), NOW),
          `${bad} at ${at}`,
        ).toBe(false);
    }
    expect(verifyHmac(hmac.slice(0, 63), 'cus_1', keys(['new']), NOW)).toBe(false);
    expect(verifyHmac(`${hmac}0`, 'cus_1', keys(['new']), NOW)).toBe(false);
  });

  it('signs as HMAC-SHA256 does, for secrets shorter and longer than a block and messages of every length', () => {
    const secrets = ['', 'k', 'x'.repeat(63), 'y'.repeat(64), 'z'.repeat(65), 'sécret-ünïcode', 'a'.repeat(300)];
    // Every length around one block (55 bytes fit with the padding, 56 do not), and beyond.
    const around = Array.from({ length: 72 }, (_, n) => `cus_${'q'.repeat(n)}`.slice(0, n));
    const messages = [
      '',
      'cus_1',
      `cus_${'A'.repeat(251)}`,
      'ümlaut',
      `${'u'.repeat(50)}é`,
      'm'.repeat(400),
      'n'.repeat(2000),
      ...around,
    ];
    for (const secret of secrets) {
      const key = new HmacKey(secret);
      for (const message of messages)
        expect(key.sign(message).equals(hmacDigest(secret, message)), `${secret.length}/${message.length}`).toBe(true);
    }
  });
});

describe('body and CORS', () => {
  it('builds the bodies of the contract', () => {
    expect(lookupBody(tenant(), null).toString()).toBe('{"status":"active"}');
    expect(JSON.parse(lookupBody(tenant(), 'warning').toString()).card_update_url).toBe('https://acme.test/card');
    expect(JSON.parse(lookupBody(tenant(), 'lockout').toString()).card_update_url).toBeNull();
  });

  it('allows * unless the tenant restricts origins', () => {
    expect(allowedOrigin(null, 'https://a.test')).toBe('*');
    expect(allowedOrigin(tenant(), undefined)).toBe('*');
    const restricted = tenant({ allowedOrigins: ['https://a.test'] });
    expect(allowedOrigin(restricted, 'https://a.test')).toBe('https://a.test');
    expect(allowedOrigin(restricted, 'https://b.test')).toBeNull();
    expect(allowedOrigin(restricted, undefined)).toBeNull();
  });
});

describe('keys', () => {
  it('generates publishable keys and secrets of the contract shape, never twice the same', () => {
    const keys = new Set(Array.from({ length: 200 }, generatePublishableKey));
    expect(keys.size).toBe(200);
    for (const key of keys) expect(key).toMatch(PUBLISHABLE_KEY_RE);
    expect(Buffer.from(generateHmacSecret(), 'base64url')).toHaveLength(32);
    expect(randomBase62(1000)).toMatch(/^[A-Za-z0-9]{1000}$/);
  });

  it("prefixes a tenant's publishable keys with its mode: pk_live_, pk_test_, or pk_ for either", () => {
    expect(generatePublishableKey(true)).toMatch(/^pk_live_[A-Za-z0-9]{32}$/);
    expect(generatePublishableKey(false)).toMatch(/^pk_test_[A-Za-z0-9]{32}$/);
    expect(generatePublishableKey(null)).toMatch(/^pk_[A-Za-z0-9]{32}$/);
    for (const livemode of [true, false, null]) expect(generatePublishableKey(livemode)).toMatch(PUBLISHABLE_KEY_RE);
    expect(PUBLISHABLE_KEY_RE.test('pk_other_0123456789abcdefghijklmn')).toBe(false);
  });
});

describe('livemode', () => {
  it('a live or test tenant refuses events of the other mode; a tenant of either mode, and an event that does not say, match', () => {
    expect(isLivemodeMismatch(true, { livemode: false })).toBe(true);
    expect(isLivemodeMismatch(false, { livemode: true })).toBe(true);
    expect(isLivemodeMismatch(true, { livemode: true })).toBe(false);
    expect(isLivemodeMismatch(false, { livemode: false })).toBe(false);
    expect(isLivemodeMismatch(null, { livemode: true })).toBe(false);
    expect(isLivemodeMismatch(null, { livemode: false })).toBe(false);
    expect(isLivemodeMismatch(true, {})).toBe(false);
  });

  it('an event whose livemode is not a boolean is not a Stripe event', () => {
    const e = { id: 'evt_1', type: 'invoice.paid', created: 1_700_000_000, data: { object: {} } };
    expect(eventShapeProblem(e, 1_700_000_000_000)).toBeNull();
    expect(eventShapeProblem({ ...e, livemode: false }, 1_700_000_000_000)).toBeNull();
    expect(eventShapeProblem({ ...e, livemode: 'false' }, 1_700_000_000_000)).toBe('livemode: must be true or false');
    expect(eventShapeProblem({ ...e, livemode: null }, 1_700_000_000_000)).toBe('livemode: must be true or false');
  });
});

describe('input validation', () => {
  it('card update URLs must be https, absolute and without credentials', () => {
    expect(cardUpdateUrlProblem('https://a.test/x')).toBeNull();
    for (const bad of ['http://a.test', '/relative', 'https://u:p@a.test', 'data:text/html,x'])
      expect(cardUpdateUrlProblem(bad)).not.toBeNull();
  });
  it('origins must be exactly what a browser sends', () => {
    expect(originProblem('https://a.test')).toBeNull();
    expect(originProblem('http://localhost:5173')).toBeNull();
    for (const bad of ['https://a.test/', 'https://A.test', 'a.test', 'https://a.test:443'])
      expect(originProblem(bad)).not.toBeNull();
  });
});

describe('loadConfig', () => {
  it('has the documented defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 3000,
      host: '127.0.0.1',
      databaseUrl: null,
      adminToken: null,
      logLevel: 'info',
      rotationOverlapS: 86_400,
      demo: true,
    });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it('bounds how stale a lookup may answer while the store is unreachable: 5 minutes, at most an hour', () => {
    expect(loadConfig({}).staleIfErrorMs).toBe(300_000);
    expect(loadConfig({ DUNWALL_STALE_IF_ERROR_MS: '0' }).staleIfErrorMs).toBe(0);
    expect(() => loadConfig({ DUNWALL_STALE_IF_ERROR_MS: '3600001' })).toThrow(
      'DUNWALL_STALE_IF_ERROR_MS must be an integer from 0 to 3600000',
    );
  });

  it('reports every bad value at once', () => {
    try {
      loadConfig({
        PORT: '70000',
        DUNWALL_ADMIN_TOKEN: 'short',
        DUNWALL_DEMO: 'yes',
        DUNWALL_ROTATION_OVERLAP_S: '-1',
      });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).problems).toHaveLength(4);
    }
  });
});
