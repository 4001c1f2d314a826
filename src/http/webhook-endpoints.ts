import { isIP } from 'node:net';
import { Type } from 'typebox';
import { AllowedNetworks, addressProblem, endpointUrlProblem, generateSigningSecret } from '../domain/webhooks.js';
import type { Store, TenantRecord, WebhookEndpointRecord } from '../store/store.js';
import type { App } from './app-instance.js';
import { AppError } from './problems.js';
import {
  AdminHeaders,
  CreateWebhookEndpointBody,
  MAX_REPLAY_MESSAGES,
  MAX_WEBHOOK_PAGE,
  ProblemRef,
  RotateWebhookSecretBody,
  TenantParams,
  UpdateWebhookEndpointBody,
  WebhookAttemptList,
  WebhookAttemptsQuery,
  WebhookEndpoint,
  WebhookEndpointList,
  WebhookEndpointParams,
  WebhookEndpointWithSecret,
  WebhookMessageList,
  WebhookMessageParams,
  WebhookMessagesQuery,
  WebhookReplayAnswer,
  WebhookReplayBody,
  WebhookRetryAnswer,
} from './schemas.js';

/**
 * The admin API of downstream webhooks (docs/webhooks.md), under /admin/v1 and its token:
 * a tenant's endpoints, their signing secrets, attempts and messages, retries and replays.
 */

export interface WebhookEndpointOptions {
  store: Store;
  now: () => Date;
  tenantOr404: (slug: string) => Promise<TenantRecord>;
  rotationOverlapS: number;
  allowHttpLoopback: boolean;
  allowedNetworks: readonly string[];
}

/** Endpoints per tenant: each costs a delivery per event. */
export const MAX_ENDPOINTS_PER_TENANT = 20;
const DEFAULT_PAGE = 50;

export function presentEndpoint(e: WebhookEndpointRecord) {
  return {
    id: e.id,
    url: e.url,
    description: e.description,
    event_types: e.eventTypes,
    enabled: e.enabled,
    disabled_reason: e.disabledReason,
    disabled_detail: e.disabledDetail,
    disabled_at: e.disabledAt?.toISOString() ?? null,
    failing_since: e.failingSince?.toISOString() ?? null,
    signing_secrets: e.secrets.map((s) => ({ created_at: s.createdAt.toISOString(), expires_at: s.expiresAt?.toISOString() ?? null })),
    pending: e.pending,
    created_at: e.createdAt.toISOString(),
    updated_at: e.updatedAt.toISOString(),
  };
}

export async function webhookEndpointRoutes(app: App, opts: WebhookEndpointOptions): Promise<void> {
  const { store, now } = opts;
  const allowed = new AllowedNetworks(opts.allowedNetworks);
  const errors = { 400: ProblemRef, 401: ProblemRef, 403: ProblemRef, 404: ProblemRef, 429: ProblemRef };
  const common = { tags: ['downstream-webhooks'], security: [{ adminToken: [] }], headers: AdminHeaders };

  /** The tenant, when its tier includes downstream webhooks (reading and deleting need only the tenant). */
  async function entitled(slug: string): Promise<TenantRecord> {
    const tenant = await opts.tenantOr404(slug);
    if (tenant.entitlements.downstream_webhooks !== true) throw new AppError('downstream_webhooks_not_entitled');
    return tenant;
  }

  /** An address written in the URL is refused now; a name is checked at each delivery, as it resolves then. */
  function checkUrl(url: string): void {
    const why = endpointUrlProblem(url, opts.allowHttpLoopback);
    if (why !== null) throw new AppError('invalid_request', `url: ${why}`);
    const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
    const refused = isIP(host) !== 0 ? addressProblem(host, allowed) : null;
    if (refused !== null) throw new AppError('invalid_request', `url: ${refused}`);
  }

  function found<T>(value: T | null): T {
    if (value === null) throw new AppError('webhook_endpoint_not_found');
    return value;
  }

  const limitOf = (raw: string | undefined) => {
    const limit = raw === undefined ? DEFAULT_PAGE : Number(raw);
    if (limit > MAX_WEBHOOK_PAGE) throw new AppError('invalid_request', `limit: must be at most ${MAX_WEBHOOK_PAGE}`);
    return limit;
  };

  app.post(
    '/tenants/:slug/webhook-endpoints',
    {
      schema: {
        ...common,
        operationId: 'createWebhookEndpoint',
        summary: 'Add an endpoint that hears of status changes; its signing secret is shown once',
        params: TenantParams,
        body: CreateWebhookEndpointBody,
        response: { 201: WebhookEndpointWithSecret, 409: ProblemRef, ...errors },
      },
    },
    async (req, reply) => {
      const tenant = await entitled(req.params.slug);
      checkUrl(req.body.url);
      const at = now();
      const secret = generateSigningSecret();
      const endpoint = await store.webhooks.createEndpoint(
        tenant.id,
        { url: req.body.url, description: req.body.description ?? '', eventTypes: req.body.event_types ?? null, secret },
        at,
        MAX_ENDPOINTS_PER_TENANT,
      );
      if (endpoint === 'limit_reached') throw new AppError('webhook_endpoint_limit');
      if (endpoint === 'tenant_not_found') throw new AppError('tenant_not_found');
      req.log.info({ tenant: tenant.slug, endpoint: endpoint.id }, 'webhook endpoint created');
      return reply.code(201).send({ ...presentEndpoint(endpoint), secret });
    },
  );

  app.get(
    '/tenants/:slug/webhook-endpoints',
    { schema: { ...common, operationId: 'listWebhookEndpoints', summary: "The tenant's webhook endpoints", params: TenantParams, response: { 200: WebhookEndpointList, ...errors } } },
    async (req) => {
      const tenant = await opts.tenantOr404(req.params.slug);
      return { data: (await store.webhooks.listEndpoints(tenant.id, now())).map(presentEndpoint) };
    },
  );

  app.get(
    '/tenants/:slug/webhook-endpoints/:endpointId',
    {
      schema: {
        ...common,
        operationId: 'getWebhookEndpoint',
        summary: 'An endpoint: whether it is enabled, why not, and how many messages wait',
        params: WebhookEndpointParams,
        response: { 200: WebhookEndpoint, ...errors },
      },
    },
    async (req) => {
      const tenant = await opts.tenantOr404(req.params.slug);
      return presentEndpoint(found(await store.webhooks.getEndpoint(tenant.id, req.params.endpointId, now())));
    },
  );

  app.patch(
    '/tenants/:slug/webhook-endpoints/:endpointId',
    {
      schema: {
        ...common,
        operationId: 'updateWebhookEndpoint',
        summary: 'Change the URL, description or event types, or enable or disable the endpoint',
        params: WebhookEndpointParams,
        body: UpdateWebhookEndpointBody,
        response: { 200: WebhookEndpoint, ...errors },
      },
    },
    async (req) => {
      const tenant = await entitled(req.params.slug);
      const body = req.body;
      if (body.url !== undefined) checkUrl(body.url);
      const updated = await store.webhooks.updateEndpoint(
        tenant.id,
        req.params.endpointId,
        {
          ...(body.url !== undefined ? { url: body.url } : {}),
          ...(body.description !== undefined ? { description: body.description } : {}),
          ...(body.event_types !== undefined ? { eventTypes: body.event_types } : {}),
          ...(body.enabled !== undefined ? { enabled: body.enabled } : {}),
        },
        now(),
      );
      req.log.info({ tenant: tenant.slug, endpoint: req.params.endpointId, fields: Object.keys(body) }, 'webhook endpoint updated');
      return presentEndpoint(found(updated));
    },
  );

  app.delete(
    '/tenants/:slug/webhook-endpoints/:endpointId',
    {
      schema: {
        ...common,
        operationId: 'deleteWebhookEndpoint',
        summary: 'Delete an endpoint, its secrets and its deliveries',
        params: WebhookEndpointParams,
        response: { 204: Type.Null({ description: 'Deleted' }), ...errors },
      },
    },
    async (req, reply) => {
      const tenant = await opts.tenantOr404(req.params.slug);
      if (!(await store.webhooks.deleteEndpoint(tenant.id, req.params.endpointId))) throw new AppError('webhook_endpoint_not_found');
      req.log.info({ tenant: tenant.slug, endpoint: req.params.endpointId }, 'webhook endpoint deleted');
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/tenants/:slug/webhook-endpoints/:endpointId/rotate-secret',
    {
      schema: {
        ...common,
        operationId: 'rotateWebhookSecret',
        summary: 'A new signing secret, shown once; the current one keeps signing too during the overlap',
        params: WebhookEndpointParams,
        body: RotateWebhookSecretBody,
        response: { 200: WebhookEndpointWithSecret, ...errors },
      },
    },
    async (req) => {
      const tenant = await entitled(req.params.slug);
      const overlapS = req.body.overlap_seconds ?? opts.rotationOverlapS;
      const at = now();
      const secret = generateSigningSecret();
      if (!(await store.webhooks.rotateEndpointSecret(tenant.id, req.params.endpointId, secret, overlapS, at))) throw new AppError('webhook_endpoint_not_found');
      const endpoint = found(await store.webhooks.getEndpoint(tenant.id, req.params.endpointId, at));
      req.log.info({ tenant: tenant.slug, endpoint: endpoint.id }, 'webhook signing secret rotated');
      return { ...presentEndpoint(endpoint), secret, previous_expires_at: overlapS > 0 ? new Date(at.getTime() + overlapS * 1000).toISOString() : null };
    },
  );

  app.get(
    '/tenants/:slug/webhook-endpoints/:endpointId/attempts',
    {
      schema: {
        ...common,
        operationId: 'listWebhookAttempts',
        summary: "The endpoint's latest delivery attempts, newest first: status code, latency, error",
        params: WebhookEndpointParams,
        querystring: WebhookAttemptsQuery,
        response: { 200: WebhookAttemptList, ...errors },
      },
    },
    async (req) => {
      const tenant = await opts.tenantOr404(req.params.slug);
      const attempts = found(await store.webhooks.listAttempts(tenant.id, req.params.endpointId, limitOf(req.query.limit)));
      return {
        data: attempts.map((a) => ({
          message_id: a.messageId,
          attempted_at: a.attemptedAt.toISOString(),
          status_code: a.statusCode,
          latency_ms: a.latencyMs,
          outcome: a.outcome,
          error: a.error,
        })),
      };
    },
  );

  app.get(
    '/tenants/:slug/webhook-endpoints/:endpointId/messages',
    {
      schema: {
        ...common,
        operationId: 'listWebhookMessages',
        summary: "The endpoint's messages, newest first, with their delivery state (pending: still to be delivered)",
        params: WebhookEndpointParams,
        querystring: WebhookMessagesQuery,
        response: { 200: WebhookMessageList, ...errors },
      },
    },
    async (req) => {
      const tenant = await opts.tenantOr404(req.params.slug);
      const messages = found(
        await store.webhooks.listMessages(tenant.id, req.params.endpointId, { limit: limitOf(req.query.limit), ...(req.query.state ? { state: req.query.state } : {}) }),
      );
      return {
        data: messages.map((m) => ({
          message_id: m.messageId,
          type: m.type,
          processor_customer_id: m.processorCustomerId,
          sequence: m.sequence,
          created_at: m.createdAt.toISOString(),
          state: m.state,
          attempts: m.attempts,
          next_attempt_at: m.nextAttemptAt?.toISOString() ?? null,
          last_attempt_at: m.lastAttemptAt?.toISOString() ?? null,
          last_status: m.lastStatus,
          last_error: m.lastError,
        })),
      };
    },
  );

  app.post(
    '/tenants/:slug/webhook-endpoints/:endpointId/messages/:messageId/retry',
    {
      schema: {
        ...common,
        operationId: 'retryWebhookMessage',
        summary: 'Send a message to the endpoint again now, with a new retry window',
        params: WebhookMessageParams,
        response: { 202: WebhookRetryAnswer, ...errors },
      },
    },
    async (req, reply) => {
      const tenant = await entitled(req.params.slug);
      const result = await store.webhooks.retryMessage(tenant.id, req.params.endpointId, req.params.messageId, now());
      if (result === 'endpoint_not_found') throw new AppError('webhook_endpoint_not_found');
      if (result === 'message_not_found') throw new AppError('webhook_message_not_found');
      return reply.code(202).send({ queued: true });
    },
  );

  app.post(
    '/tenants/:slug/webhook-endpoints/:endpointId/replay',
    {
      schema: {
        ...common,
        operationId: 'replayWebhookMessages',
        summary: 'Send the messages of a time range to the endpoint again (those of its event types), oldest first',
        description: `At most ${MAX_REPLAY_MESSAGES} a call; next says where the next call goes on. Each message is queued as new (a new retry window). Receivers drop what they had by webhook-id.`,
        params: WebhookEndpointParams,
        body: WebhookReplayBody,
        response: { 202: WebhookReplayAnswer, ...errors },
      },
    },
    async (req, reply) => {
      const tenant = await entitled(req.params.slug);
      const at = now();
      const since = new Date(req.body.since);
      const until = req.body.until === undefined ? at : new Date(req.body.until);
      if (!(since.getTime() < until.getTime())) throw new AppError('invalid_request', 'since: must be before until');
      const range = { since, until, ...(req.body.after !== undefined ? { after: req.body.after } : {}) };
      const result = found(await store.webhooks.replay(tenant.id, req.params.endpointId, range, MAX_REPLAY_MESSAGES, at));
      req.log.info({ tenant: tenant.slug, endpoint: req.params.endpointId, queued: result.queued }, 'webhook messages replayed');
      return reply.code(202).send({ queued: result.queued, next: result.next === null ? null : { since: result.next.since.toISOString(), after: result.next.after } });
    },
  );
}
