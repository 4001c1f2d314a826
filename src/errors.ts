import { STATUS_CODES } from 'node:http';

/**
 * Every machine `code` the service answers with, and its HTTP status. This table is the
 * only place statuses of errors live; the codes are stable and documented in the README.
 */
export const ERRORS = {
  missing_publishable_key: { status: 401, detail: 'The Authorization header with a Bearer publishable key is missing.' },
  invalid_publishable_key: { status: 401, detail: 'The publishable key is malformed or is not a current key of this tenant.' },
  tenant_not_found: { status: 404, detail: 'No tenant has this slug.' },
  tenant_suspended: { status: 402, detail: "The tenant's subscription to Dunwall is suspended." },
  missing_processor_customer_id: { status: 400, detail: 'The processor_customer_id query parameter is required.' },
  invalid_processor_customer_id: { status: 400, detail: 'processor_customer_id must be one value matching ^cus_[A-Za-z0-9_]{1,251}$.' },
  hmac_mismatch: { status: 403, detail: 'The hmac does not match processor_customer_id.' },
  hmac_required: { status: 403, detail: 'This tenant requires the hmac query parameter.' },
  invalid_signature: { status: 400, detail: 'The Stripe-Signature header does not verify with any signing secret of this tenant, or is too old.' },
  missing_admin_token: { status: 401, detail: 'The Authorization header with a Bearer admin token is missing.' },
  invalid_admin_token: { status: 401, detail: 'The admin token is not valid.' },
  admin_disabled: { status: 404, detail: 'The admin API is disabled: set DUNWALL_ADMIN_TOKEN to enable it.' },
  invalid_request: { status: 400, detail: 'The request is not valid.' },
  tenant_exists: { status: 409, detail: 'A tenant with this slug exists already.' },
  stale_change: { status: 409, detail: 'An event dated later than now has set this subscriber; the change was not applied.' },
  subscriber_not_found: { status: 404, detail: 'This tenant has no record of this subscriber.' },
  not_found: { status: 404, detail: 'No such route.' },
  method_not_allowed: { status: 405, detail: 'This method is not allowed on this route.' },
  payload_too_large: { status: 413, detail: 'The request body is too large.' },
  unsupported_media_type: { status: 415, detail: 'The request body must be application/json.' },
  bad_request: { status: 400, detail: 'The request is not valid HTTP.' },
  request_timeout: { status: 408, detail: 'The request did not arrive in time.' },
  headers_too_large: { status: 431, detail: 'The request line and headers are too large.' },
  rate_limited: { status: 429, detail: 'Too many requests from this address or for this tenant; retry after the number of seconds in Retry-After.' },
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
