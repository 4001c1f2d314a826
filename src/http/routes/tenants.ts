import { Type } from 'typebox';
import { generateHmacSecret, generatePublishableKey, sha256 } from '../../domain/keys.js';
import { DEFAULT_POLICY } from '../../domain/policy.js';
import type { KeyStore, StripeApiKeyStore, SubscriberStore, TenantRecord, TenantStore } from '../../store/index.js';
import type { App } from '../app-instance.js';
import { AppError } from '../problems.js';
import { presentTenant } from '../presenters.js';
import {
  AdminHeaders,
  CreateTenantBody,
  ModeQuery,
  ProblemRef,
  RotateBody,
  RotatedTenant,
  Tenant,
  TenantDetail,
  TenantList,
  TenantParams,
  TenantWithKeys,
  UpdateTenantBody,
} from '../schemas.js';
import { checkSettings, updateTenant } from './settings.js';
import { modeOf } from '../auth.js';
import type { Mode } from '../../domain/types.js';
import { invalid, presentStripeApiKey } from './common.js';

/**
 * The operator's tenants (/admin/v1/tenants): create, list, show, change, rotate the
 * publishable key or HMAC secret, delete. A tenant's own resources (subscribers, keys,
 * settings, endpoints) are in their own route files, served to the operator and the tenant.
 */
export interface TenantRoutesOptions {
  tenants: TenantStore;
  keys: Pick<KeyStore, 'listCredentials' | 'rotateCredential'>;
  subscribers: Pick<SubscriberStore, 'countSubscribers'>;
  stripeApiKeys: Pick<StripeApiKeyStore, 'stripeApiKeyOf'>;
  now: () => number;
  rotationOverlapS: number;
  /** The tier of a tenant created without one (DUNWALL_DEFAULT_TIER). */
  defaultTier: string;
}

const problemRef = ProblemRef;
const errors = { 400: problemRef, 401: problemRef, 404: problemRef, 429: problemRef };

export async function tenantRoutes(app: App, opts: TenantRoutesOptions): Promise<void> {
  const { tenants, keys, subscribers } = opts;
  const now = () => new Date(opts.now());

  async function tenantOr404(slug: string): Promise<TenantRecord> {
    const tenant = await tenants.getTenant(slug);
    if (!tenant) throw new AppError('tenant_not_found');
    return tenant;
  }

  /** The data space of the mode a request asks for (`?mode=test`; live by default). */
  async function spaceOr404(slug: string, mode: Mode): Promise<number> {
    const space = await tenants.spaceOf(slug, mode);
    if (!space) throw new AppError('tenant_not_found');
    return space.spaceId;
  }

  const common = { tags: ['admin'], security: [{ adminToken: [] }], headers: AdminHeaders };

  app.post(
    '/tenants',
    {
      schema: {
        ...common,
        operationId: 'createTenant',
        summary: 'Create a tenant',
        body: CreateTenantBody,
        response: { 201: TenantWithKeys, 409: problemRef, ...errors },
      },
    },
    async (req, reply) => {
      const body = req.body;
      checkSettings(body);
      const livemode = body.livemode ?? null;
      // Both modes' first keys (docs/test-mode.md): pk_live_ for the live mode, pk_test_ for the test mode.
      const publishableKey = generatePublishableKey(true);
      const testPublishableKey = generatePublishableKey(false);
      const hmacSecret = generateHmacSecret();
      const result = await tenants.createTenant(
        {
          slug: body.slug,
          tier: body.tier ?? opts.defaultTier,
          cardUpdateUrl: body.card_update_url ?? null,
          hmacRequired: body.hmac_required ?? false,
          allowedOrigins: body.allowed_origins ?? null,
          lookupsPerMinute: body.lookups_per_minute ?? null,
          ...(body.branding !== undefined ? { branding: body.branding } : {}),
          ...(body.policy !== undefined ? { policy: { ...DEFAULT_POLICY, ...body.policy } } : {}),
          livemode,
          publishableKeyHash: sha256(publishableKey).toString('hex'),
          testPublishableKeyHash: sha256(testPublishableKey).toString('hex'),
          hmacSecret,
        },
        now(),
      );
      if (!result.ok) {
        if (result.error === 'exists') throw new AppError('tenant_exists');
        // Checked at boot, but a tier can be deleted since: say whose choice it was.
        if (body.tier === undefined)
          throw invalid(
            'tier',
            `the default tier '${opts.defaultTier}' (DUNWALL_DEFAULT_TIER) does not exist: name a tier, or create that one`,
          );
        throw invalid('tier', `no tier is named '${body.tier}'`);
      }
      req.log.info({ tenant: body.slug }, 'tenant created');
      return reply.code(201).send({
        ...presentTenant(result.tenant),
        publishable_key: publishableKey,
        test_publishable_key: testPublishableKey,
        hmac_secret: hmacSecret,
      });
    },
  );

  app.get(
    '/tenants',
    {
      schema: {
        ...common,
        operationId: 'listTenants',
        summary: 'List tenants',
        response: { 200: TenantList, 401: problemRef, 429: problemRef },
      },
    },
    async () => ({
      data: (await tenants.listTenants()).map(presentTenant),
    }),
  );

  app.get(
    '/tenants/:slug',
    {
      schema: {
        ...common,
        operationId: 'getTenant',
        summary: 'Show a tenant, its credentials in force and its subscribers by status (of the mode asked for)',
        params: TenantParams,
        querystring: ModeQuery,
        response: { 200: TenantDetail, ...errors },
      },
    },
    async (req) => {
      const tenant = await tenantOr404(req.params.slug);
      const mode = modeOf(req);
      const spaceId = await spaceOr404(req.params.slug, mode);
      // The hmac secret is the tenant's; the keys and the signing secret, the mode's.
      const [own, spaceCredentials, counts, stripeApiKey] = await Promise.all([
        keys.listCredentials(tenant.id, now()),
        spaceId === tenant.id ? Promise.resolve([]) : keys.listCredentials(spaceId, now()),
        subscribers.countSubscribers(spaceId),
        presentStripeApiKey(opts.stripeApiKeys, spaceId),
      ]);
      const credentials =
        spaceId === tenant.id
          ? own
          : [
              ...own.filter((c) => c.kind === 'hmac_secret'),
              ...spaceCredentials.filter((c) => c.kind !== 'hmac_secret'),
            ];
      return {
        ...presentTenant(tenant),
        mode,
        stripe_webhook_secret_set: credentials.some((c) => c.kind === 'stripe_webhook_secret'),
        stripe_api_key: stripeApiKey,
        credentials: credentials.map((c) => ({
          kind: c.kind,
          created_at: c.createdAt.toISOString(),
          expires_at: c.expiresAt?.toISOString() ?? null,
        })),
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
      if (!(await tenants.deleteTenant(tenant.id))) throw new AppError('tenant_not_found');
      req.log.warn({ tenant: tenant.slug }, 'tenant deleted');
      return reply.code(204).send(null);
    },
  );

  app.patch(
    '/tenants/:slug',
    {
      schema: {
        ...common,
        operationId: 'updateTenant',
        summary: 'Update a tenant (a stripe_webhook_secret is set for the mode asked for)',
        params: TenantParams,
        querystring: ModeQuery,
        body: UpdateTenantBody,
        response: { 200: Tenant, ...errors },
      },
    },
    async (req) =>
      presentTenant(
        await updateTenant(tenants, req, req.params.slug, req.body, now(), opts.rotationOverlapS, modeOf(req)),
      ),
  );

  app.post(
    '/tenants/:slug/rotate',
    {
      schema: {
        ...common,
        operationId: 'rotateTenantKey',
        summary: 'Rotate the publishable key or the HMAC secret',
        description:
          'The keys replaced stay valid for DUNWALL_ROTATION_OVERLAP_S seconds. A publishable key is of the mode asked for (?mode=test: pk_test_); the HMAC secret is shared by both modes.',
        params: TenantParams,
        querystring: ModeQuery,
        body: RotateBody,
        response: { 200: RotatedTenant, ...errors },
      },
    },
    async (req) => {
      const tenant = await tenantOr404(req.params.slug);
      const at = now();
      const previousExpiresAt = new Date(at.getTime() + opts.rotationOverlapS * 1000).toISOString();
      if (req.body.key === 'publishable') {
        // A key of the mode asked for, on that mode's space.
        const mode = modeOf(req);
        const key = generatePublishableKey(mode === 'live');
        await keys.rotateCredential(
          await spaceOr404(req.params.slug, mode),
          'publishable_key',
          sha256(key).toString('hex'),
          opts.rotationOverlapS,
          at,
        );
        req.log.info({ tenant: tenant.slug, mode }, 'publishable key rotated');
        return { ...presentTenant(tenant), publishable_key: key, previous_expires_at: previousExpiresAt };
      }
      const secret = generateHmacSecret();
      await keys.rotateCredential(tenant.id, 'hmac_secret', secret, opts.rotationOverlapS, at);
      req.log.info({ tenant: tenant.slug }, 'hmac secret rotated');
      return { ...presentTenant(tenant), hmac_secret: secret, previous_expires_at: previousExpiresAt };
    },
  );
}
