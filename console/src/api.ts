/**
 * The console's one way to the service: the session it signed in with, and the tenant API
 * (/v1) or the operator's (/admin/v1/tenants/:slug) with the session cookie standing in for
 * the credential. Every write carries the session's CSRF token; a refused session sends the
 * page back to the sign-in.
 */

import type { ProblemCode, Scope } from '@dunwall/wire';

/** A tenant's data space: live, or test (docs/test-mode.md). */
export type Mode = 'live' | 'test';

/** The console's session (`/console/api/session`, a route of the console only). */
export interface Session {
  kind: 'operator' | 'tenant';
  /** A key's session: its tenant, and its key's mode (the only one it addresses). */
  tenant: { slug: string; mode: Mode } | null;
  scopes: Scope[];
  csrf_token: string;
  expires_at: string;
}

/** A problem answer (RFC 9457) as an error: its code and its words. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    /** The problem's code; `network` when the service was not reached, `error` when it sent no problem. */
    readonly code: ProblemCode | 'network' | 'error',
    readonly detail: string,
  ) {
    super(detail);
    this.name = 'ApiError';
  }
}

/** Ten seconds: a console call that takes longer says so rather than spin. */
const TIMEOUT_MS = 10_000;

let csrf = '';
let onSignedOut: () => void = () => {};
let mode: Mode = 'live';

export function useSession(session: Session | null, signedOut: () => void): void {
  csrf = session?.csrf_token ?? '';
  onSignedOut = signedOut;
}

/** The mode the pages show: every call of the operator's to a tenant's resources carries it. */
export function useMode(next: Mode): void {
  mode = next;
}

/** A tenant's resources under the operator's API (not the tenant itself, nor the list of tenants). */
const OPERATOR_TENANT_RESOURCE = /^\/admin\/v1\/tenants\/[^/?]+\//;

/**
 * The path as sent: the operator's calls to a tenant's resources say the test mode
 * (`mode=test`); live is the API's default. A key's session (/v1) addresses its key's mode,
 * whatever is asked.
 */
function inMode(path: string): string {
  if (mode === 'live' || !OPERATOR_TENANT_RESOURCE.test(path)) return path;
  return `${path}${path.includes('?') ? '&' : '?'}mode=test`;
}

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrf) headers['x-csrf-token'] = csrf;
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), TIMEOUT_MS);
  let res: Response;
  try {
    res = await fetch(inMode(path), {
      method,
      headers,
      credentials: 'same-origin',
      signal: controller.signal,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  } catch {
    throw new ApiError(
      0,
      'network',
      controller.signal.aborted ? 'The service took too long to answer.' : 'The service could not be reached.',
    );
  } finally {
    clearTimeout(timer);
  }
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  if (!res.ok) {
    const p = (parsed ?? {}) as { code?: ProblemCode; detail?: string };
    const error = new ApiError(res.status, p.code ?? 'error', p.detail ?? `The service answered ${res.status}.`);
    // Any 401 of the API means the session is gone (ended, signed out elsewhere, its key revoked).
    if (res.status === 401 && !path.endsWith('/console/api/session')) onSignedOut();
    throw error;
  }
  return parsed as T;
}

export const api = {
  get: <T>(path: string) => call<T>('GET', path),
  post: <T>(path: string, body?: unknown) => call<T>('POST', path, body ?? {}),
  put: <T>(path: string, body: unknown) => call<T>('PUT', path, body),
  patch: <T>(path: string, body: unknown) => call<T>('PATCH', path, body),
  del: <T = void>(path: string) => call<T>('DELETE', path),
};

export const signIn = (credential: string) => call<Session>('POST', '/console/api/session', { credential });
export const currentSession = () => call<Session>('GET', '/console/api/session');
export const signOut = () => call<void>('DELETE', '/console/api/session');

/** Where a tenant's resources are: its own API, or the operator's path to the tenant. */
export function tenantBase(session: Session, slug: string): string {
  return session.kind === 'tenant' ? '/v1' : `/admin/v1/tenants/${encodeURIComponent(slug)}`;
}

export function holds(session: Session, scope: Scope): boolean {
  return session.scopes.includes(scope);
}

/** A query string of the defined values. */
export function qs(params: Record<string, string | number | undefined | null>): string {
  const parts = Object.entries(params)
    .filter(([, v]) => v !== undefined && v !== null && v !== '')
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(String(v))}`);
  return parts.length ? `?${parts.join('&')}` : '';
}
