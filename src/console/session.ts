import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { sha256 } from '../domain/keys.js';
import type { Scope } from '../domain/keys.js';
import type { Mode } from '../domain/types.js';
import type { ReadModel } from '../readmodel/index.js';
import type { ConsoleSessionStore } from '../store/index.js';

/**
 * The console's sessions (docs/console.md). Signing in trades a credential (a tenant's
 * secret key or the operator's admin token) for a random session id in an HttpOnly,
 * SameSite=Strict cookie: the browser never keeps the credential. Only the id's digest is
 * stored. Every write made with the cookie also carries the session's CSRF token in a
 * header, which a page of another site can neither read nor forge: it is an HMAC of the
 * session id, so it needs no storage of its own and dies with the session.
 */

export const SESSION_COOKIE = 'dunwall_session';
/** A write made with the session cookie names the session's CSRF token here. */
export const CSRF_HEADER = 'x-csrf-token';
/** Eight hours: a working day, after which the console asks for the credential again. */
export const DEFAULT_CONSOLE_SESSION_TTL_MS = 8 * 3_600_000;
const SESSION_ID_BYTES = 32;
const SESSION_ID_RE = /^[A-Za-z0-9_-]{43}$/;

export function newSessionId(): string {
  return randomBytes(SESSION_ID_BYTES).toString('base64url');
}

/** Whether a cookie's value is shaped like a session id (anything else is never looked up). */
export function isSessionId(value: string): boolean {
  return SESSION_ID_RE.test(value);
}

export function sessionDigest(id: string): Buffer {
  return sha256(id);
}

export function csrfTokenOf(sessionId: string): string {
  return createHmac('sha256', sessionId).update('dunwall console csrf v1').digest('base64url');
}

/** The presented token against the session's, in constant time. */
export function csrfMatches(sessionId: string, presented: string | string[] | undefined): boolean {
  if (typeof presented !== 'string') return false;
  const expected = Buffer.from(csrfTokenOf(sessionId));
  const given = Buffer.from(presented);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** One cookie's value from a Cookie header; null when absent or given twice (never guess which). */
export function readCookie(header: string | string[] | undefined, name: string): string | null {
  if (header === undefined) return null;
  let found: string | null = null;
  for (const line of Array.isArray(header) ? header : [header]) {
    for (const part of line.split(';')) {
      const eq = part.indexOf('=');
      if (eq < 0 || part.slice(0, eq).trim() !== name) continue;
      if (found !== null) return null;
      found = part.slice(eq + 1).trim();
    }
  }
  return found;
}

/** Secure everywhere but loopback, where a browser keeps a Secure cookie of plain http anyway on some and not on others. */
export function sessionCookie(id: string, maxAgeMs: number, secure: boolean): string {
  return `${SESSION_COOKIE}=${id}; Path=/; Max-Age=${Math.floor(maxAgeMs / 1000)}; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;
}

export function clearedSessionCookie(secure: boolean): string {
  return `${SESSION_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;
}

/**
 * A socket peer on this machine's loopback (127.0.0.0/8, ::1, or 127.x mapped into IPv6):
 * the only place the console signs in over plain http and its cookie goes without Secure.
 * The socket's address, never a header: a client names any Host it likes.
 */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (address === undefined) return false;
  const plain = address.startsWith('::ffff:') ? address.slice(7) : address;
  return plain === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(plain);
}

/** Who a live session acts for. */
export type SessionPrincipal =
  | { kind: 'operator'; expiresAt: Date }
  | {
      kind: 'key';
      tenant: { id: number; slug: string; tenantId: number; mode: Mode };
      keyId: string;
      scopes: ReadonlySet<Scope>;
      expiresAt: Date;
    };

/**
 * A session's principal as of now: its row (not ended, not signed out), and for a tenant's
 * session its key as the read model holds it, so that a revoked or expired key ends the
 * session on every instance with the change stream, and a key's scopes are always its own.
 */
export async function resolveSession(
  store: Pick<ConsoleSessionStore, 'findConsoleSession'>,
  model: Pick<ReadModel, 'tenantById'>,
  sessionId: string,
  nowMs: number,
): Promise<SessionPrincipal | null> {
  if (!isSessionId(sessionId)) return null;
  const row = await store.findConsoleSession(sessionDigest(sessionId), new Date(nowMs));
  if (row === null) return null;
  if (row.tenantId === null) return { kind: 'operator', expiresAt: row.expiresAt };
  const tenant = model.tenantById(row.tenantId);
  // A rotated key is listed once per digest in force: any of them, not expired, will do.
  const key = tenant?.secretKeys.find(
    (k) => k.id === row.secretKeyId && (k.expiresAtMs === null || k.expiresAtMs > nowMs),
  );
  if (tenant == null || key === undefined) return null;
  return {
    kind: 'key',
    tenant: { id: tenant.id, slug: tenant.slug, tenantId: tenant.tenantId, mode: tenant.mode },
    keyId: key.id,
    scopes: key.scopes,
    expiresAt: row.expiresAt,
  };
}
