import type { FastifyRequest } from 'fastify';
import { brandingProblem } from '../../domain/branding.js';
import { cardUpdateUrlProblem, originProblem } from '../../domain/validation.js';
import type { TenantRecord, TenantSettings, TenantStore } from '../../store/store.js';

type SettingsStore = Pick<TenantStore, 'getTenant' | 'updateTenant' | 'listCredentials'>;
import type { App } from '../app-instance.js';
import { AppError } from '../problems.js';
import { Settings, UpdateSettingsBody } from '../schemas.js';
import type { UpdateTenantBody } from '../schemas.js';
import { doc, ERRORS, invalid, paramsOf, tenantOf, tenantRecord } from './common.js';
import type { Audience } from './common.js';

/**
 * A tenant's own settings (CONTRACT.md section 7): what the tenant may change of itself,
 * for the tenant (`settings:write`) and the operator alike. Never its tier, suspension,
 * slug, mode or quota: those are the operator's, through PATCH /admin/v1/tenants/:slug.
 */
export interface SettingsRoutesOptions {
  audience: Audience;
  store: SettingsStore;
  now: () => number;
  rotationOverlapS: number;
}

/** The schema checked the shapes; the domain checks the links (https, no credentials) and origins. */
export function checkSettings(body: Pick<UpdateTenantBody, 'card_update_url' | 'branding' | 'allowed_origins'>): void {
  const url = body.card_update_url;
  const urlWhy = typeof url === 'string' ? cardUpdateUrlProblem(url) : null;
  if (urlWhy) throw invalid('card_update_url', urlWhy);
  if (body.branding !== undefined) {
    const why = brandingProblem(body.branding);
    if (why) throw new AppError('invalid_request', why);
  }
  body.allowed_origins?.forEach((origin, i) => {
    const why = originProblem(origin);
    if (why) throw invalid(`allowed_origins[${i}]`, why);
  });
}

/** The patch the store applies: only the fields given (a partial policy is merged by the store, in its transaction). */
export function settingsPatch(body: UpdateTenantBody): Partial<TenantSettings> {
  return {
    ...(body.policy !== undefined ? { policy: body.policy } : {}),
    ...(body.tier !== undefined ? { tier: body.tier } : {}),
    ...(body.card_update_url !== undefined ? { cardUpdateUrl: body.card_update_url } : {}),
    ...(body.hmac_required !== undefined ? { hmacRequired: body.hmac_required } : {}),
    ...(body.suspended !== undefined ? { suspended: body.suspended } : {}),
    ...(body.allowed_origins !== undefined ? { allowedOrigins: body.allowed_origins } : {}),
    ...(body.lookups_per_minute !== undefined ? { lookupsPerMinute: body.lookups_per_minute } : {}),
    ...(body.branding !== undefined ? { branding: body.branding } : {}),
    ...(body.livemode !== undefined ? { livemode: body.livemode } : {}),
  };
}

/**
 * Applies a tenant's update. A new Stripe signing secret replaces the old one the way
 * Stripe's own rolling does: both verify during the overlap, so that no event is refused
 * while the tenant switches.
 */
export async function updateTenant(
  store: SettingsStore,
  req: FastifyRequest,
  slug: string,
  body: UpdateTenantBody,
  at: Date,
  overlapS: number,
): Promise<TenantRecord> {
  checkSettings(body);
  const result = await store.updateTenant(
    slug,
    settingsPatch(body),
    at,
    body.stripe_webhook_secret === undefined ? undefined : { kind: 'stripe_webhook_secret', material: body.stripe_webhook_secret, overlapS },
  );
  if (!result.ok) {
    if (result.error === 'not_found') throw new AppError('tenant_not_found');
    throw invalid('tier', `no tier is named '${body.tier ?? ''}'`);
  }
  req.log.info({ tenant: slug, fields: Object.keys(body) }, 'tenant updated');
  return result.tenant;
}

export async function settingsRoutes(app: App, opts: SettingsRoutesOptions): Promise<void> {
  const { audience, store } = opts;
  const tag = 'settings';

  async function present(tenant: TenantRecord) {
    const credentials = await store.listCredentials(tenant.id, new Date(opts.now()));
    return {
      slug: tenant.slug,
      tier: tenant.tier,
      entitlements: tenant.entitlements,
      card_update_url: tenant.cardUpdateUrl,
      hmac_required: tenant.hmacRequired,
      allowed_origins: tenant.allowedOrigins,
      branding: tenant.branding,
      policy: tenant.policy,
      livemode: tenant.livemode,
      stripe_webhook_secret_set: credentials.some((c) => c.kind === 'stripe_webhook_secret'),
    };
  }

  app.get(
    '/settings',
    {
      config: { scope: 'settings:write' },
      schema: { ...doc(audience, 'getSettings', "The tenant's own settings", tag), params: paramsOf(audience, {}), response: { 200: Settings, ...ERRORS } },
    },
    async (req) => {
      return present(await tenantRecord(store, req));
    },
  );

  app.patch(
    '/settings',
    {
      config: { scope: 'settings:write' },
      schema: {
        ...doc(
          audience,
          'updateSettings',
          "Change the tenant's own settings: branding, policy, card update URL, origins, hmac requirement, Stripe signing secret",
          tag,
        ),
        params: paramsOf(audience, {}),
        body: UpdateSettingsBody,
        response: { 200: Settings, ...ERRORS },
      },
    },
    async (req) => present(await updateTenant(store, req, tenantOf(req).slug, req.body, new Date(opts.now()), opts.rotationOverlapS)),
  );
}
