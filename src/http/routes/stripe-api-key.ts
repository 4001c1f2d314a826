import type { FastifyRequest } from 'fastify';
import { stripeApiKeyForm, stripeApiKeyPrefix } from '../../domain/stripe/api-key.js';
import type { Mode } from '../../domain/types.js';
import { checkStripeApiKey } from '../../services/stripe-api.js';
import type { StripeApiOptions } from '../../services/stripe-api.js';
import type { KeyStore, StripeApiKeyStore } from '../../store/index.js';
import type { App } from '../app-instance.js';
import { AppError } from '../problems.js';
import { STRIPE_SECRET_CHANGES_SHOWN, StripeApiKeyBody, StripeApiKeyState } from '../schemas.js';
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
  stripeApiKeys: Pick<StripeApiKeyStore, 'setStripeApiKey' | 'deleteStripeApiKey' | 'stripeApiKeyOf'>;
  keys: Pick<KeyStore, 'credentialChanges'>;
  /** Where Stripe's API is and how long a call may take. */
  stripeApi: StripeApiOptions;
  now: () => number;
}

export async function stripeApiKeyRoutes(app: App, opts: StripeApiKeyRoutesOptions): Promise<void> {
  const { audience, stripeApiKeys, keys } = opts;
  const path = audience === 'operator' ? '/stripe-api-key' : '/settings/stripe-api-key';
  const tag = 'settings';

  /** The space the request addresses: the operator's `?mode=` (default live), a secret key's own mode. */
  function addressed(req: FastifyRequest): { mode: Mode; spaceId: number } {
    const space = tenantOf(req);
    return { mode: space.mode, spaceId: space.id };
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
        body: StripeApiKeyBody,
        response: { 200: StripeApiKeyState, 502: ERRORS[503], ...ERRORS },
      },
    },
    async (req) => {
      const key = req.body.key;
      const form = stripeApiKeyForm(key);
      if (form === null) throw invalid('key', 'must be a Stripe restricted key (rk_...) or secret key (sk_...)');
      const { mode, spaceId } = addressed(req);
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
        response: { 200: StripeApiKeyState, ...ERRORS },
      },
    },
    async (req) => {
      const { mode, spaceId } = addressed(req);
      const removed = await stripeApiKeys.deleteStripeApiKey(spaceId, new Date(opts.now()), actorOf(req.principal));
      if (removed) {
        const by = req.principal?.kind === 'key' ? req.principal.keyId : 'operator';
        req.log.info({ tenant: tenantOf(req).slug, mode, by }, 'stripe api key removed');
      }
      return state(mode, spaceId);
    },
  );
}
