/**
 * Stands in for an application's own sign-in in the examples of docs/servers.md (which does
 * not show this file): `signedInCustomer(cookieHeader)` gives the Stripe customer id of the
 * account signed in, or null. Here a session is a random token in a `session` cookie, kept
 * in memory; the tests open sessions with `openSession`, or, for an app started as a process
 * of its own, give them in `EXAMPLE_SESSIONS` (`{"<token>":"cus_..."}`).
 */
import { randomBytes } from 'node:crypto';

const sessions = new Map<string, string>();
for (const [token, customerId] of Object.entries(
  JSON.parse(process.env.EXAMPLE_SESSIONS ?? '{}') as Record<string, unknown>,
)) {
  if (typeof customerId === 'string') sessions.set(token, customerId);
}

export function openSession(customerId: string): string {
  const token = randomBytes(24).toString('base64url');
  sessions.set(token, customerId);
  return `session=${token}`;
}

export function signedInCustomer(cookieHeader: string | null | undefined): string | null {
  const token = /(?:^|;\s*)session=([A-Za-z0-9_-]+)/.exec(cookieHeader ?? '')?.[1];
  return token === undefined ? null : (sessions.get(token) ?? null);
}
