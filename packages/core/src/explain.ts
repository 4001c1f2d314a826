/**
 * Why an app shows no billing status: a misconfiguration looks, to the customer, exactly like
 * a paying customer (fail open), so it is said in the console, once per problem and page, with
 * its code. Never the key, the hmac or the customer id: the tenant's slug and the page's origin
 * only. `reachable` is the snippet's too.
 */
import type { DunwallError } from '../../client/src/index.js';

/** What has been said: each problem once per page. */
const said = new Set<string>();
/** Whether the service answers this page at all (asked once, after a network error). */
let answers: Promise<boolean> | undefined;

/** Whether `url` answers at all, CORS aside (an opaque request); false after 3 s. */
export async function reachable(url: string): Promise<boolean> {
  try {
    await fetch(url, { method: 'HEAD', mode: 'no-cors', cache: 'no-store', signal: AbortSignal.timeout(3_000) });
    return true;
  } catch {
    return false;
  }
}

/** Says `code` once per page, with why. */
export function say(code: string, tenant: string, fallback = ''): void {
  if (said.has(code)) return;
  said.add(code);
  const t = `tenant "${tenant}"`;
  // React Native and server rendering have no `location`.
  const origin = typeof location === 'undefined' ? "this app's origin" : location.origin;
  const why: Record<string, string> = {
    invalid_publishable_key: `not a publishable key of ${t}`,
    secret_key_in_browser: 'a secret key is public in an app: rotate it, and use a pk_ key',
    tenant_not_found: `no ${t}`,
    hmac_mismatch: 'the hmac does not match the customer',
    hmac_required: `${t} requires the hmac`,
    origin_not_allowed: `is ${origin} in the allowed_origins of ${t}?`,
  };
  console.warn(`[dunwall] ${code}: ${why[code] ?? fallback}; failing open`);
}

/**
 * Says why a question failed. A browser hides why a cross-origin call failed: the service
 * reached without CORS (`probe`, the web's) means it answered, but not to this origin.
 */
export async function explain(e: DunwallError, tenant: string, probe?: () => Promise<boolean>): Promise<void> {
  try {
    let code = e.code ?? e.kind;
    if (code === 'network' && probe && (await (answers ??= probe()))) code = 'origin_not_allowed';
    say(code, tenant, e.message);
  } catch {
    // Saying why is a courtesy: it never fails the app.
  }
}
