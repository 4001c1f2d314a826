import type { FastifyRequest } from 'fastify';
import { brandingProblem } from '../../domain/branding.js';
import type { Mode } from '../../domain/types.js';
import { cardUpdateUrlProblem, originProblem } from '../../domain/validation.js';
import type {
  CredentialActor,
  CredentialChange,
  KeyStore,
  StripeApiKeyStore,
  TenantRecord,
  TenantSettings,
  TenantStore,
} from '../../store/index.js';

type SettingsTenants = Pick<TenantStore, 'getTenant' | 'updateTenant'>;
import type { App } from '../app-instance.js';
import { holds } from '../principal.js';
import type { Principal } from '../principal.js';
import { AppError } from '../problems.js';
import {
  Settings,
  STRIPE_SECRET_CHANGES_SHOWN,
  StripeWebhookSecretBody,
  StripeWebhookSecretState,
  UpdateSettingsBody,
} from '../schemas.js';
import type { UpdateTenantBody } from '../schemas.js';
import { doc, ERRORS, invalid, paramsOf, presentStripeApiKey, tenantOf, tenantRecord } from './common.js';
import type { Audience } from './common.js';

/**
 * A tenant's own settings (docs/reference.md#keys-and-scopes): what the tenant may change of itself,
 * for the tenant (`settings:write`) and the operator alike. Never its tier, suspension,
 * slug, mode or quota: those are the operator's, through PATCH /admin/v1/tenants/:slug.
 * The Stripe webhook signing secret decides statuses as an override does: it needs
 * `stripe:write` (PUT /settings/stripe-webhook-secret, or the field on PATCH with both
 * scopes), and each change is recorded with the key or the operator that made it.
 */
export interface SettingsRoutesOptions {
  audience: Audience;
  tenants: SettingsTenants;
  keys: Pick<KeyStore, 'listCredentials' | 'credentialChanges'>;
  stripeApiKeys: Pick<StripeApiKeyStore, 'stripeApiKeyOf'>;
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

/** Who a change is recorded as made by: the operator, or the request's secret key. */
export function actorOf(principal: Principal | null): CredentialActor {
  return principal?.kind === 'key' ? { kind: 'key', keyId: principal.keyId } : { kind: 'operator' };
}

/** A change of the signing secret as the API shows it: the key by id, prefix and name, or the operator. */
export function presentCredentialChange(c: CredentialChange) {
  return c.by.kind === 'key'
    ? { at: c.at.toISOString(), by: 'key' as const, key: { id: c.by.id, prefix: c.by.prefix, name: c.by.name } }
    : { at: c.at.toISOString(), by: 'operator' as const, key: null };
}

/**
 * Applies a tenant's update. Setting the Stripe signing secret needs `stripe:write` besides
 * the route's scope (the operator holds both): whoever holds it can sign events that lock a
 * customer out or let one in. A new Stripe signing secret replaces the old one the way
 * Stripe's own rolling does: both verify during the overlap, so that no event is refused
 * while the tenant switches.
 */
export async function updateTenant(
  tenants: Pick<TenantStore, 'updateTenant'>,
  req: FastifyRequest,
  slug: string,
  body: UpdateTenantBody,
  at: Date,
  overlapS: number,
  mode: Mode = 'live',
): Promise<TenantRecord> {
  if (body.stripe_webhook_secret !== undefined && !holds(req.principal, 'stripe:write'))
    throw new AppError('insufficient_scope', 'Setting stripe_webhook_secret needs the scope stripe:write.');
  checkSettings(body);
  const result = await tenants.updateTenant(
    slug,
    settingsPatch(body),
    at,
    body.stripe_webhook_secret === undefined
      ? undefined
      : {
          kind: 'stripe_webhook_secret',
          material: body.stripe_webhook_secret,
          overlapS,
          by: actorOf(req.principal),
          // A signing secret is its mode's (docs/test-mode.md).
          mode,
        },
  );
  if (!result.ok) {
    if (result.error === 'not_found') throw new AppError('tenant_not_found');
    throw invalid('tier', `no tier is named '${body.tier ?? ''}'`);
  }
  const by = req.principal?.kind === 'key' ? req.principal.keyId : 'operator';
  req.log.info(
    { tenant: slug, fields: Object.keys(body), ...(body.stripe_webhook_secret !== undefined ? { by } : {}) },
    'tenant updated',
  );
  return result.tenant;
}

export async function settingsRoutes(app: App, opts: SettingsRoutesOptions): Promise<void> {
  const { audience, tenants, keys } = opts;
  const tag = 'settings';

  /** The tenant's settings; the signing secret, of the request's mode's space. */
  async function present(tenant: TenantRecord, spaceId: number) {
    const credentials = await keys.listCredentials(spaceId, new Date(opts.now()));
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
      stripe_api_key: await presentStripeApiKey(opts.stripeApiKeys, tenant.id),
    };
  }

  app.get(
    '/settings',
    {
      config: { scope: 'settings:write' },
      schema: {
        ...doc(audience, 'getSettings', "The tenant's own settings", tag),
        params: paramsOf(audience, {}),
        response: { 200: Settings, ...ERRORS },
      },
    },
    async (req) => {
      return present(await tenantRecord(tenants, req), tenantOf(req).id);
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
    async (req) =>
      present(
        await updateTenant(
          tenants,
          req,
          tenantOf(req).slug,
          req.body,
          new Date(opts.now()),
          opts.rotationOverlapS,
          tenantOf(req).mode,
        ),
        tenantOf(req).id,
      ),
  );

  app.put(
    '/settings/stripe-webhook-secret',
    {
      config: { scope: 'stripe:write' },
      schema: {
        ...doc(
          audience,
          'setStripeWebhookSecret',
          'Set the Stripe webhook signing secret (stripe:write): the one it replaces keeps verifying for the overlap; the change is recorded with the key that made it',
          tag,
        ),
        params: paramsOf(audience, {}),
        body: StripeWebhookSecretBody,
        response: { 200: StripeWebhookSecretState, ...ERRORS },
      },
    },
    async (req) => {
      const at = new Date(opts.now());
      await updateTenant(
        tenants,
        req,
        tenantOf(req).slug,
        { stripe_webhook_secret: req.body.secret },
        at,
        opts.rotationOverlapS,
        tenantOf(req).mode,
      );
      const spaceId = tenantOf(req).id;
      const credentials = await keys.listCredentials(spaceId, at);
      const replaced = credentials.find((c) => c.kind === 'stripe_webhook_secret' && c.expiresAt !== null);
      const changes = await keys.credentialChanges(spaceId, 'stripe_webhook_secret', STRIPE_SECRET_CHANGES_SHOWN);
      return {
        stripe_webhook_secret_set: true,
        previous_expires_at: replaced?.expiresAt?.toISOString() ?? null,
        changes: changes.map(presentCredentialChange),
      };
    },
  );
}
