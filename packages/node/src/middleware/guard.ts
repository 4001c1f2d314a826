/**
 * The one decision every middleware makes, whatever the framework: let the request through,
 * refuse it with 402 and an RFC 9457 problem, or send a browser's page load to the billing
 * page with a 303. The adapters (Express, Fastify, Hono, the Fetch API) only read the
 * request's facts and write the decision in their own terms.
 *
 * Fail-open everywhere: a `customer()` that throws or rejects, a `status()` that throws, an
 * answer the copy does not vouch for (`stale`, `starting`): the request goes through. The
 * copy never gates from what it has not heard recently (see `StatusAnswer.source`); neither
 * does the middleware, even for a status outside `allow`.
 */
import type { BillingStatus, Dunwall, GuardOptions, LockoutProblem, StatusAnswer } from '../types.js';
import { STATUSES } from '../wire.js';

/** What is let through when `allow` is not given. */
export const DEFAULT_ALLOW: readonly BillingStatus[] = ['active', 'warning'];

/**
 * What is never refused when `exempt` is not given: the identity route of the docs' apps,
 * where a page learns who is signed in (customer and hmac). Refused, the page could not ask
 * Dunwall for the customer, and a locked-out customer would see no gate, only failing calls.
 */
export const DEFAULT_EXEMPT: readonly string[] = ['/api/me'];

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** The options of every middleware: those of `GuardOptions`, and where fail-open errors go. */
export interface MiddlewareOptions<Req> extends GuardOptions<Req> {
  /**
   * Called with an error of `customer()`, `status()` or `redirectTo` that the middleware
   * recovered from (the request went through, or got the 402 instead of the redirect), for
   * logging; default none. It must not throw.
   */
  onError?: (err: Error) => void;
}

/** The facts of a request the decision reads. */
export interface RequestFacts {
  /** The HTTP method, upper case. */
  method: string;
  /** The path the client asked for, without the query string. */
  path: string;
  /** A request header by its lower-case name; absent: null or undefined. */
  header(name: string): string | null | undefined;
}

export type Decision =
  | { action: 'pass' }
  | { action: 'refuse'; status: 402; headers: Readonly<Record<string, string>>; problem: LockoutProblem; body: string }
  | { action: 'redirect'; status: 303; headers: Readonly<Record<string, string>> };

export const PASS: Decision = Object.freeze({ action: 'pass' });

/** Options checked and compiled once, when the middleware is made. */
export interface CompiledOptions<Req> {
  customer: (req: Req) => string | null | undefined | Promise<string | null | undefined>;
  allowed: ReadonlySet<BillingStatus>;
  isExempt(path: string): boolean;
  redirectTo: string | ((answer: StatusAnswer) => string) | null;
  onError: (err: Error) => void;
}

/**
 * A path given to `exempt` as it is matched: `*` at the end makes a prefix. Anything else is
 * a configuration mistake, refused when the middleware is made rather than on a request.
 */
function checkExempt(entry: unknown): string {
  if (typeof entry !== 'string' || !entry.startsWith('/'))
    throw new TypeError(`dunwall: an exempt path starts with "/" (got ${JSON.stringify(entry)})`);
  if (entry.indexOf('*') !== -1 && entry.indexOf('*') !== entry.length - 1)
    throw new TypeError(`dunwall: "*" may only end an exempt path (got ${JSON.stringify(entry)})`);
  return entry;
}

/**
 * A path whose meaning a router could change after the match: dot segments, doubled or
 * back slashes, an encoded dot, slash or backslash. Such a path is never exempt, so that
 * `/billing/../api/data` cannot borrow `/billing/*`'s exemption for what a router may
 * resolve to `/api/data`. (Browsers and `fetch` never send one: they normalize the URL.)
 */
const UNPLAIN = /\/\.\.?(?:\/|$)|\/\/|\\|%2e|%2f|%5c/i;

export function compileOptions<Req>(options: MiddlewareOptions<Req>): CompiledOptions<Req> {
  if (options === null || typeof options !== 'object')
    throw new TypeError('dunwall: the middleware needs options, with customer(req)');
  if (typeof options.customer !== 'function')
    throw new TypeError('dunwall: options.customer(req) must be a function returning the Stripe customer id');
  const allow = options.allow ?? DEFAULT_ALLOW;
  if (!Array.isArray(allow)) throw new TypeError('dunwall: options.allow is an array of statuses');
  for (const s of allow)
    if (!STATUSES.includes(s))
      throw new TypeError(`dunwall: options.allow: unknown status ${JSON.stringify(s)} (${STATUSES.join(', ')})`);
  const exact = new Set<string>();
  const prefixes: string[] = [];
  const exempt = options.exempt ?? DEFAULT_EXEMPT;
  if (!Array.isArray(exempt)) throw new TypeError('dunwall: options.exempt is an array of paths');
  for (const entry of exempt) {
    const path = checkExempt(entry);
    if (path.endsWith('*')) prefixes.push(path.slice(0, -1));
    else exact.add(path);
  }
  const redirectTo = options.redirectTo ?? null;
  if (redirectTo !== null && typeof redirectTo !== 'string' && typeof redirectTo !== 'function')
    throw new TypeError('dunwall: options.redirectTo is a URL or a function of the answer');
  if (typeof redirectTo === 'string') checkLocation(redirectTo);
  const onError = options.onError;
  return {
    customer: options.customer,
    allowed: new Set(allow),
    isExempt:
      exact.size === 0 && prefixes.length === 0
        ? () => false
        : (path) => {
            if (!exact.has(path) && !prefixes.some((p) => path.startsWith(p))) return false;
            return !UNPLAIN.test(path);
          },
    redirectTo,
    onError: onError
      ? (err) => {
          try {
            onError(err);
          } catch {
            // A logger that throws must not turn fail-open into a 500.
          }
        }
      : () => {},
  };
}

/** A Location value: a URL or a path, without anything that could split the header. */
function checkLocation(location: unknown): string {
  // eslint-disable-next-line no-control-regex
  if (typeof location !== 'string' || location.length === 0 || /[\u0000-\u001f\u007f]/.test(location)) {
    throw new TypeError('dunwall: redirectTo must give a non-empty URL without control characters');
  }
  return location;
}

/** The q of a media range in an Accept header's part (`text/html;q=0.8`), 1 when absent. */
function qOf(params: string[]): number {
  for (const p of params) {
    const [k, v] = p.split('=');
    if (k?.trim().toLowerCase() === 'q') {
      const q = Number(v?.trim());
      return Number.isFinite(q) && q >= 0 && q <= 1 ? q : 0;
    }
  }
  return 1;
}

/**
 * Whether an Accept header prefers HTML: `text/html` (or `text/*`) is named with a q above 0
 * and at least that of every other type it names. `*\/*` alone, as `fetch` sends it, is not a
 * preference for HTML; a browser's page load (`text/html,application/xhtml+xml,...`) is.
 */
export function prefersHtml(accept: string | null | undefined): boolean {
  if (!accept) return false;
  let html = -1;
  let other = -1;
  for (const part of accept.split(',')) {
    const [range = '', ...params] = part.split(';');
    const type = range.trim().toLowerCase();
    if (type === '' || type === '*/*') continue;
    const q = qOf(params);
    if (type === 'text/html' || type === 'text/*') html = Math.max(html, q);
    else if (type !== 'application/xhtml+xml') other = Math.max(other, q);
  }
  return html > 0 && html >= other;
}

/** A page load in a browser: GET or HEAD, asking for HTML or navigating (`Sec-Fetch-Mode`). */
export function isHtmlNavigation(facts: RequestFacts): boolean {
  if (facts.method !== 'GET' && facts.method !== 'HEAD') return false;
  const mode = facts.header('sec-fetch-mode');
  if (mode !== null && mode !== undefined && mode.toLowerCase() === 'navigate') return true;
  return prefersHtml(facts.header('accept'));
}

export function lockoutProblem(answer: StatusAnswer): LockoutProblem {
  return {
    type: 'about:blank',
    title: 'Payment Required',
    status: 402,
    code: 'billing_lockout',
    detail:
      answer.status === 'lockout'
        ? 'This account is locked until its overdue invoice is paid.'
        : 'This account has an overdue invoice: this request needs it paid.',
    pay_url: answer.pay_url,
    lockout_at: answer.lockout_at,
  };
}

const REFUSE_HEADERS = Object.freeze({ 'content-type': PROBLEM_CONTENT_TYPE, 'cache-control': 'no-store' });

/**
 * The decision for an answer of the copy (null: no customer, or no answer). Pure: the same
 * answer, options and facts always decide the same.
 */
export function decide<Req>(answer: StatusAnswer | null, options: CompiledOptions<Req>, facts: RequestFacts): Decision {
  if (answer === null || answer.source !== 'feed' || options.allowed.has(answer.status)) return PASS;
  if (options.redirectTo !== null && isHtmlNavigation(facts)) {
    const location = redirectLocation(answer, options);
    // Never to the page asked for: a billing page left out of `exempt` would loop.
    if (location !== null && pathOf(location) !== facts.path) {
      return { action: 'redirect', status: 303, headers: { location, 'cache-control': 'no-store' } };
    }
  }
  const problem = lockoutProblem(answer);
  return { action: 'refuse', status: 402, headers: REFUSE_HEADERS, problem, body: JSON.stringify(problem) };
}

function redirectLocation<Req>(answer: StatusAnswer, options: CompiledOptions<Req>): string | null {
  const target = options.redirectTo;
  if (typeof target === 'string') return target;
  if (target === null) return null;
  try {
    return checkLocation(target(answer));
  } catch (err) {
    options.onError(asError(err));
    return null;
  }
}

/** The path of a Location on this site (`/billing?x` -> `/billing`); null for another origin's. */
function pathOf(location: string): string | null {
  if (!location.startsWith('/') || location.startsWith('//')) return null;
  const end = location.search(/[?#]/);
  return end === -1 ? location : location.slice(0, end);
}

/** The path of a request target (`/a/b?c` -> `/a/b`); an absolute-form target gives its path. */
export function pathOfTarget(target: string): string {
  let path = target;
  if (!path.startsWith('/')) {
    try {
      path = new URL(path).pathname;
    } catch {
      return path;
    }
  }
  const end = path.indexOf('?');
  return end === -1 ? path : path.slice(0, end);
}

export function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return value !== null && typeof value === 'object' && typeof (value as { then?: unknown }).then === 'function';
}

function answerFor<Req>(
  dunwall: Dunwall,
  options: CompiledOptions<Req>,
  customerId: unknown,
  facts: RequestFacts,
): Decision {
  if (typeof customerId !== 'string' || customerId === '') return PASS;
  let answer: StatusAnswer;
  try {
    answer = dunwall.status(customerId);
  } catch (err) {
    options.onError(asError(err));
    return PASS;
  }
  return decide(answer, options, facts);
}

/**
 * The whole check of one request: exempt paths first (no `customer()` call for them), then
 * the customer, its answer, the decision. Synchronous when `customer()` is, so that a
 * synchronous middleware adds no turn of the event loop.
 */
export function check<Req>(
  dunwall: Dunwall,
  options: CompiledOptions<Req>,
  req: Req,
  facts: RequestFacts,
): Decision | Promise<Decision> {
  if (options.isExempt(facts.path)) return PASS;
  let customerId: unknown;
  try {
    customerId = options.customer(req);
  } catch (err) {
    options.onError(asError(err));
    return PASS;
  }
  if (isThenable(customerId)) {
    return Promise.resolve(customerId).then(
      (id) => answerFor(dunwall, options, id, facts),
      (err: unknown) => {
        options.onError(asError(err));
        return PASS;
      },
    );
  }
  return answerFor(dunwall, options, customerId, facts);
}

/** A `Dunwall` as the middleware needs it, checked when the middleware is made. */
export function checkDunwall(dunwall: unknown): Dunwall {
  if (
    dunwall === null ||
    typeof dunwall !== 'object' ||
    typeof (dunwall as { status?: unknown }).status !== 'function'
  ) {
    throw new TypeError('dunwall: the middleware needs the object createDunwall() returns');
  }
  return dunwall as Dunwall;
}
