/**
 * The Fetch API (`Request` in, `Response` out): Next.js route handlers and `middleware.ts`,
 * and any runtime that speaks it (Bun, Deno, workers, `@hono/node-server`'s `serve`).
 */
import type { Dunwall } from '../types.js';
import { check, checkDunwall, compileOptions } from './guard.js';
import type { CompiledOptions, Decision, MiddlewareOptions, RequestFacts } from './guard.js';

function facts(request: Request): RequestFacts {
  // `request.url` is absolute and normalized by the URL parser: no dot segments are left.
  return {
    method: request.method.toUpperCase(),
    path: new URL(request.url).pathname,
    header: (name) => request.headers.get(name),
  };
}

/**
 * A refusal or a redirect as a `Response`, with headers of its own: a server may add to the
 * object it was given (`@hono/node-server` 1.x sets `Content-Length` on it), so it is never
 * the decision's shared, frozen one.
 */
export function toResponse(decision: Exclude<Decision, { action: 'pass' }>): Response {
  return new Response(decision.action === 'refuse' ? decision.body : null, {
    status: decision.status,
    headers: { ...decision.headers },
  });
}

type Handler<R extends Request, A extends unknown[]> = (request: R, ...rest: A) => Response | Promise<Response>;

/**
 * A handler that answers only when the customer may go on: `export const GET =
 * withDunwall(dunwall, options, async (request) => Response.json(...))`. Any further
 * arguments (Next.js's `{ params }`) are passed on to the handler.
 */
export function withDunwall<R extends Request, A extends unknown[]>(
  dunwall: Dunwall,
  options: MiddlewareOptions<R>,
  handler: Handler<R, A>,
): (request: R, ...rest: A) => Promise<Response> {
  if (typeof handler !== 'function')
    throw new TypeError('dunwall: withDunwall(dunwall, options, handler) needs the handler');
  const copy = checkDunwall(dunwall);
  const compiled = compileOptions(options);
  return async (request, ...rest) => {
    const pending = check(copy, compiled, request, facts(request));
    const decision = pending instanceof Promise ? await pending : pending;
    return decision.action === 'pass' ? handler(request, ...rest) : toResponse(decision);
  };
}

/**
 * The refusal or redirect a request gets, or null when it may go on: for Next.js's
 * `middleware.ts`, `return (await checkRequest(dunwall, options, request)) ?? NextResponse.next()`.
 */
export async function checkRequest<R extends Request>(
  dunwall: Dunwall,
  options: MiddlewareOptions<R>,
  request: R,
): Promise<Response | null> {
  const pending = check(checkDunwall(dunwall), compiledFor(options), request, facts(request));
  const decision = pending instanceof Promise ? await pending : pending;
  return decision.action === 'pass' ? null : toResponse(decision);
}

/**
 * `checkRequest` is called with the same options object on every request: compiled once per
 * object (held weakly), not per request.
 */
const compiledCache = new WeakMap<object, CompiledOptions<never>>();
function compiledFor<R>(options: MiddlewareOptions<R>): CompiledOptions<R> {
  const cached = compiledCache.get(options) as CompiledOptions<R> | undefined;
  if (cached !== undefined) return cached;
  const compiled = compileOptions(options);
  compiledCache.set(options, compiled as CompiledOptions<never>);
  return compiled;
}
