import type { FastifyError, FastifyReply } from 'fastify';
import { STATUS_CODES } from 'node:http';
import type { LookupFailure } from '../domain/lookup.js';
import { NAME_PATTERN, TEXT_PATTERN } from '../domain/validation.js';

/**
 * Every machine `code` the service answers with, and its HTTP status. This table is the
 * only place statuses of errors live; the codes are stable and documented in docs/api.md.
 */
export const ERRORS = {
  missing_publishable_key: {
    status: 401,
    detail: 'The Authorization header with a Bearer publishable key is missing.',
  },
  invalid_publishable_key: {
    status: 401,
    detail: 'The publishable key is malformed or is not a current key of this tenant.',
  },
  tenant_not_found: { status: 404, detail: 'No tenant has this slug.' },
  tenant_suspended: { status: 402, detail: "The tenant's subscription to Dunwall is suspended." },
  missing_processor_customer_id: { status: 400, detail: 'The processor_customer_id query parameter is required.' },
  invalid_processor_customer_id: {
    status: 400,
    detail: 'processor_customer_id must be one value matching ^cus_[A-Za-z0-9_]{1,251}$.',
  },
  hmac_mismatch: { status: 403, detail: 'The hmac does not match processor_customer_id.' },
  hmac_required: { status: 403, detail: 'This tenant requires the hmac query parameter.' },
  invalid_signature: {
    status: 400,
    detail: 'The Stripe-Signature header does not verify with any signing secret of this tenant, or is too old.',
  },
  invalid_secret_key: { status: 401, detail: 'The secret key is malformed, unknown, revoked or expired.' },
  insufficient_scope: { status: 403, detail: 'The secret key does not hold the scope this call needs.' },
  secret_key_in_browser: {
    status: 401,
    detail: 'A secret key is never accepted from a browser (a request with Origin): use the publishable key there.',
  },
  secret_key_not_found: { status: 404, detail: 'This tenant has no secret key with this id.' },
  secret_key_limit: { status: 409, detail: 'The tenant has as many secret keys as allowed; revoke one first.' },
  secret_key_expired: {
    status: 409,
    detail: 'The key has expired: an expired key is never rotated; create a new one.',
  },
  missing_admin_token: { status: 401, detail: 'The Authorization header with a Bearer admin token is missing.' },
  invalid_admin_token: { status: 401, detail: 'The admin token is not valid.' },
  invalid_credentials: {
    status: 401,
    detail: "Sign in with one of the tenant's secret keys or the operator's admin token.",
  },
  invalid_session: { status: 401, detail: 'The console session is missing, signed out or expired: sign in again.' },
  csrf_token_invalid: {
    status: 403,
    detail: "A console write must carry its session's token in the X-CSRF-Token header.",
  },
  insecure_transport: {
    status: 403,
    detail: 'The console signs in over HTTPS only (plain HTTP on loopback alone): open it at its https:// address.',
  },
  admin_disabled: { status: 404, detail: 'The admin API is disabled: set DUNWALL_ADMIN_TOKEN to enable it.' },
  invalid_request: { status: 400, detail: 'The request is not valid.' },
  tenant_exists: { status: 409, detail: 'A tenant with this slug exists already.' },
  tier_in_use: { status: 409, detail: 'Tenants are on this tier: move them to another first.' },
  tier_not_found: { status: 404, detail: 'No tier has this name.' },
  stale_change: {
    status: 409,
    detail: 'An event dated later than now has set this subscriber; the change was not applied.',
  },
  subscriber_not_found: { status: 404, detail: 'This tenant has no record of this subscriber.' },
  downstream_webhooks_not_entitled: { status: 403, detail: "The tenant's tier does not include downstream_webhooks." },
  webhook_endpoint_not_found: { status: 404, detail: 'This tenant has no webhook endpoint with this id.' },
  webhook_message_not_found: { status: 404, detail: 'This tenant has no webhook message with this id.' },
  webhook_endpoint_limit: {
    status: 409,
    detail: 'The tenant has as many webhook endpoints as allowed; delete one first.',
  },
  invalid_cursor: { status: 400, detail: 'The cursor is not one this service handed out.' },
  cursor_expired: {
    status: 410,
    detail:
      'The changes after this cursor are no longer kept: list the statuses again and follow the feed from their feed_cursor.',
  },
  too_many_streams: {
    status: 429,
    detail:
      'The tenant holds as many open status feed streams and long polls as allowed; close one, or retry after the number of seconds in Retry-After.',
  },
  not_found: { status: 404, detail: 'No such route.' },
  method_not_allowed: { status: 405, detail: 'This method is not allowed on this route.' },
  payload_too_large: { status: 413, detail: 'The request body is too large.' },
  unsupported_media_type: { status: 415, detail: 'The request body must be application/json.' },
  bad_request: { status: 400, detail: 'The request is not valid HTTP.' },
  request_timeout: { status: 408, detail: 'The request did not arrive in time.' },
  headers_too_large: { status: 431, detail: 'The request line and headers are too large.' },
  rate_limited: {
    status: 429,
    detail: 'Too many requests from this address or for this tenant; retry after the number of seconds in Retry-After.',
  },
  stripe_key_invalid: {
    status: 400,
    detail: 'Stripe does not accept this API key (revoked, rolled or mistyped): nothing was stored.',
  },
  stripe_key_permission: {
    status: 400,
    detail:
      'The restricted key lacks a permission Dunwall needs (read on Invoices, Customers and Subscriptions, write on Customer portal): nothing was stored.',
  },
  stripe_key_mode_mismatch: {
    status: 400,
    detail: "The key's mode (live or test) is not the mode addressed: nothing was stored.",
  },
  stripe_portal_not_ready: {
    status: 400,
    detail:
      "Stripe refused a Customer Portal session with this key (save the portal's settings in Stripe): nothing was stored.",
  },
  stripe_error: { status: 502, detail: 'Stripe answered with an error: nothing was stored; retry later.' },
  stripe_unreachable: {
    status: 503,
    detail: 'Stripe did not answer in time, could not be reached or is rate limiting: nothing was stored; retry later.',
  },
  store_unavailable: { status: 503, detail: 'The store is unavailable; retry shortly.' },
  internal_error: { status: 500, detail: 'An internal error occurred.' },
} as const satisfies Record<string, { status: number; detail: string }>;

export type ErrorCode = keyof typeof ERRORS;

/**
 * The `Retry-After` of every 503 `store_unavailable`: about the time PostgreSQL takes to
 * restart or fail over. Stripe keeps its own retry schedule; the snippet does not retry.
 */
export const STORE_UNAVAILABLE_RETRY_AFTER_S = 5;

export interface Problem {
  type: 'about:blank';
  title: string;
  status: number;
  code: ErrorCode;
  detail: string;
}

export function problem(code: ErrorCode, detail?: string): Problem {
  const { status, detail: fallback } = ERRORS[code];
  return { type: 'about:blank', title: STATUS_CODES[status] ?? 'Error', status, code, detail: detail ?? fallback };
}

/** An expected failure raised inside a route; the error handler turns it into a problem. */
export class AppError extends Error {
  readonly code: ErrorCode;
  readonly detail: string | undefined;
  readonly headers: Record<string, string> | undefined;

  constructor(code: ErrorCode, detail?: string, headers?: Record<string, string>) {
    super(detail ?? ERRORS[code].detail);
    this.name = 'AppError';
    this.code = code;
    this.detail = detail;
    this.headers = headers;
  }
}

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';

/** Every code of the domain's lookup checks has its row above. */
export type LookupCodesHaveProblems = LookupFailure extends ErrorCode ? true : never;
export const LOOKUP_CODES_HAVE_PROBLEMS: LookupCodesHaveProblems = true;

/** A problem answer, whatever writes it: its status, its headers (name, value, ...) and its body. */
export interface ProblemAnswer {
  status: number;
  headers: string[];
  body: string | Buffer;
}

/**
 * The one writer of problem answers (RFC 9457), used by every transport: Fastify's replies,
 * the lookup's fast path, a refusal swapped in by a hook, the raw socket of a client error.
 * Every 401 names the scheme it expects, and every 503 `store_unavailable` (lookup,
 * webhook, admin, /readyz) when to try again. A problem with the code's own detail has its
 * bytes made once.
 */
export function problemAnswer(code: ErrorCode, detail?: string): ProblemAnswer {
  const status = ERRORS[code].status;
  const headers = ['content-type', PROBLEM_CONTENT_TYPE];
  if (status === 401) headers.push('www-authenticate', 'Bearer');
  if (code === 'store_unavailable') headers.push('retry-after', String(STORE_UNAVAILABLE_RETRY_AFTER_S));
  return { status, headers, body: detail === undefined ? problemBody(code) : JSON.stringify(problem(code, detail)) };
}

/** Answers a Fastify reply with a problem (`problemAnswer`). */
export function sendProblem(reply: FastifyReply, code: ErrorCode, detail?: string): FastifyReply {
  const answer = problemAnswer(code, detail);
  reply.code(answer.status);
  for (let i = 0; i < answer.headers.length; i += 2) reply.header(answer.headers[i] as string, answer.headers[i + 1]);
  return reply.send(answer.body);
}

interface AjvError {
  keyword: string;
  instancePath: string;
  message?: string;
  params: Record<string, unknown>;
}

/** `/allowed_origins/0` -> `allowed_origins[0]`, `/entitlements/x` -> `entitlements.x`. */
function fieldName(instancePath: string): string {
  return instancePath
    .split('/')
    .filter(Boolean)
    .map((part, i) => (/^\d+$/.test(part) ? `[${part}]` : i === 0 ? part : `.${part}`))
    .join('');
}

/** Path parameters by the names the API's users know them by, not the routes' own. */
const PARAM_NAMES: Record<string, string> = {
  customerId: 'processor_customer_id',
  tenantSlug: 'slug',
  name: 'tier name',
};

/** How a JSON type is named to a person; a boolean by its two values. */
const TYPE_WORDS: Record<string, string[]> = {
  boolean: ['true', 'false'],
  null: ['null'],
  integer: ['an integer'],
  number: ['a number'],
  string: ['a string'],
  object: ['an object'],
  array: ['an array'],
};

/**
 * A value of none of a union's types (`boolean | null`): "must be true, false or null"
 * rather than the first branch's "must be boolean", which hides that null is allowed.
 * Null when the errors are not only type mismatches at one place.
 */
function typeAlternatives(errors: readonly AjvError[], path: string): string | null {
  const here = errors.filter((e) => e.instancePath === path);
  const types = here.filter((e) => e.keyword === 'type').map((e) => String(e.params.type));
  if (types.length < 2 || here.length !== types.length + 1 || !here.some((e) => e.keyword === 'anyOf')) return null;
  const words = types.flatMap((t) => TYPE_WORDS[t] ?? [t]);
  return `must be ${words.slice(0, -1).join(', ')} or ${words.at(-1) ?? ''}`;
}

/** One sentence naming the field at fault, from the first schema validation error. */
export function describeValidationError(err: FastifyError): string {
  const first = err.validation?.[0] as AjvError | undefined;
  const where = err.validationContext ?? 'request';
  if (!first) return `${where}: ${err.message}`;
  const field = fieldName(first.instancePath);
  const base = where === 'params' ? (PARAM_NAMES[field] ?? field) : field;
  const join = (name: string) => (base ? `${base}.${name}` : name);
  const alternatives =
    first.keyword === 'type' ? typeAlternatives((err.validation ?? []) as AjvError[], first.instancePath) : null;
  if (alternatives !== null) return `${base || where}: ${alternatives}`;
  if (first.keyword === 'required') return `${join(String(first.params.missingProperty))}: is required`;
  if (first.keyword === 'additionalProperties')
    return `${join(String(first.params.additionalProperty))}: is not a known field`;
  if (first.keyword === 'minProperties') return `${base || where}: must name at least one field`;
  if (first.keyword === 'type' && base === '') return `${where}: must be a JSON ${String(first.params.type)}`;
  if (first.keyword === 'pattern' && first.params.pattern === TEXT_PATTERN)
    return `${base || where}: must not contain the character U+0000 or a bidirectional control (U+200E, U+200F, U+202A-U+202E, U+2066-U+2069)`;
  if (first.keyword === 'pattern' && first.params.pattern === NAME_PATTERN)
    return `${base || where}: must be printable text: no control character (C0, C1) and no bidirectional control (U+200E, U+200F, U+202A-U+202E, U+2066-U+2069)`;
  return `${base || where}: ${first.message ?? 'is not valid'}`;
}

const problemBytes = new Map<ErrorCode, Buffer>();

/** A problem's body with the code's own detail, serialised once per code (the lookup's answers). */
export function problemBody(code: ErrorCode): Buffer {
  let body = problemBytes.get(code);
  if (body === undefined) {
    body = Buffer.from(JSON.stringify(problem(code)));
    problemBytes.set(code, body);
  }
  return body;
}
