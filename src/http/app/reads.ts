import type { App } from '../app-instance.js';
import { lookupRoutes } from '../lookup.js';
import { brandingRoutes } from '../routes/branding.js';
import { demoRoutes } from '../routes/demo.js';
import { healthRoutes } from '../routes/health.js';
import { linkRoutes } from '../routes/links.js';
import { packageRoutes } from '../routes/packages.js';
import { snippetRoutes } from '../routes/snippet.js';
import type { AppContext } from './context.js';

/** The public reads: health, the lookup (its slow path), the snippet, the packages, the branding, the demo, the pay and card links. */
export async function readRoutes(app: App, ctx: AppContext): Promise<void> {
  const { deps, store, model, now, limiter, answerer, logLookups } = ctx;
  await app.register(healthRoutes, {
    maintenance: store.maintenance,
    model,
    now,
    ...(deps.monotonicNow ? { monotonicNow: deps.monotonicNow } : {}),
    ...(deps.clockSkew ? { clockSkew: deps.clockSkew } : {}),
  });
  await app.register(lookupRoutes, { answerer, model, now, limiter, logLookups });
  await app.register(snippetRoutes, { snippet: deps.snippet ?? null });
  await app.register(packageRoutes, { packages: deps.packages ?? null, limiter });
  await app.register(brandingRoutes, { model, limiter });
  await app.register(demoRoutes, { demo: deps.demo ?? null, model });
  await app.register(linkRoutes, {
    links: store.links,
    stripe: ctx.stripeLinks,
    brandingOf: (spaceId) => model.tenantById(spaceId)?.branding ?? null,
    now,
    log: deps.logger || { warn() {} },
    limiter,
  });
}
