/**
 * The Dunwall client: asks a subscriber's billing enforcement status, for browsers, React
 * Native and Node. No dependencies, `fetch` only. Fail-open by design: a timeout, a network
 * error or any non-2xx answer resolves to `{status: "active", source: "fallback", error}`;
 * it never throws and logs nothing unless `debug` is set.
 */

import type {
  Entitlements as EntitlementFlags,
  KnownLookupAnswer,
  PreviewStatus,
  Status,
  UnknownLookupAnswer,
} from './wire.js';

export type { PreviewStatus } from './wire.js';
export { STATUSES } from './wire.js';

/** A subscriber's status: active, warning or lockout. */
export type SubscriberStatus = Status;

/** The tier's capability flags; the service always sends these three (docs/api.md). */
export type Entitlements = EntitlementFlags & {
  powered_by_watermark: boolean;
  custom_domain: boolean;
  downstream_webhooks: boolean;
};

/**
 * The lookup's 200 body for a subscriber the service knows. `lockout_at`: while `warning`
 * and a lockout is scheduled, when it becomes `lockout` (RFC 3339, UTC, seconds). `pay_url`:
 * Stripe's hosted page of the overdue invoice (https), only to a lookup with a valid `hmac`.
 */
export type KnownSubscriberBody = Omit<KnownLookupAnswer, 'entitlements'> & { entitlements: Entitlements };

/** The lookup's 200 body for a subscriber it does not know. */
export type UnknownSubscriberBody = UnknownLookupAnswer;

export type DunwallErrorKind = 'timeout' | 'network' | 'http' | 'invalid_response';

export interface DunwallError {
  kind: DunwallErrorKind;
  /** The HTTP status, for `http`. */
  status?: number;
  /** The problem's machine code (`hmac_mismatch`...), when the service sent one. */
  code?: string;
  message: string;
}

export type StatusResult =
  | ((KnownSubscriberBody | UnknownSubscriberBody) & { source: 'service' | 'cache' })
  | { status: 'active'; source: 'fallback'; error: DunwallError };

export interface StatusRequest {
  /** The Dunwall service, e.g. `https://dunwall.example.com` (a path prefix is kept). */
  baseUrl: string;
  tenant: string;
  publishableKey: string;
  customerId: string;
  /** Hex HMAC-SHA256 of the customer id, computed by the tenant's backend. */
  hmac?: string | null;
  /** Default 3000. */
  timeoutMs?: number;
  /**
   * A test tenant only: answer as if the customer were in `warning` or `lockout`, to see the
   * banner or the gate. Other values are not sent; a live tenant ignores it.
   */
  preview?: PreviewStatus | null;
}

export interface ClientOptions {
  /** How long an answer is reused; 0 turns the cache off. Default 60000. */
  cacheTtlMs?: number;
  /** At most this many answers are kept. Default 100. */
  cacheMaxEntries?: number;
  /** Default: the global fetch. */
  fetch?: typeof fetch;
  /** Default: Date.now. */
  now?: () => number;
  /** Log failures to the console (development only). Default false. */
  debug?: boolean;
}

export const DEFAULT_TIMEOUT_MS = 3_000;
export const DEFAULT_CACHE_TTL_MS = 60_000;
export const DEFAULT_CACHE_MAX_ENTRIES = 100;

export interface DunwallClient {
  getSubscriberStatus(request: StatusRequest): Promise<StatusResult>;
  /** Forgets every cached answer (after a payment, on logout). */
  clearCache(): void;
}

function fallback(error: DunwallError): StatusResult {
  return { status: 'active', source: 'fallback', error };
}

function lookupUrl(r: StatusRequest): string {
  const base = r.baseUrl.replace(/\/+$/, '');
  // `preview` is typed as the server's preview statuses: a value they lose fails the typecheck here.
  const preview = r.preview === 'warning' || r.preview === 'lockout' ? `&preview=${r.preview}` : '';
  const query = `processor_customer_id=${encodeURIComponent(r.customerId)}${r.hmac ? `&hmac=${encodeURIComponent(r.hmac)}` : ''}${preview}`;
  return `${base}/api/subscriber-status/${encodeURIComponent(r.tenant)}?${query}`;
}

function isBody(value: unknown): value is KnownSubscriberBody | UnknownSubscriberBody {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  // Written out rather than a list (the snippet's size budget), each held to the server's statuses by its type.
  const status = v.status;
  if (
    status !== ('active' satisfies Status) &&
    status !== ('warning' satisfies Status) &&
    status !== ('lockout' satisfies Status)
  )
    return false;
  if (!('entitlements' in v)) return status === 'active';
  const optionalString = (x: unknown) => x === undefined || typeof x === 'string';
  return (
    typeof v.entitlements === 'object' &&
    v.entitlements !== null &&
    (v.card_update_url === null || typeof v.card_update_url === 'string') &&
    optionalString(v.lockout_at) &&
    optionalString(v.pay_url)
  );
}

/**
 * One lookup, without the cache or the sharing of `createClient` (for callers that keep
 * their own state, as the React bindings do). Never rejects.
 */
export async function askStatus(request: StatusRequest, fetchImpl: typeof fetch): Promise<StatusResult> {
  const timeoutMs = request.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const controller = typeof AbortController === 'function' ? new AbortController() : null;
  let timer: ReturnType<typeof setTimeout> | undefined;
  // The whole exchange, headers and body, within the time, even from a fetch that ignores the signal.
  const timeout = new Promise<null>((resolve) => {
    timer = setTimeout(() => {
      // Settled before the abort: the abort's rejection of the exchange must not win the race.
      resolve(null);
      controller?.abort();
    }, timeoutMs);
  });
  try {
    const exchange = async () => {
      const res = await fetchImpl(lookupUrl(request), {
        method: 'GET',
        headers: { Authorization: `Bearer ${request.publishableKey}` },
        credentials: 'omit',
        ...(controller ? { signal: controller.signal } : {}),
      });
      return [res, await res.text()] as const;
    };
    const answered = await Promise.race([exchange(), timeout]);
    if (!answered) return fallback({ kind: 'timeout', message: `no answer within ${timeoutMs} ms` });
    const [response, text] = answered;
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    if (!response.ok) {
      const code =
        typeof body === 'object' && body !== null && typeof (body as { code?: unknown }).code === 'string'
          ? (body as { code: string }).code
          : undefined;
      return fallback({
        kind: 'http',
        status: response.status,
        ...(code ? { code } : {}),
        message: `HTTP ${response.status}${code ? ` ${code}` : ''}`,
      });
    }
    if (!isBody(body)) return fallback({ kind: 'invalid_response', message: 'the answer is not a subscriber status' });
    return { ...body, source: 'service' };
  } catch (err) {
    return fallback({ kind: 'network', message: err instanceof Error ? err.message : String(err) });
  } finally {
    clearTimeout(timer);
  }
}

/** A client with its own cache; most apps need one, made once. */
export function createClient(options: ClientOptions = {}): DunwallClient {
  const ttlMs = options.cacheTtlMs ?? DEFAULT_CACHE_TTL_MS;
  const maxEntries = options.cacheMaxEntries ?? DEFAULT_CACHE_MAX_ENTRIES;
  const now = options.now ?? Date.now;
  const cache = new Map<string, { result: StatusResult; expiresAt: number }>();
  const inFlight = new Map<string, Promise<StatusResult>>();

  const lookup = (request: StatusRequest): Promise<StatusResult> => {
    const fetchImpl = options.fetch ?? (typeof fetch === 'function' ? fetch : undefined);
    if (!fetchImpl) return Promise.resolve(fallback({ kind: 'network', message: 'fetch is not available' }));
    const key = [
      request.baseUrl,
      request.tenant,
      request.publishableKey,
      request.customerId,
      request.hmac ?? '',
      request.preview ?? '',
    ].join('\n');
    const cached = cache.get(key);
    if (cached && cached.expiresAt > now())
      return Promise.resolve({ ...cached.result, source: 'cache' } as StatusResult);
    cache.delete(key);
    const pending = inFlight.get(key);
    if (pending) return pending;

    const promise = askStatus(request, fetchImpl).then((result) => {
      inFlight.delete(key);
      // Frozen: every caller shares this answer, none may change it for the others.
      if ('entitlements' in result) Object.freeze(result.entitlements);
      Object.freeze(result);
      // Only answers are cached: after a failure, the next call asks again.
      if (result.source === 'service' && ttlMs > 0 && maxEntries > 0) {
        if (cache.size >= maxEntries) {
          const oldest = cache.keys().next();
          if (!oldest.done) cache.delete(oldest.value);
        }
        cache.set(key, { result, expiresAt: now() + ttlMs });
      }
      if (result.source === 'fallback' && options.debug && typeof console !== 'undefined') {
        console.warn(`[dunwall] failing open: ${result.error.message}`);
      }
      return result;
    });
    inFlight.set(key, promise);
    return promise;
  };

  return {
    getSubscriberStatus(request) {
      try {
        return lookup(request);
      } catch (err) {
        // A malformed request (missing fields) still fails open rather than throwing.
        return Promise.resolve(
          fallback({ kind: 'invalid_response', message: err instanceof Error ? err.message : String(err) }),
        );
      }
    },
    clearCache() {
      cache.clear();
    },
  };
}

const shared = /* @__PURE__ */ createClient();

/** One lookup through a shared client (cache and de-duplication included). */
export function getSubscriberStatus(request: StatusRequest): Promise<StatusResult> {
  return shared.getSubscriberStatus(request);
}
