/**
 * The public shapes of `@dunwall/node`, shared by the status copy (`createDunwall`) and the
 * middleware for Express, Fastify, Hono and the Fetch API.
 */

export type BillingStatus = 'active' | 'warning' | 'lockout';

/**
 * Where an answer came from: `feed` (the copy follows Dunwall's status feed and heard from it
 * within `staleAfterMs`), `stale` (the copy has not heard from Dunwall for longer: a lockout is
 * answered as `warning`, never a gate), `starting` (the first list has not completed: everyone
 * is `active`).
 */
export type AnswerSource = 'feed' | 'stale' | 'starting';

export interface StatusAnswer {
  status: BillingStatus;
  /** While a lockout is scheduled: when it falls (ISO 8601); null otherwise. */
  lockout_at: string | null;
  /** Stripe's hosted page of the invoice to pay; null when unknown. */
  pay_url: string | null;
  /** The tenant tier's entitlement flags (empty until the first list). */
  entitlements: Readonly<Record<string, boolean>>;
  source: AnswerSource;
}

export interface DunwallOptions {
  /** The Dunwall service, e.g. `https://dunwall.example.com`. */
  baseUrl: string;
  /** A secret key of the tenant with `status:read` (`sk_live_...` / `sk_test_...`). Never sent to a browser. */
  secretKey: string;
  /** After this long without hearing from Dunwall, the copy never gates (default 60 000). */
  staleAfterMs?: number;
  /** Each request to Dunwall is bounded by this (default 10 000; a long poll adds its wait). */
  requestTimeoutMs?: number;
  /** The clock, for tests (default `Date.now`). */
  now?: () => number;
  /** Errors the copy recovers from (a refused list, a cut feed), for logging; default none. */
  onError?: (err: Error) => void;
}

export interface Dunwall {
  /** The customer's status from the copy in memory, synchronously; an unknown customer is `active`. */
  status(customerId: string): StatusAnswer;
  /** Resolves once the first list has completed (rejects after `timeoutMs`, default 10 000). */
  ready(timeoutMs?: number): Promise<void>;
  /** Stops following the feed; `status` keeps answering from the copy as it was (then stale). */
  close(): Promise<void>;
}

/** The options every middleware takes. */
export interface GuardOptions<Req> {
  /** The customer the request acts for (its Stripe customer id); null or undefined: not a customer's request, let through. */
  customer(req: Req): string | null | undefined | Promise<string | null | undefined>;
  /** Statuses let through (default `['active', 'warning']`). */
  allow?: readonly BillingStatus[];
  /** Paths never refused (billing, logout...): exact paths, or prefixes ending in `*` (default none). */
  exempt?: readonly string[];
  /** Where an HTML navigation that is refused is redirected (303) instead of answered 402; default none. */
  redirectTo?: string | ((answer: StatusAnswer) => string);
}

/** The RFC 9457 problem a refused request gets (402, `application/problem+json`). */
export interface LockoutProblem {
  type: 'about:blank';
  title: 'Payment Required';
  status: 402;
  code: 'billing_lockout';
  detail: string;
  pay_url: string | null;
  lockout_at: string | null;
}
