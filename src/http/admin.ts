import { timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { App } from './app-instance.js';
import { cardUpdateUrlProblem, originProblem } from '../domain/validation.js';
import { generateHmacSecret, generatePublishableKey, sha256 } from '../domain/keys.js';
import { checkBearer } from '../domain/lookup.js';
import { eventShapeProblem, isStripeEvent } from '../domain/stripe/event.js';
import { zeroOutcomeCounts } from '../domain/stripe/outcomes.js';
import type { StripeEventLike } from '../domain/stripe/derive.js';
import type { Change, CustomerStatus } from '../domain/stripe/fold.js';
import { NAMED_FLAGS } from '../domain/types.js';
import { brandingProblem } from '../domain/branding.js';
import { DEFAULT_POLICY } from '../domain/policy.js';
import { AppError } from './problems.js';
import { sendProblem } from './problems.js';
import { authorizationOf } from './request.js';
import {
  AdminHeaders,
  CreateTenantBody,
  ProblemRef,
  PutSubscriberBody,
  PutTierBody,
  ReplayAnswer,
  ReplayBody,
  MAX_REPLAY_EVENTS,
  MAX_SUBSCRIBERS_PAGE,
  RotateBody,
  RotatedTenant,
  Subscriber,
  SubscriberListQuery,
  SubscriberPage,
  SubscriberParams,
  Tenant,
  TenantDetail,
  TenantList,
  TenantParams,
  TenantWithKeys,
  Tier,
  TierList,
  TierParams,
  UpdateTenantBody,
} from './schemas.js';
import { ingestStripeEvents } from '../services/stripe-events.js';
import type { ChangeCause, Store, TenantRecord } from '../store/store.js';
import { countFailures, guardAddress } from './rate-limit.js';
import type { RateLimiter } from './rate-limit.js';
import { presentSubscriber, presentTenant, presentTier } from './presenters.js';
import { webhookEndpointRoutes } from './webhook-endpoints.js';
import type { DeliverySettings } from '../webhooks/index.js';

export interface AdminOptions {
  store: Store;
  now: () => number;
  /** The SHA-256 digest of the admin token (the token itself is never kept); null: the admin API is off. */
  adminTokenSha256: Buffer | null;
  rotationOverlapS: number;
  /** Rate limits; null: none. */
  limiter: RateLimiter | null;
  /** How endpoint URLs of downstream webhooks are checked. */
  webhooks: Pick<DeliverySettings, 'allowHttpLoopback' | 'allowedNetworks'>;
}

const problemRef = ProblemRef;
/** A replay batch: the CLI sends at most 500 events and 4 MiB at a time. */
const REPLAY_BODY_LIMIT_BYTES = 8 * 1024 * 1024;
const errors = { 400: problemRef, 401: problemRef, 404: problemRef, 429: problemRef };

function invalid(field: string, why: string): AppError {
  return new AppError('invalid_request', `${field}: ${why}`);
}

function checkCardUpdateUrl(value: string | null | undefined): void {
  const why = typeof value === 'string' ? cardUpdateUrlProblem(value) : null;
  if (why) throw invalid('card_update_url', why);
}

/** The schema checked the shape; the domain checks the links (https, no credentials). */
function checkBranding(value: unknown): void {
  if (value === undefined) return;
  const why = brandingProblem(value);
  if (why) throw new AppError('invalid_request', why);
}

function checkOrigins(value: string[] | null | undefined): void {
  value?.forEach((origin, i) => {
    const why = originProblem(origin);
    if (why) throw invalid(`allowed_origins[${i}]`, why);
  });
}

function adminCause(now: Date): ChangeCause {
  return { source: 'admin', eventId: null, eventType: null, declineCode: null, occurredAt: now };
}

export async function adminRoutes(app: App, opts: AdminOptions): Promise<void> {
  const { store, adminTokenSha256 } = opts;
  const now = () => new Date(opts.now());

  /** Whether a request carries the admin token, decided once per request. */
  const verdicts = new WeakMap<FastifyRequest, boolean>();
  const holdsToken = (req: FastifyRequest): boolean => {
    let verdict = verdicts.get(req);
    if (verdict === undefined) {
      const bearer = checkBearer(authorizationOf(req.raw), 'missing_admin_token', 'invalid_admin_token');
      // Digests of equal length, compared in constant time: neither the token nor its length leaks.
      verdict = adminTokenSha256 !== null && bearer.ok && timingSafeEqual(sha256(bearer.token), adminTokenSha256);
      verdicts.set(req, verdict);
    }
    return verdict;
  };

  // Before the token is answered for, so that guessing it is limited too; the token is
  // checked first, so that the operator is never refused for the address's failures.
  const { limiter } = opts;
  if (limiter) {
    app.addHook('onRequest', guardAddress(limiter, 'admin', null, holdsToken));
    // A 401 is a guess at the token; a 404 after a valid token is no guess.
    app.addHook('onSend', countFailures(limiter, [401]));
  }
  app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
    if (adminTokenSha256 === null) return sendProblem(reply, 'admin_disabled');
    const bearer = checkBearer(authorizationOf(req.raw), 'missing_admin_token', 'invalid_admin_token');
    if (!bearer.ok) return sendProblem(reply, bearer.code);
    if (!holdsToken(req)) return sendProblem(reply, 'invalid_admin_token');
  });

  async function tenantOr404(slug: string): Promise<TenantRecord> {
    const tenant = await store.getTenant(slug);
    if (!tenant) throw new AppError('tenant_not_found');
    return tenant;
  }

  /** An admin action is an event like any other, at the time it is made. */
  async function applyAdminChange(tenantId: number, customerId: string, change: Change, at: Date): Promise<void> {
    const outcome = await store.applyChange(tenantId, customerId, change, adminCause(at), at);
    if (outcome === 'applied') return;
    // Stale, but the state asked for may hold already (a repeated DELETE or PUT): that is success.
    const current = await store.getSubscriber(tenantId, customerId);
    const holds = change.kind === 'delete' ? (current?.status ?? null) === null : current?.derivedStatus === change.status && current.reason === change.reason;
    if (!holds) throw new AppError('stale_change');
  }

  const common = { tags: ['admin'], security: [{ adminToken: [] }], headers: AdminHeaders };

  await webhookEndpointRoutes(app, { store, now, tenantOr404, rotationOverlapS: opts.rotationOverlapS, ...opts.webhooks });

  app.post(
    '/tenants',
    { schema: { ...common, operationId: 'createTenant', summary: 'Create a tenant', body: CreateTenantBody, response: { 201: TenantWithKeys, 409: problemRef, ...errors } } },
    async (req, reply) => {
      const body = req.body;
      checkCardUpdateUrl(body.card_update_url);
      checkBranding(body.branding);
      checkOrigins(body.allowed_origins);
      const livemode = body.livemode ?? null;
      const publishableKey = generatePublishableKey(livemode);
      const hmacSecret = generateHmacSecret();
      const result = await store.createTenant(
        {
          slug: body.slug,
          tier: body.tier ?? 'starter',
          cardUpdateUrl: body.card_update_url ?? null,
          hmacRequired: body.hmac_required ?? false,
          allowedOrigins: body.allowed_origins ?? null,
          lookupsPerMinute: body.lookups_per_minute ?? null,
          ...(body.branding !== undefined ? { branding: body.branding } : {}),
          ...(body.policy !== undefined ? { policy: { ...DEFAULT_POLICY, ...body.policy } } : {}),
          livemode,
          publishableKeyHash: sha256(publishableKey).toString('hex'),
          hmacSecret,
        },
        now(),
      );
      if (!result.ok) {
        if (result.error === 'exists') throw new AppError('tenant_exists');
        throw invalid('tier', `no tier is named '${body.tier ?? 'starter'}'`);
      }
      req.log.info({ tenant: body.slug }, 'tenant created');
      return reply.code(201).send({ ...presentTenant(result.tenant), publishable_key: publishableKey, hmac_secret: hmacSecret });
    },
  );

  app.get('/tenants', { schema: { ...common, operationId: 'listTenants', summary: 'List tenants', response: { 200: TenantList, 401: problemRef, 429: problemRef } } }, async () => ({
    data: (await store.listTenants()).map(presentTenant),
  }));

  app.get(
    '/tenants/:slug',
    {
      schema: {
        ...common,
        operationId: 'getTenant',
        summary: 'Show a tenant, its credentials in force and its subscribers by status',
        params: TenantParams,
        response: { 200: TenantDetail, ...errors },
      },
    },
    async (req) => {
      const tenant = await tenantOr404(req.params.slug);
      const [credentials, counts] = await Promise.all([store.listCredentials(tenant.id, now()), store.countSubscribers(tenant.id)]);
      return {
        ...presentTenant(tenant),
        stripe_webhook_secret_set: credentials.some((c) => c.kind === 'stripe_webhook_secret'),
        credentials: credentials.map((c) => ({ kind: c.kind, created_at: c.createdAt.toISOString(), expires_at: c.expiresAt?.toISOString() ?? null })),
        subscriber_counts: counts.answered,
        derived_subscriber_counts: counts.derived,
      };
    },
  );

  app.delete(
    '/tenants/:slug',
    {
      schema: {
        ...common,
        operationId: 'deleteTenant',
        summary: 'Delete a tenant and everything it owns: keys, subscribers, history, Stripe events',
        params: TenantParams,
        response: { 204: Type.Null({ description: 'Deleted' }), ...errors },
      },
    },
    async (req, reply) => {
      const tenant = await tenantOr404(req.params.slug);
      if (!(await store.deleteTenant(tenant.id))) throw new AppError('tenant_not_found');
      req.log.warn({ tenant: tenant.slug }, 'tenant deleted');
      return reply.code(204).send(null);
    },
  );

  app.get(
    '/tenants/:slug/subscribers',
    {
      schema: {
        ...common,
        operationId: 'listSubscribers',
        summary: "A page of the tenant's subscribers in customer id order, filtered by status, reason and time of change",
        params: TenantParams,
        querystring: SubscriberListQuery,
        response: { 200: SubscriberPage, ...errors },
      },
    },
    async (req) => {
      const tenant = await tenantOr404(req.params.slug);
      const q = req.query;
      const limit = q.limit === undefined ? 100 : Number(q.limit);
      if (limit > MAX_SUBSCRIBERS_PAGE) throw invalid('limit', `must be at most ${MAX_SUBSCRIBERS_PAGE}`);
      const page = await store.listSubscribers(tenant.id, {
        limit,
        ...(q.status !== undefined ? { status: q.status } : {}),
        ...(q.reason !== undefined ? { reason: q.reason } : {}),
        ...(q.updated_since !== undefined ? { updatedSince: new Date(q.updated_since) } : {}),
        ...(q.cursor !== undefined ? { after: q.cursor } : {}),
      });
      return {
        data: page.rows.map((r) => ({ processor_customer_id: r.processorCustomerId, status: r.status, reason: r.reason, updated_at: r.updatedAt.toISOString() })),
        next_cursor: page.more ? (page.rows.at(-1)?.processorCustomerId ?? null) : null,
      };
    },
  );

  app.patch(
    '/tenants/:slug',
    { schema: { ...common, operationId: 'updateTenant', summary: 'Update a tenant', params: TenantParams, body: UpdateTenantBody, response: { 200: Tenant, ...errors } } },
    async (req) => {
      const body = req.body;
      checkCardUpdateUrl(body.card_update_url);
      checkBranding(body.branding);
      checkOrigins(body.allowed_origins);
      const at = now();
      // A partial policy keeps the fields it leaves out (merged by the store, in the update's transaction).
      const policy = body.policy;
      const result = await store.updateTenant(
        req.params.slug,
        {
          ...(policy !== undefined ? { policy } : {}),
          ...(body.tier !== undefined ? { tier: body.tier } : {}),
          ...(body.card_update_url !== undefined ? { cardUpdateUrl: body.card_update_url } : {}),
          ...(body.hmac_required !== undefined ? { hmacRequired: body.hmac_required } : {}),
          ...(body.suspended !== undefined ? { suspended: body.suspended } : {}),
          ...(body.allowed_origins !== undefined ? { allowedOrigins: body.allowed_origins } : {}),
          ...(body.lookups_per_minute !== undefined ? { lookupsPerMinute: body.lookups_per_minute } : {}),
          ...(body.branding !== undefined ? { branding: body.branding } : {}),
          ...(body.livemode !== undefined ? { livemode: body.livemode } : {}),
        },
        at,
        // A new signing secret replaces the old one the way Stripe's own rolling does: both
        // verify during the overlap, so no event is refused while the tenant switches.
        body.stripe_webhook_secret === undefined
          ? undefined
          : { kind: 'stripe_webhook_secret', material: body.stripe_webhook_secret, overlapS: opts.rotationOverlapS },
      );
      if (!result.ok) {
        if (result.error === 'not_found') throw new AppError('tenant_not_found');
        throw invalid('tier', `no tier is named '${body.tier ?? ''}'`);
      }
      req.log.info({ tenant: req.params.slug, fields: Object.keys(body) }, 'tenant updated');
      return presentTenant(result.tenant);
    },
  );

  app.post(
    '/tenants/:slug/rotate',
    {
      schema: {
        ...common,
        operationId: 'rotateTenantKey', summary: 'Rotate the publishable key or the HMAC secret',
        description: 'The keys replaced stay valid for DUNWALL_ROTATION_OVERLAP_S seconds.',
        params: TenantParams,
        body: RotateBody,
        response: { 200: RotatedTenant, ...errors },
      },
    },
    async (req) => {
      const tenant = await tenantOr404(req.params.slug);
      const at = now();
      const previousExpiresAt = new Date(at.getTime() + opts.rotationOverlapS * 1000).toISOString();
      if (req.body.key === 'publishable') {
        // The tenant's mode now: a tenant switched to live gets a pk_live_ key here.
        const key = generatePublishableKey(tenant.livemode);
        await store.rotateCredential(tenant.id, 'publishable_key', sha256(key).toString('hex'), opts.rotationOverlapS, at);
        req.log.info({ tenant: tenant.slug }, 'publishable key rotated');
        return { ...presentTenant(tenant), publishable_key: key, previous_expires_at: previousExpiresAt };
      }
      const secret = generateHmacSecret();
      await store.rotateCredential(tenant.id, 'hmac_secret', secret, opts.rotationOverlapS, at);
      req.log.info({ tenant: tenant.slug }, 'hmac secret rotated');
      return { ...presentTenant(tenant), hmac_secret: secret, previous_expires_at: previousExpiresAt };
    },
  );

  app.put(
    '/tenants/:slug/subscribers/:customerId',
    {
      schema: {
        ...common,
        operationId: 'setSubscriberStatus', summary: "Set a subscriber's status",
        description: 'An event at the time it is made: a Stripe event dated later keeps precedence (409 stale_change).',
        params: SubscriberParams,
        body: PutSubscriberBody,
        response: { 200: Subscriber, 409: problemRef, ...errors },
      },
    },
    async (req) => {
      const tenant = await tenantOr404(req.params.slug);
      const at = now();
      const change: Change = { kind: 'set', status: req.body.status, reason: req.body.reason ?? 'manual' };
      await applyAdminChange(tenant.id, req.params.customerId, change, at);
      const record = await store.getSubscriber(tenant.id, req.params.customerId);
      if (!record) throw new AppError('subscriber_not_found');
      return presentSubscriber(record);
    },
  );

  app.get(
    '/tenants/:slug/subscribers/:customerId',
    { schema: { ...common, operationId: 'getSubscriber', summary: 'Show a subscriber and its history', params: SubscriberParams, response: { 200: Subscriber, ...errors } } },
    async (req) => {
      const tenant = await tenantOr404(req.params.slug);
      const record = await store.getSubscriber(tenant.id, req.params.customerId);
      if (!record) throw new AppError('subscriber_not_found');
      return presentSubscriber(record);
    },
  );

  app.delete(
    '/tenants/:slug/subscribers/:customerId',
    {
      schema: {
        ...common,
        operationId: 'deleteSubscriber', summary: 'Forget a subscriber (it becomes unknown, so active)',
        params: SubscriberParams,
        response: { 204: Type.Null({ description: 'Forgotten' }), 409: problemRef, ...errors },
      },
    },
    async (req, reply) => {
      const tenant = await tenantOr404(req.params.slug);
      await applyAdminChange(tenant.id, req.params.customerId, { kind: 'delete' }, now());
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/tenants/:slug/stripe-events',
    {
      bodyLimit: REPLAY_BODY_LIMIT_BYTES,
      // Up to 500 events, each its own transaction: each is bounded, not the batch.
      config: { storeBound: 'call' },
      schema: {
        ...common,
        operationId: 'replayStripeEvents', summary: "Replay Stripe events through the webhook's derivation (a backfill)",
        description: `Up to ${MAX_REPLAY_EVENTS} events, applied in the order given; the order does not change the result. No signature: the admin token vouches for them.`,
        params: TenantParams,
        body: ReplayBody,
        response: { 200: ReplayAnswer, ...errors },
      },
    },
    async (req) => {
      const tenant = await tenantOr404(req.params.slug);
      const dryRun = req.body.dry_run === true;
      const outcomes = zeroOutcomeCounts();
      const invalid: { index: number; detail: string }[] = [];
      const events: StripeEventLike[] = [];
      const at = now();
      for (const [index, candidate] of req.body.events.entries()) {
        if (isStripeEvent(candidate, at.getTime())) events.push(candidate);
        else invalid.push({ index, detail: eventShapeProblem(candidate, at.getTime()) ?? 'not a Stripe event' });
      }
      const results = await ingestStripeEvents(store, tenant, events, at, dryRun);
      const invalidAt = new Set(invalid.map((i) => i.index));
      let next = 0;
      const perEvent = req.body.events.map((_, index) => (invalidAt.has(index) ? 'invalid' : (results[next++]?.outcome ?? 'invalid')));
      // Each customer's status before its first event of the batch and after its last.
      const customers = new Map<string, { before: CustomerStatus | null; after: CustomerStatus | null }>();
      for (const r of results) {
        outcomes[r.outcome] += 1;
        if (r.customerId === null) continue;
        const first = customers.get(r.customerId);
        customers.set(r.customerId, { before: first === undefined ? r.before : first.before, after: r.after });
      }
      const answer = [...customers].map(([customerId, { before, after }]) => ({
        processor_customer_id: customerId,
        status_before: before?.status ?? null,
        status: after?.status ?? null,
        reason: after?.reason ?? null,
      }));
      req.log.info({ tenant: tenant.slug, dryRun, ...outcomes, invalid: invalid.length }, 'stripe events replayed');
      return { received: req.body.events.length, dry_run: dryRun, outcomes, invalid, results: perEvent, customers: answer };
    },
  );

  app.get('/tiers', { schema: { ...common, operationId: 'listTiers', summary: 'List tiers', response: { 200: TierList, 401: problemRef, 429: problemRef } } }, async () => ({
    data: (await store.listTiers()).map(presentTier),
  }));

  app.put(
    '/tiers/:name',
    { schema: { ...common, operationId: 'putTier', summary: 'Create or replace a tier', params: TierParams, body: PutTierBody, response: { 200: Tier, ...errors } } },
    async (req) => {
      for (const flag of NAMED_FLAGS) {
        if (req.body.entitlements[flag] === undefined) throw invalid(`entitlements.${flag}`, 'is required');
      }
      return presentTier(await store.putTier(req.params.name, req.body.entitlements, now()));
    },
  );

  app.delete(
    '/tiers/:name',
    {
      schema: {
        ...common,
        operationId: 'deleteTier',
        summary: 'Delete a tier no tenant is on',
        params: TierParams,
        response: { 204: Type.Null({ description: 'Deleted' }), 409: problemRef, ...errors },
      },
    },
    async (req, reply) => {
      const result = await store.deleteTier(req.params.name);
      if (result === 'not_found') throw new AppError('tier_not_found');
      if (result === 'in_use') throw new AppError('tier_in_use');
      return reply.code(204).send(null);
    },
  );
}
