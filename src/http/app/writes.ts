import { DEFAULT_TIER } from '../../domain/types.js';
import { DEFAULT_DELIVERY_SETTINGS } from '../../downstream/index.js';
import type { App } from '../app-instance.js';
import { keyAuth, operatorAuth, requireScopes, tenantBySlug } from '../auth.js';
import { tenantResourceRoutes, tenantRoutes, tierRoutes } from '../routes/index.js';
import { statusFeedRoutes } from '../routes/statuses.js';
import { stripeIntakeRoutes } from '../routes/stripe-webhook.js';
import { stripeEventMetrics } from '../stripe-event-metrics.js';
import type { AppContext } from './context.js';
import { ModeParam, ModeQuery } from '../schemas.js';

const DEFAULT_ROTATION_OVERLAP_S = 86_400;

/** A route's query schema with the operator's `mode` beside its own parameters. */
function withMode(querystring: unknown): unknown {
  if (querystring === undefined) return ModeQuery;
  const qs = querystring as { type?: unknown; properties?: Record<string, unknown> };
  if (qs.type !== 'object' || qs.properties === undefined) return querystring;
  return { ...qs, properties: { ...qs.properties, mode: ModeParam } };
}

/** What the operator's and the tenant's routes of a tenant's resources share. */
function resourceOptions(ctx: AppContext) {
  return {
    store: ctx.store,
    model: ctx.model,
    now: ctx.now,
    rotationOverlapS: ctx.deps.rotationOverlapS ?? DEFAULT_ROTATION_OVERLAP_S,
    downstream: ctx.deps.downstream ?? DEFAULT_DELIVERY_SETTINGS,
    intake: ctx.deps.stripeIntake ?? null,
    stripeApi: ctx.stripeApi,
    cardExpiry: ctx.cardExpiry,
  };
}

/** The operator's API at /admin/v1 (the admin token, or a console session): tenants, tiers, a tenant's resources. */
async function operatorArea(app: App, ctx: AppContext): Promise<void> {
  const { store, now, limiter, sessions, adminTokenSha256, deps } = ctx;
  operatorAuth(app, { adminTokenSha256, limiter, sessions });
  const resources = resourceOptions(ctx);
  await tenantRoutes(app, {
    tenants: store.tenants,
    keys: store.keys,
    subscribers: store.subscribers,
    stripeApiKeys: store.stripeApiKeys,
    now,
    rotationOverlapS: resources.rotationOverlapS,
    defaultTier: deps.defaultTier ?? DEFAULT_TIER,
  });
  await tierRoutes(app, { tenants: store.tenants, now });
  await app.register(
    async (scoped: App) => {
      // Every route of a tenant's resources takes `?mode=live|test` (docs/test-mode.md).
      scoped.addHook('onRoute', (route) => {
        route.schema = { ...route.schema, querystring: withMode(route.schema?.querystring) };
      });
      tenantBySlug(scoped, async (slug, mode) => {
        const space = await store.tenants.spaceOf(slug, mode);
        return space === null ? null : { id: space.spaceId, slug, tenantId: space.tenantId, mode };
      });
      await tenantResourceRoutes(scoped, { audience: 'operator', ...resources });
    },
    { prefix: '/tenants/:slug' },
  );
}

/** The tenant's API at /v1 (one of its secret keys, or a console session): its resources and its status feed. */
async function tenantArea(app: App, ctx: AppContext): Promise<void> {
  const { deps, store, model, now, limiter, sessions } = ctx;
  keyAuth(app, {
    model,
    now,
    limiter,
    keyUsage: deps.keyUsage ?? null,
    keySightings: deps.keySightings ?? null,
    sessions,
  });
  requireScopes(app);
  await tenantResourceRoutes(app, { audience: 'tenant', ...resourceOptions(ctx) });
  await statusFeedRoutes(app, { feed: store.feed, model, now, ...deps.statusFeed });
}

/**
 * The routes that write: the Stripe intake, the operator's API and the tenant's. A write's
 * answer leaves once every worker's read model shows it (awaitWritesApplied, in
 * requestHooks), so that its writer's next lookup on this instance reads what it wrote.
 */
export async function writeRoutes(app: App, ctx: AppContext): Promise<void> {
  const { store, model, now, limiter, metrics, deps } = ctx;
  await app.register(async (writes: App) => {
    await writes.register(stripeIntakeRoutes, {
      stripe: store.stripe,
      notices: { store: store.stripe, cards: ctx.cardExpiry },
      model,
      now,
      limiter,
      intake: deps.stripeIntake ?? null,
      ...(metrics ? { metrics: stripeEventMetrics(metrics) } : {}),
    });
    await writes.register(async (admin: App) => operatorArea(admin, ctx), { prefix: '/admin/v1' });
    await writes.register(async (v1: App) => tenantArea(v1, ctx), { prefix: '/v1' });
  });
}
