import swagger from '@fastify/swagger';
import pkg from '../../../package.json' with { type: 'json' };
import type { App } from '../app-instance.js';
import { Problem } from '../schemas.js';

/** The OpenAPI document's head (title, tags, security schemes); the routes' schemas fill its paths. */
export async function apiDocument(app: App): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Dunwall',
        version: pkg.version,
        description:
          'Billing enforcement status of Stripe-billed subscribers. Every answer carries `X-Request-Id`; rate-limited ' +
          'answers carry the IETF `RateLimit` and `RateLimit-Policy` fields, and a 429 or 503 a `Retry-After` (seconds).',
        license: { name: 'MIT', identifier: 'MIT' },
      },
      // The instance that serves this document.
      servers: [{ url: '/', description: 'This Dunwall instance' }],
      tags: [
        { name: 'lookup', description: "A subscriber's status, for the tenant's pages, apps and backend" },
        { name: 'webhooks', description: "The tenant's Stripe events" },
        { name: 'admin', description: 'The operator' },
        {
          name: 'packages',
          description: "This service's npm packages at its own version, as tarballs to install from",
        },
        {
          name: 'tenant',
          description: "A tenant's own API (/v1), with one of its secret keys: the tenant is the key's",
        },
        {
          name: 'links',
          description:
            "A customer's pay and card links through this service: opened, they go to Stripe's current page (docs/links.md)",
        },
        {
          name: 'downstream-webhooks',
          description:
            "A tenant's downstream webhook endpoints: status changes POSTed to its backend, signed (docs/webhooks.md)",
        },
      ],
      components: {
        securitySchemes: {
          publishableKey: { type: 'http', scheme: 'bearer', description: "The tenant's publishable key" },
          adminToken: { type: 'http', scheme: 'bearer', description: 'DUNWALL_ADMIN_TOKEN' },
          secretKey: {
            type: 'http',
            scheme: 'bearer',
            description: "A tenant's secret key (sk_live_... or sk_test_...), from a server only",
          },
        },
      },
    },
  });
  app.addSchema(Problem);
}
