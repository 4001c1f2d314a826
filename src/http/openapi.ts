import { buildApp } from './app.js';
import type { ReadModel } from '../readmodel/index.js';
import type { Store } from '../store/index.js';

/**
 * Stands in for the store (and its roles) and the read model while documenting: the routes
 * are built, never called. Any property is another stand-in; calling one throws.
 */
function inert<T extends object>(name: string): T {
  return new Proxy(() => {}, {
    get: (_target, prop) => (prop === 'then' ? undefined : inert(`${name}.${String(prop)}`)),
    apply: () => {
      throw new Error(`${name} called while building the OpenAPI document`);
    },
  }) as unknown as T;
}

/**
 * The OpenAPI document, as `/openapi.json` serves it: made from the routes' schemas by an
 * app built with no store (`npm run build` writes it to `dist/openapi.json`).
 */
export async function openApiDocument(): Promise<Record<string, unknown>> {
  const app = await buildApp({
    store: inert<Store>('store'),
    model: inert<ReadModel>('model'),
    logger: false,
    adminToken: null,
  });
  try {
    await app.ready();
    return app.swagger() as unknown as Record<string, unknown>;
  } finally {
    await app.close();
  }
}
