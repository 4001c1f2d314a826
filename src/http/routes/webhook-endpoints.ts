import { isIP } from 'node:net';
import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import {
  AllowedNetworks,
  addressProblem,
  endpointUrlProblem,
  ENDPOINT_ID_RE,
  generateSigningSecret,
  MESSAGE_ID_RE,
} from '../../domain/downstream-endpoints.js';
import type { DownstreamEndpointRecord, EndpointStore, TenantRecord, TenantStore } from '../../store/index.js';
import type { App } from '../app-instance.js';
import { AppError } from '../problems.js';
import { holds } from '../principal.js';
import { escapeControls } from '../../domain/validation.js';
import {
  CreateWebhookEndpointBody,
  MAX_REPLAY_MESSAGES,
  MAX_WEBHOOK_PAGE,
  ProblemRef,
  RotateWebhookSecretBody,
  UpdateWebhookEndpointBody,
  WebhookAttemptList,
  WebhookAttemptsQuery,
  WebhookEndpoint,
  WebhookEndpointList,
  WebhookEndpointWithSecret,
  WebhookMessageList,
  WebhookMessagesQuery,
  WebhookReplayAnswer,
  WebhookReplayBody,
  WebhookRetryAnswer,
} from '../schemas.js';
import { doc, ERRORS, paramsOf, tenantRecord } from './common.js';
import type { Audience } from './common.js';

/**
 * A tenant's downstream webhook endpoints (docs/webhooks.md), for the operator
 * (/admin/v1/tenants/:slug/webhook-endpoints) and the tenant (/v1/webhook-endpoints:
 * `webhooks:write`, reading with `subscribers:read`): endpoints, their signing secrets,
 * attempts and messages, retries and replays.
 */

export interface DownstreamEndpointOptions {
  audience: Audience;
  tenants: Pick<TenantStore, 'getTenant'>;
  endpoints: EndpointStore;
  now: () => Date;
  rotationOverlapS: number;
  allowHttpLoopback: boolean;
  allowedNetworks: readonly string[];
}

/** Endpoints per tenant: each costs a delivery per event. */
export const MAX_ENDPOINTS_PER_TENANT = 20;
const DEFAULT_PAGE = 50;

export function presentEndpoint(e: DownstreamEndpointRecord) {
  return {
    id: e.id,
    url: e.url,
    description: e.description,
    event_types: e.eventTypes,
    enabled: e.enabled,
    disabled_reason: e.disabledReason,
    disabled_detail: e.disabledDetail === null ? null : escapeControls(e.disabledDetail),
    disabled_at: e.disabledAt?.toISOString() ?? null,
    failing_since: e.failingSince?.toISOString() ?? null,
    signing_secrets: e.secrets.map((s) => ({
      created_at: s.createdAt.toISOString(),
      expires_at: s.expiresAt?.toISOString() ?? null,
    })),
    pending: e.pending,
    created_at: e.createdAt.toISOString(),
    updated_at: e.updatedAt.toISOString(),
  };
}

/** What the endpoint routes share: the options, the schemas' parts and the checks. */
function routeKit(opts: DownstreamEndpointOptions) {
  const { audience, tenants, endpoints, now } = opts;
  const allowed = new AllowedNetworks(opts.allowedNetworks);
  const errors = ERRORS;
  const common = (operationId: string) => doc(audience, operationId, '', 'downstream-webhooks');
  const EndpointId = Type.String({ pattern: ENDPOINT_ID_RE.source });
  const endpointParams = paramsOf(audience, { endpointId: EndpointId });
  const messageParams = paramsOf(audience, {
    endpointId: EndpointId,
    messageId: Type.String({ pattern: MESSAGE_ID_RE.source }),
  });

  /** The tenant, when its tier includes downstream webhooks (reading and deleting need only the tenant). */
  async function entitled(req: FastifyRequest): Promise<TenantRecord> {
    const tenant = await tenantRecord(tenants, req);
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
  return {
    opts,
    audience,
    tenants,
    endpoints,
    now,
    errors,
    common,
    endpointParams,
    messageParams,
    entitled,
    checkUrl,
    found,
    limitOf,
  };
}

type RouteKit = ReturnType<typeof routeKit>;

/** An endpoint: created, listed, read, changed, deleted. */
function endpointCrudRoutes(app: App, kit: RouteKit): void {
  const { audience, tenants, endpoints, now, errors, common, endpointParams, entitled, checkUrl, found } = kit;
  app.post(
    '/webhook-endpoints',
    {
      config: { scope: 'webhooks:write' },
      schema: {
        ...common('createWebhookEndpoint'),
        summary: 'Add an endpoint that hears of status changes; its signing secret is shown once',
        params: paramsOf(audience, {}),
        body: CreateWebhookEndpointBody,
        response: { 201: WebhookEndpointWithSecret, 409: ProblemRef, ...errors },
      },
    },
    async (req, reply) => {
      const tenant = await entitled(req);
      checkUrl(req.body.url);
      const at = now();
      const secret = generateSigningSecret();
      const endpoint = await endpoints.createEndpoint(
        tenant.id,
        {
          url: req.body.url,
          description: req.body.description ?? '',
          eventTypes: req.body.event_types ?? null,
          secret,
        },
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
    '/webhook-endpoints',
    {
      config: { scope: 'subscribers:read' },
      schema: {
        ...common('listWebhookEndpoints'),
        summary: "The tenant's webhook endpoints",
        params: paramsOf(audience, {}),
        response: { 200: WebhookEndpointList, ...errors },
      },
    },
    async (req) => {
      const tenant = await tenantRecord(tenants, req);
      return { data: (await endpoints.listEndpoints(tenant.id, now())).map(presentEndpoint) };
    },
  );

  app.get(
    '/webhook-endpoints/:endpointId',
    {
      config: { scope: 'subscribers:read' },
      schema: {
        ...common('getWebhookEndpoint'),
        summary: 'An endpoint: whether it is enabled, why not, and how many messages wait',
        params: endpointParams,
        response: { 200: WebhookEndpoint, ...errors },
      },
    },
    async (req) => {
      const tenant = await tenantRecord(tenants, req);
      return presentEndpoint(found(await endpoints.getEndpoint(tenant.id, req.params.endpointId, now())));
    },
  );

  app.patch(
    '/webhook-endpoints/:endpointId',
    {
      config: { scope: 'webhooks:write' },
      schema: {
        ...common('updateWebhookEndpoint'),
        summary: 'Change the URL, description or event types, or enable or disable the endpoint',
        params: endpointParams,
        body: UpdateWebhookEndpointBody,
        response: { 200: WebhookEndpoint, ...errors },
      },
    },
    async (req) => {
      const tenant = await entitled(req);
      const body = req.body;
      if (body.url !== undefined) checkUrl(body.url);
      const updated = await endpoints.updateEndpoint(
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
      req.log.info(
        { tenant: tenant.slug, endpoint: req.params.endpointId, fields: Object.keys(body) },
        'webhook endpoint updated',
      );
      return presentEndpoint(found(updated));
    },
  );

  app.delete(
    '/webhook-endpoints/:endpointId',
    {
      config: { scope: 'webhooks:write' },
      schema: {
        ...common('deleteWebhookEndpoint'),
        summary: 'Delete an endpoint, its secrets and its deliveries',
        params: endpointParams,
        response: { 204: Type.Null({ description: 'Deleted' }), ...errors },
      },
    },
    async (req, reply) => {
      const tenant = await tenantRecord(tenants, req);
      if (!(await endpoints.deleteEndpoint(tenant.id, req.params.endpointId)))
        throw new AppError('webhook_endpoint_not_found');
      req.log.info({ tenant: tenant.slug, endpoint: req.params.endpointId }, 'webhook endpoint deleted');
      return reply.code(204).send(null);
    },
  );
}

/** An endpoint's signing secret, rotated. */
function signingSecretRoutes(app: App, kit: RouteKit): void {
  const { endpoints, now, errors, common, endpointParams, entitled, found, opts } = kit;
  app.post(
    '/webhook-endpoints/:endpointId/rotate-secret',
    {
      config: { scope: 'webhooks:write' },
      schema: {
        ...common('rotateWebhookSecret'),
        summary: 'A new signing secret, shown once; the current one keeps signing too during the overlap',
        params: endpointParams,
        body: RotateWebhookSecretBody,
        response: { 200: WebhookEndpointWithSecret, ...errors },
      },
    },
    async (req) => {
      const tenant = await entitled(req);
      const overlapS = req.body.overlap_seconds ?? opts.rotationOverlapS;
      const at = now();
      const secret = generateSigningSecret();
      if (!(await endpoints.rotateEndpointSecret(tenant.id, req.params.endpointId, secret, overlapS, at)))
        throw new AppError('webhook_endpoint_not_found');
      const endpoint = found(await endpoints.getEndpoint(tenant.id, req.params.endpointId, at));
      req.log.info({ tenant: tenant.slug, endpoint: endpoint.id }, 'webhook signing secret rotated');
      return {
        ...presentEndpoint(endpoint),
        secret,
        previous_expires_at: overlapS > 0 ? new Date(at.getTime() + overlapS * 1000).toISOString() : null,
      };
    },
  );
}

/** What was sent to an endpoint: its attempts and messages, sent again, a time range replayed. */
function deliveryRoutes(app: App, kit: RouteKit): void {
  const { tenants, endpoints, now, errors, common, endpointParams, messageParams, entitled, found, limitOf } = kit;
  app.get(
    '/webhook-endpoints/:endpointId/attempts',
    {
      config: { scope: 'subscribers:read' },
      schema: {
        ...common('listWebhookAttempts'),
        summary: "The endpoint's latest delivery attempts, newest first: status code, latency, error",
        params: endpointParams,
        querystring: WebhookAttemptsQuery,
        response: { 200: WebhookAttemptList, ...errors },
      },
    },
    async (req) => {
      const tenant = await tenantRecord(tenants, req);
      const attempts = found(await endpoints.listAttempts(tenant.id, req.params.endpointId, limitOf(req.query.limit)));
      return {
        data: attempts.map((a) => ({
          message_id: a.messageId,
          attempted_at: a.attemptedAt.toISOString(),
          status_code: a.statusCode,
          latency_ms: a.latencyMs,
          outcome: a.outcome,
          // A receiver's redirect target or error text is its own: answered as data, controls escaped.
          error: a.error === null ? null : escapeControls(a.error),
        })),
      };
    },
  );

  app.get(
    '/webhook-endpoints/:endpointId/messages',
    {
      config: { scope: 'subscribers:read' },
      schema: {
        ...common('listWebhookMessages'),
        summary: "The endpoint's messages, newest first, with their delivery state (pending: still to be delivered)",
        params: endpointParams,
        querystring: WebhookMessagesQuery,
        response: { 200: WebhookMessageList, ...errors },
      },
    },
    async (req) => {
      const tenant = await tenantRecord(tenants, req);
      const messages = found(
        await endpoints.listMessages(tenant.id, req.params.endpointId, {
          limit: limitOf(req.query.limit),
          ...(req.query.state ? { state: req.query.state } : {}),
        }),
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
          last_error: m.lastError === null ? null : escapeControls(m.lastError),
        })),
      };
    },
  );

  app.post(
    '/webhook-endpoints/:endpointId/messages/:messageId/retry',
    {
      config: { scope: 'webhooks:write' },
      schema: {
        ...common('retryWebhookMessage'),
        summary: 'Send a message to the endpoint again now, with a new retry window',
        params: messageParams,
        response: { 202: WebhookRetryAnswer, ...errors },
      },
    },
    async (req, reply) => {
      const tenant = await entitled(req);
      const result = await endpoints.retryMessage(tenant.id, req.params.endpointId, req.params.messageId, now());
      if (result === 'endpoint_not_found') throw new AppError('webhook_endpoint_not_found');
      if (result === 'message_not_found') throw new AppError('webhook_message_not_found');
      return reply.code(202).send({ queued: true });
    },
  );

  app.post(
    '/webhook-endpoints/:endpointId/replay',
    {
      config: { scope: 'webhooks:write' },
      schema: {
        ...common('replayWebhookMessages'),
        summary:
          'Send the messages of a time range to the endpoint again (those of its event types), oldest first (webhooks:write and subscribers:read)',
        description: `At most ${MAX_REPLAY_MESSAGES} a call; next says where the next call goes on. Each message is queued as new (a new retry window). Receivers drop what they had by webhook-id.`,
        params: endpointParams,
        body: WebhookReplayBody,
        response: { 202: WebhookReplayAnswer, ...errors },
      },
    },
    async (req, reply) => {
      // A replay delivers the tenant's status changes to a receiver the caller chose: reading
      // them, which takes subscribers:read besides the route's webhooks:write.
      if (!holds(req.principal, 'subscribers:read'))
        throw new AppError(
          'insufficient_scope',
          'A replay delivers status changes: it needs the scope subscribers:read besides webhooks:write.',
        );
      const tenant = await entitled(req);
      const at = now();
      const since = new Date(req.body.since);
      const until = req.body.until === undefined ? at : new Date(req.body.until);
      if (!(since.getTime() < until.getTime())) throw new AppError('invalid_request', 'since: must be before until');
      const range = { since, until, ...(req.body.after !== undefined ? { after: req.body.after } : {}) };
      const result = found(await endpoints.replay(tenant.id, req.params.endpointId, range, MAX_REPLAY_MESSAGES, at));
      req.log.info(
        { tenant: tenant.slug, endpoint: req.params.endpointId, queued: result.queued },
        'webhook messages replayed',
      );
      return reply.code(202).send({
        queued: result.queued,
        next: result.next === null ? null : { since: result.next.since.toISOString(), after: result.next.after },
      });
    },
  );
}

export async function downstreamEndpointRoutes(app: App, opts: DownstreamEndpointOptions): Promise<void> {
  const kit = routeKit(opts);
  endpointCrudRoutes(app, kit);
  signingSecretRoutes(app, kit);
  deliveryRoutes(app, kit);
}
