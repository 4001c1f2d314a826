/**
 * The public shapes of `@dunwall/node`, shared by the status copy (`createDunwall`) and the
 * middleware for Express, Fastify, Hono and the Fetch API.
 */

import type { Status } from './wire.js';

/** A subscriber's status: active, warning or lockout. */
export type BillingStatus = Status;

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
  /** Each request to Dunwall, its whole answer read, is bounded by this (default 10 000; a long poll adds its wait). */
  requestTimeoutMs?: number;
  /**
   * The most bytes one answer of Dunwall may have (default 8 388 608, 8 MiB: a full page of
   * 1,000 subscribers is under 4 MB). A longer answer is not read further: its request is
   * ended, `onError` hears of it, and the copy stays as it was.
   */
  maxAnswerBytes?: number;
  /**
   * The most subscribers the copy holds (default 100 000; only those in `warning` or `lockout`
   * are held), and 512 bytes each of them at most, estimated (about 400 with a Stripe pay link
   * and a scheduled lockout). A list that would hold more, or that runs to more pages than it can fill, is
   * given up (`onError`); a page of changes that would is not applied (the copy goes stale).
   */
  maxSubscribers?: number;
  /** The clock, for tests (default `Date.now`). */
  now?: () => number;
  /** Errors the copy recovers from (a refused list, a cut feed), for logging; default none. */
  onError?: (err: Error) => void;
  /**
   * The tenant's HMAC secret, from your secret store: `identity()` and `pageBootstrap()` sign
   * the customer id with it, for the browser's own lookup. None (or empty): their `hmac` is null.
   */
  hmacSecret?: string | undefined;
}

/** Who is signed in, as a page hands it to the browser: the customer id and its hmac. */
export interface Identity {
  /** The Stripe customer id (`cus_...`); null for a signed-out visitor. */
  customer: string | null;
  /** Hex HMAC-SHA256 of `customer` under the tenant's HMAC secret; null when signed out or without `hmacSecret`. */
  hmac: string | null;
}

/**
 * A customer's answer for a server-rendered page, in the shape `@dunwall/react`'s
 * `bootstrap` prop takes: the lookup's fields, and `at`, when it was true (epoch ms).
 */
export interface BootstrapAnswer {
  status: BillingStatus;
  lockout_at: string | null;
  pay_url: string | null;
  card_update_url: string | null;
  /** The tier's flags; null when unknown (or without Dunwall's three flags). */
  entitlements: BootstrapEntitlements | null;
  at: number;
}

/** A tier's entitlement flags as a page's bootstrap carries them: Dunwall's three, and any other the operator defined. */
export interface BootstrapEntitlements {
  readonly powered_by_watermark: boolean;
  readonly custom_domain: boolean;
  readonly downstream_webhooks: boolean;
  readonly [flag: string]: boolean;
}

/** What `pageBootstrap()` gives a page: the identity, and the answer to render with (null when unknown). */
export interface PageBootstrap extends Identity {
  bootstrap: BootstrapAnswer | null;
}

/** Why `ready()` rejected. */
export type ReadyFailure = 'unreachable' | 'refused_key' | 'unavailable' | 'timeout' | 'closed';

export interface Dunwall {
  /** The customer's status from the copy in memory, synchronously; an unknown customer is `active`. */
  status(customerId: string): StatusAnswer;
  /**
   * Resolves once the first list has completed. Rejects with a `DunwallReadyError` saying what
   * it gave up on: at once for a refused key, otherwise after `timeoutMs` (default 10 000)
   * with Dunwall unreachable or failing. While pending it keeps the process alive, so that
   * `await dunwall.ready()` before `listen` settles; the copy keeps trying after a rejection.
   */
  ready(timeoutMs?: number): Promise<void>;
  /** Stops following the feed; `status` keeps answering from the copy as it was (then stale). */
  close(): Promise<void>;
}

/**
 * What `createDunwall` returns: the copy (all the middleware needs of it is `Dunwall`), and
 * what a server hands its pages: the signed identity, and a server-rendered page's bootstrap.
 */
export interface DunwallCopy extends Dunwall {
  /** The customer id and its hmac, for the route a page reads who is signed in from (`GET /api/me`). Never throws. */
  identity(customerId: string | null | undefined): Identity;
  /**
   * For a server-rendered page: the identity and the customer's answer, from the copy when
   * it vouches for an `active` customer, otherwise asked of Dunwall (at most `timeoutMs`,
   * default 1 500). Never throws: on any failure `bootstrap` is null (or the copy's answer,
   * while it is fresh), and the browser asks Dunwall itself.
   */
  pageBootstrap(customerId: string | null | undefined, timeoutMs?: number): Promise<PageBootstrap>;
}

/** The options every middleware takes. */
export interface GuardOptions<Req> {
  /** The customer the request acts for (its Stripe customer id); null or undefined: not a customer's request, let through. */
  customer(req: Req): string | null | undefined | Promise<string | null | undefined>;
  /** Statuses let through (default `['active', 'warning']`). */
  allow?: readonly BillingStatus[];
  /**
   * Paths never refused: exact paths, or prefixes ending in `*`. Default `['/api/me']` (the
   * identity route a page reads the customer and hmac from, which it needs to show the gate);
   * a list given replaces it, so name your identity route in it, with your billing and logout pages.
   */
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
