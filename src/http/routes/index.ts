import type { ReadModel } from '../../readmodel/index.js';
import type { Store } from '../../store/index.js';
import type { DeliverySettings } from '../../downstream/index.js';
import type { App } from '../app-instance.js';
import type { StripeApiOptions } from '../../services/stripe-api.js';
import type { CardExpirySource } from '../../services/stripe-events.js';
import type { StripeIntake } from '../stripe-intake.js';
import type { Audience } from './common.js';
import { analyticsRoutes } from './analytics.js';
import { keyRoutes } from './keys.js';
import { settingsRoutes } from './settings.js';
import { stripeApiKeyRoutes } from './stripe-api-key.js';
import { stripeEventRoutes } from './stripe-events.js';
import { subscriberRoutes } from './subscribers.js';
import { tenantHealthRoutes } from './tenant-health.js';
import { downstreamEndpointRoutes } from './webhook-endpoints.js';

export { tenantRoutes } from './tenants.js';
export { tierRoutes } from './tiers.js';

export interface TenantResourceOptions {
  audience: Audience;
  /** The roles of the store the tenant's resources use. */
  store: Pick<Store, 'tenants' | 'subscribers' | 'keys' | 'stripeApiKeys' | 'analytics' | 'stripe' | 'downstream'>;
  model: ReadModel;
  now: () => number;
  rotationOverlapS: number;
  /** How the endpoints of downstream messages are checked. */
  downstream: Pick<DeliverySettings, 'allowHttpLoopback' | 'allowedNetworks'>;
  /** The Stripe intake counters the operator's replay adds to; null: not counted. */
  intake: StripeIntake | null;
  /** Where Stripe's API is, and the bound of a call (a Stripe API key is checked on set). */
  stripeApi: StripeApiOptions;
  /** Where an `invoice.upcoming` learns the default card for its notice; absent or null: not asked. */
  cardExpiry?: CardExpirySource | null;
}

/**
 * Every resource of one tenant, registered in a scope whose hooks have resolved the tenant
 * and the principal: under /admin/v1/tenants/:slug for the operator, under /v1 for the
 * tenant's own keys. The same route files serve both; the scope check tells them apart.
 */
export async function tenantResourceRoutes(app: App, opts: TenantResourceOptions): Promise<void> {
  const { audience, store, model, now, rotationOverlapS } = opts;
  const { tenants, subscribers, keys, stripeApiKeys, analytics, stripe, downstream } = store;
  await subscriberRoutes(app, { audience, subscribers, outbox: downstream.outbox, model, now });
  await settingsRoutes(app, { audience, tenants, keys, stripeApiKeys, now, rotationOverlapS });
  await stripeApiKeyRoutes(app, { audience, stripeApiKeys, keys, stripeApi: opts.stripeApi, now });
  await keyRoutes(app, { audience, tenants, keys, now, rotationOverlapS });
  await analyticsRoutes(app, { audience, analytics, now });
  await tenantHealthRoutes(app, { audience, stripe, keys, endpoints: downstream.endpoints, model, now });
  await downstreamEndpointRoutes(app, {
    audience,
    tenants,
    endpoints: downstream.endpoints,
    now: () => new Date(now()),
    rotationOverlapS,
    ...opts.downstream,
  });
  if (audience === 'operator')
    await stripeEventRoutes(app, {
      tenants,
      stripe,
      now,
      intake: opts.intake,
      notices: { store: stripe, cards: opts.cardExpiry ?? null },
    });
}
