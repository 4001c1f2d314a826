/**
 * Fastify (4 and 5): a plugin adding one hook, `onRequest` by default. Nothing of Fastify is
 * imported. The plugin carries `Symbol.for('skip-override')`, as `fastify-plugin` sets it,
 * so that its hook applies to the scope it is registered in, not to a scope of its own:
 * register it at the root to protect the whole app, or inside a `register(...)` to protect
 * that part only.
 */
import type { Dunwall } from '../types.js';
import { check, checkDunwall, compileOptions, pathOfTarget } from './guard.js';
import type { Decision, MiddlewareOptions, RequestFacts } from './guard.js';

/** What the hook reads of a request: Fastify's `FastifyRequest`. */
export interface FastifyLikeRequest {
  method: string;
  url: string;
  headers: Record<string, string | string[] | undefined>;
}

/** What the hook writes: Fastify's `FastifyReply`. */
export interface FastifyLikeReply {
  code(statusCode: number): FastifyLikeReply;
  header(name: string, value: string): FastifyLikeReply;
  send(payload?: string): FastifyLikeReply;
}

/** What the plugin uses of the instance it is registered on. */
export interface FastifyLikeInstance {
  // `any`: Fastify's own request and reply types, which this file does not import, are
  // what the hook is called with; the hook reads them through FastifyLike* only.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  addHook(name: 'onRequest', hook: (request: any, reply: any) => Promise<unknown>): unknown;
}

export interface DunwallFastifyOptions<
  Req extends FastifyLikeRequest = FastifyLikeRequest,
> extends MiddlewareOptions<Req> {
  dunwall: Dunwall;
  /**
   * The hook the check runs in: `onRequest` (the default: before the body is read), or
   * `preHandler`, when `customer()` needs what an authentication `preHandler` or the body
   * gives.
   */
  hook?: 'onRequest' | 'preHandler';
}

export type DunwallFastifyPlugin = (<Req extends FastifyLikeRequest = FastifyLikeRequest>(
  instance: FastifyLikeInstance,
  options: DunwallFastifyOptions<Req>,
) => Promise<void>) & {
  [key: symbol]: unknown;
};

function facts(request: FastifyLikeRequest): RequestFacts {
  return {
    method: request.method.toUpperCase(),
    path: pathOfTarget(request.url),
    header(name) {
      const value = request.headers[name];
      return Array.isArray(value) ? value.join(', ') : value;
    },
  };
}

function apply(decision: Decision, reply: FastifyLikeReply): FastifyLikeReply | undefined {
  if (decision.action === 'pass') return undefined;
  reply.code(decision.status);
  for (const [name, value] of Object.entries(decision.headers)) reply.header(name, value);
  return reply.send(decision.action === 'refuse' ? decision.body : undefined);
}

/**
 * `await app.register(dunwallFastify, { dunwall, customer: (req) => req.user?.stripeCustomerId })`.
 */
export const dunwallFastify: DunwallFastifyPlugin = Object.assign(
  async function dunwallFastify<Req extends FastifyLikeRequest>(
    instance: FastifyLikeInstance,
    options: DunwallFastifyOptions<Req>,
  ): Promise<void> {
    const copy = checkDunwall(options?.dunwall);
    const compiled = compileOptions(options);
    const hook = options.hook ?? 'onRequest';
    if (hook !== 'onRequest' && hook !== 'preHandler')
      throw new TypeError(`dunwall: options.hook is onRequest or preHandler (got ${JSON.stringify(hook)})`);
    // One signature for both names: each hook takes (request, reply) and may answer.
    instance.addHook(hook as 'onRequest', async (request: Req, reply: FastifyLikeReply) => {
      const decision = check(copy, compiled, request, facts(request));
      // Fastify: an async hook that sent a reply returns it, and the route does not run.
      return apply(decision instanceof Promise ? await decision : decision, reply);
    });
  },
  {
    [Symbol.for('skip-override')]: true,
    [Symbol.for('fastify.display-name')]: '@dunwall/node',
    [Symbol.for('plugin-meta')]: { name: '@dunwall/node', fastify: '>=4' },
  },
);
