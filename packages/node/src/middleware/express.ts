/**
 * Express (4 and 5), Connect, and a bare `node:http` handler: a `(req, res, next)` middleware.
 * Nothing of Express is imported: the request is read as Node's `IncomingMessage` and the
 * answer written with Node's `ServerResponse` methods, which Express's objects extend.
 */
import type { Dunwall } from '../types.js';
import { check, checkDunwall, compileOptions, pathOfTarget } from './guard.js';
import type { Decision, MiddlewareOptions, RequestFacts } from './guard.js';

/** What the middleware reads of a request: Node's `IncomingMessage`, Express's `Request`. */
export interface NodeLikeRequest {
  method?: string | undefined;
  url?: string | undefined;
  /** Express: the URL before a mount point (`app.use('/api', ...)`) was taken off `url`. */
  originalUrl?: string | undefined;
  headers: Record<string, string | string[] | undefined>;
}

/** What the middleware writes on a response: Node's `ServerResponse`, Express's `Response`. */
export interface NodeLikeResponse {
  statusCode: number;
  setHeader(name: string, value: string): unknown;
  end(body?: string): unknown;
}

export type NodeMiddleware<Req> = (req: Req, res: NodeLikeResponse, next: (err?: unknown) => void) => void;

function facts(req: NodeLikeRequest): RequestFacts {
  return {
    method: (req.method ?? 'GET').toUpperCase(),
    path: pathOfTarget(req.originalUrl ?? req.url ?? '/'),
    header(name) {
      const value = req.headers[name];
      return Array.isArray(value) ? value.join(', ') : value;
    },
  };
}

function apply(decision: Decision, res: NodeLikeResponse, next: (err?: unknown) => void): void {
  if (decision.action === 'pass') {
    next();
    return;
  }
  res.statusCode = decision.status;
  for (const [name, value] of Object.entries(decision.headers)) res.setHeader(name, value);
  res.end(decision.action === 'refuse' ? decision.body : undefined);
}

/**
 * `app.use(dunwallExpress(dunwall, { customer: (req) => req.user?.stripeCustomerId }))`:
 * after your sign-in middleware, before the routes to protect. Exempt paths are matched
 * against the full path (`originalUrl`), wherever the middleware is mounted.
 */
export function dunwallExpress<Req extends NodeLikeRequest = NodeLikeRequest>(
  dunwall: Dunwall,
  options: MiddlewareOptions<Req>,
): NodeMiddleware<Req> {
  const copy = checkDunwall(dunwall);
  const compiled = compileOptions(options);
  return (req, res, next) => {
    const decision = check(copy, compiled, req, facts(req));
    if (decision instanceof Promise) decision.then((d) => apply(d, res, next)).catch(next);
    else apply(decision, res, next);
  };
}
