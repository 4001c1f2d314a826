import type { Static } from 'typebox';
import type { Mode } from '../domain/types.js';
import type {
  CreateKeyBody,
  CreateTenantBody,
  ReplayAnswer,
  RotatedTenant,
  SecretKeyList,
  SecretKeyWithSecret,
  StripeApiKeyState,
  Subscriber,
  SubscriberPage,
  Tenant,
  TenantDetail,
  TenantList,
  TenantWithKeys,
  Tier,
  TierList,
  UpdateTenantBody,
  CreateWebhookEndpointBody,
  UpdateWebhookEndpointBody,
  WebhookAttemptList,
  WebhookEndpoint,
  WebhookEndpointList,
  WebhookEndpointWithSecret,
  WebhookMessageList,
  WebhookReplayAnswer,
} from '../http/schemas.js';
import { ApiError, NetworkError, oneLine, retryAfterSeconds } from './errors.js';

export type TenantView = Static<typeof Tenant>;
export type TenantWithKeysView = Static<typeof TenantWithKeys>;
export type RotatedTenantView = Static<typeof RotatedTenant>;
export type TenantListView = Static<typeof TenantList>;
export type TenantDetailView = Static<typeof TenantDetail>;
export type StripeApiKeyStateView = Static<typeof StripeApiKeyState>;
export type SubscriberPageView = Static<typeof SubscriberPage>;
export interface SubscriberFilter {
  /** One status or several, comma-separated (`warning,lockout`). */
  status?: string;
  /** The same, by the status before the tenant's policy. */
  derivedStatus?: string;
  reason?: string;
  updatedSince?: string;
  limit?: number;
  cursor?: string;
}
export type SubscriberView = Static<typeof Subscriber>;
export type TierView = Static<typeof Tier>;
export type TierListView = Static<typeof TierList>;
export type SubscriberStatus = NonNullable<SubscriberView['status']>;
export type ReplayAnswerView = Static<typeof ReplayAnswer>;
export type RotateKey = 'publishable' | 'hmac';
export type EndpointView = Static<typeof WebhookEndpoint>;
export type EndpointWithSecretView = Static<typeof WebhookEndpointWithSecret>;
export type EndpointListView = Static<typeof WebhookEndpointList>;
export type AttemptListView = Static<typeof WebhookAttemptList>;
export type MessageListView = Static<typeof WebhookMessageList>;
export type DownstreamReplayView = Static<typeof WebhookReplayAnswer>;
export type CreateKeyInput = Static<typeof CreateKeyBody>;
export type SecretKeyListView = Static<typeof SecretKeyList>;
export type SecretKeyView = SecretKeyListView['data'][number];
export type SecretKeyWithSecretView = Static<typeof SecretKeyWithSecret>;

export const DEFAULT_TIMEOUT_MS = 10_000;

export interface AdminClientOptions {
  /** e.g. `http://127.0.0.1:3000`, without a trailing slash. */
  baseUrl: string;
  token: string;
  fetch: typeof fetch;
  timeoutMs?: number;
  /** The tenant's mode its requests address (`--test`); default live. */
  mode?: Mode;
}

/** A path of one tenant's resources (`/tenants/SLUG...`), which `?mode=test` addresses; not the tenant's deletion. */
const TENANT_PATH_RE = /^\/tenants\/[^/?]+/;

/** The path with `mode=test` added to its query, for a request of a tenant's resources in test mode. */
export function inMode(method: string, path: string, mode: Mode): string {
  if (mode === 'live' || !TENANT_PATH_RE.test(path)) return path;
  if (method === 'DELETE' && /^\/tenants\/[^/?]+$/.test(path)) return path;
  return `${path}${path.includes('?') ? '&' : '?'}mode=test`;
}

const NETWORK_REASONS: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'name resolution failed',
  ETIMEDOUT: 'connection timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  UND_ERR_SOCKET: 'connection closed',
};

/** The URL without any user:password part, for messages. */
export function displayUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.toString().replace(/\/$/, '');
  } catch {
    return url;
  }
}

/** Why a request got no answer, in a few words (a refused connection, a timeout). */
export function networkReason(err: unknown, timeoutMs: number): string {
  if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) {
    return `no answer within ${timeoutMs / 1000} s`;
  }
  const cause = (err as { cause?: unknown } | null)?.cause as
    { code?: unknown; message?: unknown; errors?: { code?: unknown }[] } | undefined;
  const code = cause?.code ?? cause?.errors?.[0]?.code;
  if (typeof code === 'string' && NETWORK_REASONS[code]) return NETWORK_REASONS[code];
  if (typeof cause?.message === 'string' && cause.message !== '') return cause.message;
  return err instanceof Error ? err.message : String(err);
}

/** A small typed client of the admin API (docs/api.md, the admin API). Every method throws ApiError or NetworkError. */
export class AdminClient {
  readonly baseUrl: string;
  readonly #token: string;
  readonly #fetch: typeof fetch;
  readonly #timeoutMs: number;
  readonly #mode: Mode;

  constructor(options: AdminClientOptions) {
    this.#mode = options.mode ?? 'live';
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.#token = options.token;
    this.#fetch = options.fetch;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  createTenant(body: Static<typeof CreateTenantBody>): Promise<TenantWithKeysView> {
    return this.#json('POST', '/tenants', body);
  }

  listTenants(): Promise<TenantListView> {
    return this.#json('GET', '/tenants');
  }

  getTenant(slug: string): Promise<TenantDetailView> {
    return this.#json('GET', `/tenants/${enc(slug)}`);
  }

  async deleteTenant(slug: string): Promise<void> {
    await this.request('DELETE', `/tenants/${enc(slug)}`);
  }

  listSubscribers(slug: string, filter: SubscriberFilter = {}): Promise<SubscriberPageView> {
    const q = new URLSearchParams();
    if (filter.status !== undefined) q.set('status', filter.status);
    if (filter.derivedStatus !== undefined) q.set('derived_status', filter.derivedStatus);
    if (filter.reason !== undefined) q.set('reason', filter.reason);
    if (filter.updatedSince !== undefined) q.set('updated_since', filter.updatedSince);
    if (filter.limit !== undefined) q.set('limit', String(filter.limit));
    if (filter.cursor !== undefined) q.set('cursor', filter.cursor);
    const query = q.toString();
    return this.#json('GET', `/tenants/${enc(slug)}/subscribers${query === '' ? '' : `?${query}`}`);
  }

  updateTenant(slug: string, body: Static<typeof UpdateTenantBody>): Promise<TenantView> {
    return this.#json('PATCH', `/tenants/${enc(slug)}`, body);
  }

  /** Sets the Stripe API key of the client's mode of the tenant: Stripe checks it first. */
  setStripeApiKey(slug: string, key: string): Promise<StripeApiKeyStateView> {
    return this.#json('PUT', `/tenants/${enc(slug)}/stripe-api-key`, { key });
  }

  deleteStripeApiKey(slug: string): Promise<StripeApiKeyStateView> {
    return this.#json('DELETE', `/tenants/${enc(slug)}/stripe-api-key`);
  }

  rotate(slug: string, key: RotateKey): Promise<RotatedTenantView> {
    return this.#json('POST', `/tenants/${enc(slug)}/rotate`, { key });
  }

  putSubscriber(slug: string, customerId: string, status: SubscriberStatus, reason?: string): Promise<SubscriberView> {
    return this.#json('PUT', subscriberPath(slug, customerId), { status, ...(reason !== undefined ? { reason } : {}) });
  }

  getSubscriber(slug: string, customerId: string): Promise<SubscriberView> {
    return this.#json('GET', subscriberPath(slug, customerId));
  }

  async deleteSubscriber(slug: string, customerId: string): Promise<void> {
    await this.request('DELETE', subscriberPath(slug, customerId));
  }

  /** Ends an override: the status is again what the Stripe episodes and the policy give. */
  async clearOverride(slug: string, customerId: string): Promise<void> {
    await this.request('DELETE', `${subscriberPath(slug, customerId)}/override`);
  }

  /** The answer holds `secret_key`: the only time it is shown. */
  createSecretKey(slug: string, body: CreateKeyInput): Promise<SecretKeyWithSecretView> {
    return this.#json('POST', keyPath(slug), body);
  }

  listSecretKeys(slug: string): Promise<SecretKeyListView> {
    return this.#json('GET', keyPath(slug));
  }

  async revokeSecretKey(slug: string, id: string): Promise<void> {
    await this.request('DELETE', keyPath(slug, id));
  }

  /** A new secret; the replaced one keeps working for the overlap (the service's default when not given). */
  rotateSecretKey(slug: string, id: string, overlapSeconds?: number): Promise<SecretKeyWithSecretView> {
    return this.#json(
      'POST',
      `${keyPath(slug, id)}/rotate`,
      overlapSeconds === undefined ? {} : { overlap_seconds: overlapSeconds },
    );
  }

  listTiers(): Promise<TierListView> {
    return this.#json('GET', '/tiers');
  }

  putTier(name: string, entitlements: Record<string, boolean>): Promise<TierView> {
    return this.#json('PUT', `/tiers/${enc(name)}`, { entitlements });
  }

  async deleteTier(name: string): Promise<void> {
    await this.request('DELETE', `/tiers/${enc(name)}`);
  }

  /** `dryRun`: applied in a transaction that is rolled back; the answer says what would change. */
  replayStripeEvents(slug: string, events: unknown[], options: { dryRun?: boolean } = {}): Promise<ReplayAnswerView> {
    return this.#json('POST', `/tenants/${enc(slug)}/stripe-events`, {
      events,
      ...(options.dryRun === true ? { dry_run: true } : {}),
    });
  }

  createEndpoint(slug: string, body: Static<typeof CreateWebhookEndpointBody>): Promise<EndpointWithSecretView> {
    return this.#json('POST', endpointPath(slug), body);
  }

  listEndpoints(slug: string): Promise<EndpointListView> {
    return this.#json('GET', endpointPath(slug));
  }

  getEndpoint(slug: string, id: string): Promise<EndpointView> {
    return this.#json('GET', endpointPath(slug, id));
  }

  updateEndpoint(slug: string, id: string, body: Static<typeof UpdateWebhookEndpointBody>): Promise<EndpointView> {
    return this.#json('PATCH', endpointPath(slug, id), body);
  }

  async deleteEndpoint(slug: string, id: string): Promise<void> {
    await this.request('DELETE', endpointPath(slug, id));
  }

  rotateEndpointSecret(slug: string, id: string, overlapSeconds?: number): Promise<EndpointWithSecretView> {
    return this.#json(
      'POST',
      `${endpointPath(slug, id)}/rotate-secret`,
      overlapSeconds === undefined ? {} : { overlap_seconds: overlapSeconds },
    );
  }

  listAttempts(slug: string, id: string, limit?: number): Promise<AttemptListView> {
    return this.#json('GET', `${endpointPath(slug, id)}/attempts${limit === undefined ? '' : `?limit=${limit}`}`);
  }

  listMessages(slug: string, id: string, filter: { state?: string; limit?: number } = {}): Promise<MessageListView> {
    const q = new URLSearchParams();
    if (filter.state !== undefined) q.set('state', filter.state);
    if (filter.limit !== undefined) q.set('limit', String(filter.limit));
    const query = q.toString();
    return this.#json('GET', `${endpointPath(slug, id)}/messages${query === '' ? '' : `?${query}`}`);
  }

  async retryMessage(slug: string, id: string, messageId: string): Promise<void> {
    await this.request('POST', `${endpointPath(slug, id)}/messages/${enc(messageId)}/retry`);
  }

  replayMessages(
    slug: string,
    id: string,
    range: { since: string; until: string; after?: string },
  ): Promise<DownstreamReplayView> {
    return this.#json('POST', `${endpointPath(slug, id)}/replay`, range);
  }

  async #json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const answer = await this.request(method, path, body);
    if (answer === null) throw new ApiError(0, 'unexpected_answer', `${method} ${path} answered with no body`);
    return answer as T;
  }

  /** One call to `/admin/v1${path}`: the parsed JSON answer, null for an empty one (204). */
  async request(method: string, path: string, body?: unknown): Promise<unknown> {
    const url = `${this.baseUrl}/admin/v1${inMode(method, path, this.#mode)}`;
    let response: Response;
    let text: string;
    try {
      response = await this.#fetch(url, {
        method,
        headers: {
          authorization: `Bearer ${this.#token}`,
          accept: 'application/json',
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      text = await response.text();
    } catch (err) {
      throw new NetworkError(
        `cannot reach ${displayUrl(this.baseUrl)} (${this.#redact(networkReason(err, this.#timeoutMs))})`,
      );
    }

    let parsed: unknown = null;
    let isJson = false;
    if (text !== '') {
      try {
        parsed = JSON.parse(text);
        isJson = true;
      } catch {
        isJson = false;
      }
    }
    if (!response.ok) {
      const problem = parsed as { code?: unknown; detail?: unknown } | null;
      // Refused for a while (this address's rate limit): how long, from Retry-After.
      const retryAfterS =
        response.status === 429 ? retryAfterSeconds(response.headers.get('retry-after'), Date.now()) : null;
      if (isJson && typeof problem?.code === 'string') {
        const detail = typeof problem.detail === 'string' ? problem.detail : response.statusText;
        throw new ApiError(response.status, oneLine(problem.code), oneLine(this.#redact(detail)), retryAfterS);
      }
      if (response.status === 429) throw new ApiError(429, 'rate_limited', response.statusText, retryAfterS);
      throw new ApiError(
        response.status,
        `http_${response.status}`,
        `${method} ${displayUrl(url)} answered ${response.status} ${response.statusText}`.trim(),
      );
    }
    if (text !== '' && !isJson) {
      throw new ApiError(
        response.status,
        'unexpected_answer',
        `${method} ${displayUrl(url)} did not answer with JSON; is DUNWALL_URL a Dunwall service?`,
      );
    }
    return parsed;
  }

  /** The admin token never reaches a message, whatever an error says. */
  #redact(text: string): string {
    return this.#token === '' ? text : text.split(this.#token).join('[redacted]');
  }
}

function enc(segment: string): string {
  return encodeURIComponent(segment);
}

function endpointPath(slug: string, id?: string): string {
  return `/tenants/${enc(slug)}/webhook-endpoints${id === undefined ? '' : `/${enc(id)}`}`;
}

function keyPath(slug: string, id?: string): string {
  return `/tenants/${enc(slug)}/keys${id === undefined ? '' : `/${enc(id)}`}`;
}

function subscriberPath(slug: string, customerId: string): string {
  return `/tenants/${enc(slug)}/subscribers/${enc(customerId)}`;
}
