import type { FastifyRequest } from 'fastify';
import { stripeApiKeyForm, stripeApiKeyPrefix } from '../../domain/stripe/api-key.js';
import type { Mode } from '../../domain/types.js';
import { checkStripeApiKey } from '../../services/stripe-api.js';
import type { StripeApiOptions } from '../../services/stripe-api.js';
import type { KeyStore, StripeApiKeyStore, TenantRecord, TenantStore } from '../../store/index.js';
import type { App } from '../app-instance.js';
import { AppError } from '../problems.js';
import { ModeQuery, STRIPE_SECRET_CHANGES_SHOWN, StripeApiKeyBody, StripeApiKeyState } from '../schemas.js';
import { doc, ERRORS, invalid, paramsOf, presentStripeApiKey, tenantOf } from './common.js';
import type { Audience } from './common.js';
import { actorOf, presentCredentialChange } from './settings.js';

/**
 * The tenant's Stripe API key, per mode (docs/links.md, "The tenant's Stripe API key"): what
 * Dunwall asks Stripe with for an invoice's current page or a Customer Portal session. The
 * operator's `PUT /admin/v1/tenants/:slug/stripe-api-key?mode=`, the tenant's
 * `PUT /v1/settings/stripe-api-key` (`stripe:write`: the key reaches the tenant's Stripe
 * account, as the signing secret does), and their `DELETE`. A key is checked against Stripe
 * before it is stored (the permissions a restricted key needs, each named when missing); when
 * Stripe cannot say, nothing is stored. It is sealed at rest and never shown again: only its
 * prefix and date. Each change is recorded with the key or the operator that made it.
 */
export interface StripeApiKeyRoutesOptions {
  audience: Audience;
  tenants: Pick<TenantStore, 'getTenant'>;
  stripeApiKeys: Pick<StripeApiKeyStore, 'setStripeApiKey' | 'deleteStripeApiKey' | 'stripeApiKeyOf'>;
  keys: Pick<KeyStore, 'credentialChanges'>;
  /** Where Stripe's API is and how long a call may take. */
  stripeApi: StripeApiOptions;
  now: () => number;
}

/** The mode a tenant row's data is of, before a tenant holds both (its `livemode`: false is test). */
function rowMode(tenant: Pick<TenantRecord, 'livemode'>): Mode {
  return tenant.livemode === false ? 'test' : 'live';
}

/**
 * The settings row and the data space of a tenant's mode; null: no such tenant, or no such
 * mode. Replaced by the tenants role's spaceOf once modes land: until then a tenant row is
 * one space, of its own mode.
 */
export async function spaceOf(
  tenants: Pick<TenantStore, 'getTenant'>,
  slug: string,
  mode: Mode,
): Promise<{ tenantId: number; spaceId: number } | null> {
  const tenant = await tenants.getTenant(slug);
  if (tenant === null || rowMode(tenant) !== mode) return null;
  return { tenantId: tenant.id, spaceId: tenant.id };
}

/**
 * The mode a request addresses: the operator's `?mode=` (default live); a secret key's own
 * mode for the tenant (until modes land, its tenant row's).
 */
async function requestMode(
  req: FastifyRequest,
  tenants: Pick<TenantStore, 'getTenant'>,
  audience: Audience,
): Promise<Mode> {
  if (audience === 'operator') return (req.query as { mode?: Mode }).mode ?? 'live';
  const tenant = await tenants.getTenant(tenantOf(req).slug);
  if (tenant === null) throw new AppError('tenant_not_found');
  return rowMode(tenant);
}

export async function stripeApiKeyRoutes(app: App, opts: StripeApiKeyRoutesOptions): Promise<void> {
  const { audience, tenants, stripeApiKeys, keys } = opts;
  const path = audience === 'operator' ? '/stripe-api-key' : '/settings/stripe-api-key';
  const tag = 'settings';
  const querystring = audience === 'operator' ? { querystring: ModeQuery } : {};

  /** The space the request addresses: 400 when the tenant has no such mode. */
  async function addressed(req: FastifyRequest): Promise<{ mode: Mode; spaceId: number }> {
    const mode = await requestMode(req, tenants, audience);
    const space = await spaceOf(tenants, tenantOf(req).slug, mode);
    if (space === null) {
      if ((await tenants.getTenant(tenantOf(req).slug)) === null) throw new AppError('tenant_not_found');
      throw invalid('mode', `the tenant has no ${mode} mode`);
    }
    return { mode, spaceId: space.spaceId };
  }

  async function state(mode: Mode, spaceId: number) {
    const changes = await keys.credentialChanges(spaceId, 'stripe_api_key', STRIPE_SECRET_CHANGES_SHOWN);
    return {
      mode,
      stripe_api_key: await presentStripeApiKey(stripeApiKeys, spaceId),
      changes: changes.map(presentCredentialChange),
    };
  }

  app.put(
    path,
    {
      config: { scope: 'stripe:write' },
      schema: {
        ...doc(
          audience,
          'setStripeApiKey',
          'Set the Stripe API key of a mode (stripe:write): checked against Stripe first, stored sealed, shown again only by its prefix',
          tag,
        ),
        params: paramsOf(audience, {}),
        ...querystring,
        body: StripeApiKeyBody,
        response: { 200: StripeApiKeyState, 502: ERRORS[503], ...ERRORS },
      },
    },
    async (req) => {
      const key = req.body.key;
      const form = stripeApiKeyForm(key);
      if (form === null) throw invalid('key', 'must be a Stripe restricted key (rk_...) or secret key (sk_...)');
      const { mode, spaceId } = await addressed(req);
      if (form.mode !== mode)
        throw new AppError(
          'stripe_key_mode_mismatch',
          `The key is a ${form.mode} key (${form.kind === 'restricted' ? 'rk' : 'sk'}_${form.mode}_...) and the mode addressed is ${mode}: nothing was stored.`,
        );
      const check = await checkStripeApiKey(opts.stripeApi, key);
      if (!check.ok) {
        req.log.warn({ tenant: tenantOf(req).slug, mode, problem: check.problem }, 'stripe api key refused');
        switch (check.problem) {
          case 'invalid':
            throw new AppError('stripe_key_invalid');
          case 'permission':
            throw new AppError(
              'stripe_key_permission',
              `The restricted key lacks ${check.missing.join(', ')}: give it read on Invoices, Customers and Subscriptions and write on Customer portal. Nothing was stored.`,
            );
          case 'portal':
            throw new AppError(
              'stripe_portal_not_ready',
              `Stripe refused a Customer Portal session: ${check.message} Nothing was stored.`,
            );
          case 'unreachable':
            throw new AppError(
              'stripe_unreachable',
              check.why === 'timeout'
                ? `Stripe did not answer within ${opts.stripeApi.timeoutMs} ms: nothing was stored; retry later.`
                : check.why === 'rate_limited'
                  ? 'Stripe is rate limiting this account: nothing was stored; retry later.'
                  : 'Stripe could not be reached: nothing was stored; retry later.',
            );
          case 'stripe_error':
            throw new AppError(
              'stripe_error',
              `Stripe answered ${check.status} while the key was checked: nothing was stored; retry later.`,
            );
        }
      }
      const at = new Date(opts.now());
      if (!(await stripeApiKeys.setStripeApiKey(spaceId, key, stripeApiKeyPrefix(key), at, actorOf(req.principal))))
        throw new AppError('tenant_not_found');
      const by = req.principal?.kind === 'key' ? req.principal.keyId : 'operator';
      req.log.info({ tenant: tenantOf(req).slug, mode, by }, 'stripe api key set');
      return state(mode, spaceId);
    },
  );

  app.delete(
    path,
    {
      config: { scope: 'stripe:write' },
      schema: {
        ...doc(
          audience,
          'deleteStripeApiKey',
          "Remove the Stripe API key of a mode (stripe:write): pay and card links fall back to Stripe's stored pages",
          tag,
        ),
        params: paramsOf(audience, {}),
        ...querystring,
        response: { 200: StripeApiKeyState, ...ERRORS },
      },
    },
    async (req) => {
      const { mode, spaceId } = await addressed(req);
      const removed = await stripeApiKeys.deleteStripeApiKey(spaceId, new Date(opts.now()), actorOf(req.principal));
      if (removed) {
        const by = req.principal?.kind === 'key' ? req.principal.keyId : 'operator';
        req.log.info({ tenant: tenantOf(req).slug, mode, by }, 'stripe api key removed');
      }
      return state(mode, spaceId);
    },
  );
}
