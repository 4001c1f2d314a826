import { describe, expect, it } from 'vitest';
import {
  clearedSessionCookie,
  csrfMatches,
  csrfTokenOf,
  isLoopbackAddress,
  isSessionId,
  newSessionId,
  readCookie,
  resolveSession,
  sessionCookie,
  sessionDigest,
} from '../../src/console/session.js';
import type { ConsoleSessionRecord } from '../../src/store/index.js';
import type { TenantAuth } from '../../src/domain/types.js';

describe('console session values', () => {
  it('draws 256-bit ids, never the same twice, and finds them by digest only', () => {
    const ids = new Set(Array.from({ length: 1000 }, newSessionId));
    expect(ids.size).toBe(1000);
    for (const id of ids) expect(isSessionId(id)).toBe(true);
    const [one] = ids;
    expect(sessionDigest(one as string)).toHaveLength(32);
    expect(isSessionId('short')).toBe(false);
    expect(isSessionId(`${'a'.repeat(42)}=`)).toBe(false);
  });

  it("ties the CSRF token to its session: another session's token, a prefix or a list never match", () => {
    const a = newSessionId();
    const b = newSessionId();
    expect(csrfMatches(a, csrfTokenOf(a))).toBe(true);
    expect(csrfMatches(a, csrfTokenOf(b))).toBe(false);
    expect(csrfMatches(a, csrfTokenOf(a).slice(0, -1))).toBe(false);
    expect(csrfMatches(a, [csrfTokenOf(a), csrfTokenOf(a)])).toBe(false);
    expect(csrfMatches(a, undefined)).toBe(false);
    expect(csrfMatches(a, '')).toBe(false);
  });

  it('reads one cookie among others, and refuses one given twice', () => {
    expect(readCookie('a=1; dunwall_session=xyz; b=2', 'dunwall_session')).toBe('xyz');
    expect(readCookie(['a=1', 'dunwall_session=xyz'], 'dunwall_session')).toBe('xyz');
    expect(readCookie('dunwall_session=1; dunwall_session=2', 'dunwall_session')).toBeNull();
    expect(readCookie('xdunwall_session=1', 'dunwall_session')).toBeNull();
    expect(readCookie(undefined, 'dunwall_session')).toBeNull();
  });

  it('writes an HttpOnly, SameSite=Strict cookie for the whole site, Secure when asked', () => {
    expect(sessionCookie('abc', 3_600_000, true)).toBe(
      'dunwall_session=abc; Path=/; Max-Age=3600; HttpOnly; SameSite=Strict; Secure',
    );
    expect(sessionCookie('abc', 3_600_000, false)).not.toContain('Secure');
    expect(clearedSessionCookie(true)).toBe('dunwall_session=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict; Secure');
  });

  it('knows loopback socket addresses, and only those', () => {
    for (const address of ['127.0.0.1', '127.1.2.3', '::1', '::ffff:127.0.0.1'])
      expect(isLoopbackAddress(address), address).toBe(true);
    for (const address of ['localhost', '10.0.0.1', '::2', '::ffff:10.0.0.1', '127.0.0.1.nip.io', '', undefined])
      expect(isLoopbackAddress(address), String(address)).toBe(false);
  });
});

describe('resolveSession', () => {
  const now = Date.parse('2026-03-01T00:00:00Z');
  const row = (r: Partial<ConsoleSessionRecord>): ConsoleSessionRecord => ({
    tenantId: 7,
    secretKeyId: 'key_1',
    createdAt: new Date(now),
    expiresAt: new Date(now + 1000),
    ...r,
  });
  const tenant = (keys: { id: string; expiresAtMs: number | null }[]) =>
    ({
      id: 7,
      slug: 'acme',
      secretKeys: keys.map((k) => ({ ...k, digest: Buffer.alloc(32), scopes: new Set(['subscribers:read']) })),
    }) as unknown as TenantAuth;
  const store = (r: ConsoleSessionRecord | null) => ({ findConsoleSession: async () => r });
  const model = (t: TenantAuth | null) => ({ tenantById: (id: number) => (t?.id === id ? t : null) });
  const id = newSessionId();

  it("gives a tenant session its key's scopes as the read model holds them", async () => {
    const p = await resolveSession(store(row({})), model(tenant([{ id: 'key_1', expiresAtMs: null }])), id, now);
    expect(p).toMatchObject({ kind: 'key', tenant: { id: 7, slug: 'acme' }, keyId: 'key_1' });
    expect(p?.kind === 'key' && [...p.scopes]).toEqual(['subscribers:read']);
  });

  it('has no session for a revoked or expired key, a gone tenant, or a malformed id', async () => {
    expect(
      await resolveSession(store(row({})), model(tenant([{ id: 'key_2', expiresAtMs: null }])), id, now),
    ).toBeNull();
    expect(
      await resolveSession(store(row({})), model(tenant([{ id: 'key_1', expiresAtMs: now }])), id, now),
    ).toBeNull();
    expect(await resolveSession(store(row({})), model(null), id, now)).toBeNull();
    expect(
      await resolveSession(store(row({})), model(tenant([{ id: 'key_1', expiresAtMs: null }])), 'not an id', now),
    ).toBeNull();
    expect(await resolveSession(store(null), model(tenant([{ id: 'key_1', expiresAtMs: null }])), id, now)).toBeNull();
  });

  it("keeps a session through its key's rotation: the replaced digest's end does not end it", async () => {
    const rotated = tenant([
      { id: 'key_1', expiresAtMs: now - 1 },
      { id: 'key_1', expiresAtMs: null },
    ]);
    expect(await resolveSession(store(row({})), model(rotated), id, now)).not.toBeNull();
  });

  it("gives the operator's session the operator", async () => {
    expect(await resolveSession(store(row({ tenantId: null, secretKeyId: null })), model(null), id, now)).toMatchObject(
      { kind: 'operator' },
    );
  });
});
