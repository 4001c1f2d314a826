import { utcDayStart } from '../../domain/stripe/intake.js';
import type { ReadModel } from '../../readmodel/index.js';
import type {
  DeliveryHealth,
  EndpointStore,
  KeyStore,
  SecretKeyRecord,
  StripeIntakeSummary,
  StripeStore,
} from '../../store/index.js';
import type { App } from '../app-instance.js';
import { STRIPE_SECRET_CHANGES_SHOWN, TENANT_HEALTH_DAYS, TenantHealth } from '../schemas.js';
import { doc, ERRORS, paramsOf, tenantOf } from './common.js';
import type { Audience } from './common.js';
import { presentCredentialChange } from './settings.js';

/**
 * A tenant's health (docs/tenant-api.md), for the operator (/admin/v1/tenants/:slug/health)
 * and the tenant (/v1/health, with `subscribers:read`): what reached its Stripe webhook over
 * the last 7 UTC days (the intake counters, migration 016), how far behind the store the
 * answering process's read model may be, the state of its downstream deliveries, who last
 * changed its Stripe signing secret (the operator, or which key), and the secret keys seen
 * from a browser (to rotate).
 */
export interface TenantHealthRoutesOptions {
  audience: Audience;
  stripe: Pick<StripeStore, 'stripeIntake'>;
  keys: Pick<KeyStore, 'listSecretKeys' | 'listCredentials' | 'credentialChanges'>;
  endpoints: Pick<EndpointStore, 'deliveryHealth'>;
  model: Pick<ReadModel, 'serving' | 'lagMs'>;
  now: () => number;
}

const DAY_MS = 86_400_000;
const iso = (d: Date | null): string | null => (d === null ? null : d.toISOString());
const later = (a: Date | null, b: Date | null): Date | null => (a === null ? b : b === null || a >= b ? a : b);

function presentStripe(since: Date, s: StripeIntakeSummary) {
  const totals = { received: 0, refused_signature: 0, refused_livemode: 0, replayed: 0 };
  const days: { day: string; received: number; refused_signature: number; refused_livemode: number }[] = [];
  for (const d of s.days) {
    for (const kind of Object.keys(totals) as (keyof typeof totals)[]) totals[kind] += d.counts[kind];
    const { received, refused_signature, refused_livemode } = d.counts;
    if (received + refused_signature + refused_livemode > 0)
      days.push({ day: d.day, received, refused_signature, refused_livemode });
  }
  return {
    since: since.toISOString(),
    ...totals,
    last_received_at: iso(s.lastAt.received),
    last_refused_at: iso(later(s.lastAt.refused_signature, s.lastAt.refused_livemode)),
    last_sync_at: iso(s.lastAt.replayed),
    days,
  };
}

function presentDeliveries(d: DeliveryHealth) {
  return {
    pending: d.pending,
    oldest_pending_at: iso(d.oldestPendingAt),
    failed_7d: d.failed,
    endpoints: d.endpoints,
    disabled_endpoints: d.disabledEndpoints,
  };
}

/** The keys seen in a browser since their last rotation, the latest first. */
function presentSeenKeys(keys: readonly SecretKeyRecord[]) {
  return keys
    .flatMap((k) =>
      k.seenInBrowserAt === null ? [] : [{ id: k.id, name: k.name, prefix: k.prefix, at: k.seenInBrowserAt }],
    )
    .sort((a, b) => b.at.getTime() - a.at.getTime())
    .map(({ at, ...k }) => ({ ...k, seen_in_browser_at: at.toISOString() }));
}

export async function tenantHealthRoutes(app: App, opts: TenantHealthRoutesOptions): Promise<void> {
  const { audience, stripe, keys, endpoints, model } = opts;
  app.get(
    '/health',
    {
      config: { scope: 'subscribers:read' },
      schema: {
        ...doc(
          audience,
          'getHealth',
          "The tenant's health: Stripe deliveries received and refused over 7 days, who changed the Stripe signing secret, the read model's lag, downstream deliveries, secret keys seen from a browser",
          'health',
        ),
        params: paramsOf(audience, {}),
        response: { 200: TenantHealth, ...ERRORS },
      },
    },
    async (req) => {
      const nowMs = opts.now();
      const tenantId = tenantOf(req).id;
      const since = utcDayStart(nowMs, TENANT_HEALTH_DAYS - 1);
      const intake = await stripe.stripeIntake(tenantId, since);
      const waiting = await endpoints.deliveryHealth(tenantId, new Date(nowMs - TENANT_HEALTH_DAYS * DAY_MS));
      const secretKeys = await keys.listSecretKeys(tenantId);
      const credentials = await keys.listCredentials(tenantId, new Date(nowMs));
      const changes = await keys.credentialChanges(tenantId, 'stripe_webhook_secret', STRIPE_SECRET_CHANGES_SHOWN);
      return {
        stripe: presentStripe(since, intake),
        stripe_webhook_secret: {
          set: credentials.some((c) => c.kind === 'stripe_webhook_secret'),
          changes: changes.map(presentCredentialChange),
        },
        read_model: { serving: model.serving(nowMs), lag_ms: model.lagMs(nowMs) },
        deliveries: presentDeliveries(waiting),
        secret_keys: { seen_in_browser: presentSeenKeys(secretKeys) },
        at: new Date(nowMs).toISOString(),
      };
    },
  );
}
