/**
 * Hono: a middleware `(c, next)`, on every runtime Hono runs on. Nothing of Hono is imported:
 * the context is read through `c.req` and a refusal is a plain `Response`, which Hono sends
 * in place of the route's.
 */
import type { Dunwall } from '../types.js';
import { check, checkDunwall, compileOptions } from './guard.js';
import type { Decision, MiddlewareOptions, RequestFacts } from './guard.js';
import { toResponse } from './fetch.js';

/** What the middleware reads of Hono's `Context`. */
export interface HonoLikeContext {
  req: {
    method: string;
    /** The path, without the query string. */
    path: string;
    header(name: string): string | undefined;
  };
}

export type HonoMiddleware<C> = (c: C, next: () => Promise<void>) => Promise<Response | undefined>;

function facts(c: HonoLikeContext): RequestFacts {
  return { method: c.req.method.toUpperCase(), path: c.req.path, header: (name) => c.req.header(name) };
}

/**
 * `app.use(dunwallHono(dunwall, { customer: (c) => c.get('session')?.stripeCustomerId }))`:
 * after your sign-in middleware, before the routes to protect.
 */
export function dunwallHono<C extends HonoLikeContext = HonoLikeContext>(
  dunwall: Dunwall,
  options: MiddlewareOptions<C>,
): HonoMiddleware<C> {
  const copy = checkDunwall(dunwall);
  const compiled = compileOptions(options);
  return async (c, next) => {
    const pending = check(copy, compiled, c, facts(c));
    const decision: Decision = pending instanceof Promise ? await pending : pending;
    if (decision.action === 'pass') {
      await next();
      return undefined;
    }
    return toResponse(decision);
  };
}
