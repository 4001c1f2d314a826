import { Type } from 'typebox';
import type { App } from '../app-instance.js';
import { ifNoneMatchHits } from '../conditional.js';
import type { PackageTarballs } from '../package-tarballs.js';
import { sendProblem } from '../problems.js';
import { guardAddress } from '../rate-limit.js';
import type { RateLimiter } from '../rate-limit.js';
import { ProblemRef } from '../schemas.js';

/**
 * The URL names no version, so a release's new tarball must reach `npm install` soon: five
 * minutes of cache, then a revalidation that the ETag makes a 304.
 */
export const PACKAGES_CACHE_CONTROL = 'public, max-age=300';

export interface PackageRouteOptions {
  /** The tarballs read at start-up, by file name; null: none were built. */
  packages: PackageTarballs | null;
  limiter: RateLimiter | null;
}

/**
 * `GET /packages/:file`: an npm package of this service (`client.tgz`, `node.tgz`...) at the
 * service's own version, for `npm install https://<dunwall>/packages/client.tgz` until the
 * packages are on a registry. The name is looked up among the tarballs read at start-up;
 * anything else (`../package.json`, an encoded slash, an unknown name) is a 404, never a path.
 */
export async function packageRoutes(app: App, opts: PackageRouteOptions): Promise<void> {
  const { packages, limiter } = opts;
  const served = packages === null ? [] : [...packages.keys()].sort();
  const unknown =
    served.length === 0
      ? 'No package tarball is built here (the service runs from sources, or its dist/packages is empty): npm run build packs them.'
      : `No such package tarball; this service has ${served.map((f) => `/packages/${f}`).join(', ')}.`;
  app.get(
    '/packages/:file',
    {
      ...(limiter ? { onRequest: guardAddress(limiter, 'ip') } : {}),
      schema: {
        operationId: 'getPackageTarball',
        summary: "An npm package of this service's own version, as a tarball for npm install",
        description:
          'Until the packages are on a registry: `npm install https://<your-dunwall>/packages/client.tgz` (also `node.tgz`, and ' +
          "every other package this release holds). The version is always the service's. Cached 5 minutes, then revalidated with the ETag.",
        tags: ['packages'],
        security: [],
        params: Type.Object({
          file: Type.String({
            pattern: '^[a-z0-9][a-z0-9-]{0,62}\\.tgz$',
            description: "The package's folder name and .tgz",
            examples: ['client.tgz'],
          }),
        }),
        response: {
          200: {
            description: 'The tarball (`npm pack` of the package)',
            content: { 'application/gzip': { schema: Type.String({ contentMediaType: 'application/gzip' }) } },
          },
          304: Type.Null({ description: 'Not modified (If-None-Match)' }),
          404: ProblemRef,
          429: ProblemRef,
        },
      },
      // Looked up in the map below: a name that is not there is a 404, not a validation error.
      validatorCompiler: () => () => true,
    },
    async (req, reply) => {
      const file = (req.params as { file: string }).file;
      const tarball = packages?.get(file);
      if (tarball === undefined) return sendProblem(reply, 'not_found', unknown);
      // A 304 carries the same fields as the 200 (a cache refreshes its copy's from them).
      reply
        .header('content-type', 'application/gzip')
        .header('cache-control', PACKAGES_CACHE_CONTROL)
        .header('etag', tarball.etag)
        .header('x-content-type-options', 'nosniff');
      // Bytes, sent as they are: the schema's string type only documents them. A 304 is given
      // them too, so that its Content-Length is the 200's (RFC 9110, 8.6); Node sends no body
      // with a 304, and Fastify's HEAD route needs a payload to measure.
      const status = ifNoneMatchHits(req.headers['if-none-match'], tarball.etag) ? 304 : 200;
      return reply.code(status).send(tarball.body as never);
    },
  );
}
