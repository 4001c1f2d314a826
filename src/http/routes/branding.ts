import { Type } from 'typebox';
import type { App } from '../app-instance.js';
import { brandingTag, isValidSlug } from '../../domain/lookup.js';
import type { ReadModel } from '../../readmodel/index.js';
import { ifNoneMatchHits } from '../conditional.js';
import { guardAddress } from '../rate-limit.js';
import type { RateLimiter } from '../rate-limit.js';
import { Branding, ProblemRef } from '../schemas.js';

/** Browsers and CDNs keep the branding this long; a change reaches pages within it. */
export const BRANDING_MAX_AGE_S = 300;
const EMPTY = Buffer.from('{}');
const EMPTY_ETAG = brandingTag(EMPTY);

/**
 * `GET /api/branding/:tenantSlug`: the tenant's branding for the snippet, public and
 * cacheable, from the read model (no query). Any other slug gets the empty branding, the
 * same answer as a tenant that set none: this route tells nobody which tenants exist.
 */
export async function brandingRoutes(app: App, opts: { model: ReadModel; limiter: RateLimiter | null }): Promise<void> {
  const { model, limiter } = opts;
  app.get(
    '/api/branding/:tenantSlug',
    {
      ...(limiter ? { onRequest: guardAddress(limiter, 'ip') } : {}),
      schema: {
        operationId: 'getBranding',
        summary: "A tenant's branding for the snippet (texts, colors, logo, links); {} when none",
        tags: ['lookup'],
        security: [],
        params: Type.Object({ tenantSlug: Type.String() }),
        response: { 200: Branding, 304: Type.Null({ description: 'Not modified (If-None-Match)' }), 429: ProblemRef },
      },
      validatorCompiler: () => () => true,
    },
    async (req, reply) => {
      const slug = (req.params as { tenantSlug: string }).tenantSlug;
      const tenant = isValidSlug(slug) ? model.tenant(slug) : null;
      const body = tenant?.brandingBody ?? EMPTY;
      const etag = tenant?.brandingEtag ?? EMPTY_ETAG;
      reply
        .header('access-control-allow-origin', '*')
        .header('cache-control', `public, max-age=${BRANDING_MAX_AGE_S}`)
        .header('etag', etag);
      if (ifNoneMatchHits(req.headers['if-none-match'], etag)) return reply.code(304).send(null);
      // Bytes serialised when the tenant was loaded: sent as they are, not through the schema's serializer.
      return reply.header('content-type', 'application/json; charset=utf-8').send(body as never);
    },
  );
}
