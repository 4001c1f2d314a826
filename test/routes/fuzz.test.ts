import { createHmac } from 'node:crypto';
import { connect } from 'node:net';
import fc from 'fast-check';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseTrustedProxies } from '../../src/http/client-address.js';
import type { RateLimits } from '../../src/runtime/config.js';
import { availableEngines } from '../helpers/engines.js';
import { portOf, socketRequest } from '../helpers/socket.js';
import { harness } from '../helpers/harness.js';
import type { Harness } from '../helpers/harness.js';
import {
  BASIL_API,
  LEGACY_API,
  charge,
  customer,
  event,
  invoice,
  paymentIds,
  paymentIntent,
  subscription,
} from '../helpers/stripe-fixtures.js';
import type { ApiShape } from '../helpers/stripe-fixtures.js';

/*
 * Fuzzing the two public surfaces (the lookup and the Stripe webhook) with arbitrary
 * paths, query strings, headers, encodings and bodies. Whatever arrives, the service
 * answers below 500, keeps answering, answers errors as problems, and never gives one
 * tenant's answer (or accepts one tenant's event) on another tenant's URL. The expected
 * answers are computed here from docs/api.md, not from the code under test.
 */

const UNREACHED_LIMITS: RateLimits = {
  lookupPerIp: 1_000_000,
  lookupPerTenant: 1_000_000,
  failuresPerIp: 1_000_000,
  adminPerIp: 1_000_000,
};
const engines = await availableEngines();

/** Fixed so that a failure replays; FUZZ_SEED explores other inputs. */
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : 20261124;
const LOOKUP_RUNS = 400;
const WEBHOOK_RUNS = 200;
const RAW_RUNS = 100;

const LOOKUP_PREFIX = '/api/subscriber-status/';
const WEBHOOK_PREFIX = '/webhooks/stripe/';
const CUSTOMER_ID = /^cus_[A-Za-z0-9_]{1,251}$/;
const HMAC_HEX = /^[0-9a-fA-F]{64}$/;
/** Check 1: scheme `Bearer` (any case), one RFC 6750 b64token. */
const BEARER = /^bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;
const SIGNATURE_TOLERANCE_S = 300;
const ROTATION_OVERLAP_S = 86_400;

/** docs/api.md: the seeded tiers. */
const TIER_FLAGS = {
  starter: { powered_by_watermark: true, custom_domain: false, downstream_webhooks: false },
  growth: { powered_by_watermark: false, custom_domain: true, downstream_webhooks: false },
  scale: { powered_by_watermark: false, custom_domain: true, downstream_webhooks: true },
} as const;
type Tier = keyof typeof TIER_FLAGS;
type Status = 'active' | 'warning' | 'lockout';

/** docs/stripe.md, statuses from dunning episodes. */
const HARD_DECLINES = [
  'incorrect_number',
  'lost_card',
  'pickup_card',
  'stolen_card',
  'revocation_of_authorization',
  'revocation_of_all_authorizations',
  'authentication_required',
  'highest_risk_level',
  'transaction_not_allowed',
  'fraudulent',
  'do_not_try_again',
  'stop_payment_order',
  'merchant_blacklist',
  'invalid_account',
  'expired_card',
];
const RELEVANT_TYPES = [
  'charge.failed',
  'payment_intent.payment_failed',
  'invoice.payment_failed',
  'invoice.payment_action_required',
  'invoice.paid',
  'invoice.payment_succeeded',
  'customer.subscription.updated',
  'customer.deleted',
];

interface TenantSpec {
  slug: string;
  tier: Tier;
  cardUpdateUrl: string | null;
  hmacRequired: boolean;
  suspended: boolean;
  allowedOrigins: string[] | null;
  webhookSecret: string;
  initial: Record<string, Status>;
}

/**
 * One slug the prefix of another, the same customer id in every tenant with a different
 * status: an answer for the wrong tenant cannot pass for the right one.
 */
const SPECS: readonly TenantSpec[] = [
  {
    slug: 'acme',
    tier: 'growth',
    cardUpdateUrl: 'https://billing.acme.example/card',
    hmacRequired: false,
    suspended: false,
    allowedOrigins: null,
    webhookSecret: 'whsec_fuzz_acme_0123456789abcdef',
    initial: { cus_shared: 'lockout', cus_acme_only: 'warning', cus_known_active: 'active' },
  },
  {
    slug: 'acme-eu',
    tier: 'scale',
    cardUpdateUrl: 'https://billing.acme-eu.example/card',
    hmacRequired: true,
    suspended: false,
    allowedOrigins: null,
    webhookSecret: 'whsec_fuzz_acme_eu_0123456789abcdef',
    initial: { cus_shared: 'warning', cus_eu_only: 'lockout' },
  },
  {
    slug: 'globex',
    tier: 'starter',
    cardUpdateUrl: null,
    hmacRequired: false,
    suspended: false,
    allowedOrigins: ['https://app.globex.example'],
    webhookSecret: 'whsec_fuzz_globex_0123456789abcdef',
    initial: { cus_shared: 'active', cus_globex_warn: 'warning' },
  },
  {
    slug: 'initech',
    tier: 'scale',
    cardUpdateUrl: 'https://billing.initech.example/card',
    hmacRequired: false,
    suspended: true,
    allowedOrigins: null,
    webhookSecret: 'whsec_fuzz_initech_0123456789abcdef',
    initial: { cus_shared: 'lockout' },
  },
];
const POOL = [
  'cus_shared',
  'cus_acme_only',
  'cus_known_active',
  'cus_eu_only',
  'cus_globex_warn',
  'cus_nobody',
  'cus_SHARED',
];
const FRESH = ['cus_fz_0', 'cus_fz_1', 'cus_fz_2', 'cus_fz_3'];
/** Every customer whose status the test predicts; events with random fields never name one. */
const MODELLED = [...POOL, ...FRESH];
const MODELLED_RE = /cus_(shared|acme_only|known_active|eu_only|globex_warn|nobody|SHARED|fz_)/;

// --- the model: what the test set up and what it sent ---------------------------------------

/** Where a status stands in the (created, rank, id) order of docs/stripe.md, statuses from dunning episodes. */
interface Position {
  status: Status | null;
  atMs: number;
  rank: number;
  id: string;
}
const RANK = { warning: 1, lockout: 2, active: 3, removed: 4 } as const;

interface Delivered {
  id: string;
  payload: string;
  effect: Effect;
  customer: string;
  createdS: number;
}

interface TenantState {
  spec: TenantSpec;
  keys: string[];
  expiredKeys: string[];
  hmacSecrets: string[];
  positions: Map<string, Position>;
  /** Ids this tenant keeps: a later delivery of one is a duplicate. */
  recordedIds: Set<string>;
  /** Every event id this tenant answered with a 2xx. */
  acceptedIds: Set<string>;
  delivered: Delivered[];
}
type World = TenantState[];

interface Stats {
  requests: number;
  statuses: Map<number, number>;
  serverErrors: number;
  rateLimited: number;
  lookupOk: number;
  webhookAccepted: number;
  crossTenantRefused: number;
}

function newStats(): Stats {
  return {
    requests: 0,
    statuses: new Map(),
    serverErrors: 0,
    rateLimited: 0,
    lookupOk: 0,
    webhookAccepted: 0,
    crossTenantRefused: 0,
  };
}

function statusOf(state: TenantState, cus: string): Status | undefined {
  return state.positions.get(cus)?.status ?? undefined;
}

function stateAt(world: World, t: number): TenantState {
  const state = world[t % world.length];
  if (!state) throw new Error('no tenant');
  return state;
}

/** The 200 body of docs/api.md, the lookup for a subscriber of this tenant. */
function expectedBody(spec: TenantSpec, status: Status | undefined): Record<string, unknown> {
  if (status === undefined) return { status: 'active' };
  return {
    status,
    card_update_url: status === 'warning' ? spec.cardUpdateUrl : null,
    entitlements: TIER_FLAGS[spec.tier],
  };
}

/** The hosted invoice pages the fixtures name (`hostedInvoiceUrl`). */
const PAY_URL_RE = /^https:\/\/invoice\.stripe\.com\/i\/acct_1TestAccount0000\/test_in_[0-9a-f]+\?s=ap$/;

/**
 * A lookup's body without its pay link (docs/policy.md), which the model does not follow:
 * it may be there only for a signed lookup of a warning or a lockout, and only as the hosted
 * page of one of the fixtures' invoices.
 */
function withoutPayUrl(parsed: unknown, signed: boolean, where: string): unknown {
  if (typeof parsed !== 'object' || parsed === null || !('pay_url' in parsed)) return parsed;
  const { pay_url: payUrl, ...rest } = parsed as Record<string, unknown>;
  expect(signed, `pay_url on an unsigned lookup: ${where}`).toBe(true);
  expect(['warning', 'lockout'], where).toContain(rest.status);
  expect(payUrl, where).toMatch(PAY_URL_RE);
  return rest;
}

function hmacHex(secret: string, cus: string): string {
  return createHmac('sha256', Buffer.from(secret, 'utf8')).update(cus, 'utf8').digest('hex');
}

function stripeSignature(secret: string, timestampS: number, body: Buffer): string {
  return `t=${timestampS},v1=${createHmac('sha256', secret).update(`${timestampS}.`).update(body).digest('hex')}`;
}

function pctAll(s: string): string {
  return [...Buffer.from(s, 'utf8')].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('');
}

/** encodeURIComponent, or the UTF-8 bytes percent-encoded when the string holds a lone surrogate. */
function safeEncode(s: string): string {
  try {
    return encodeURIComponent(s);
  } catch {
    return pctAll(s);
  }
}

function percentDecode(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

function decodeQueryPart(s: string): string {
  const spaced = s.replaceAll('+', ' ');
  return percentDecode(spaced) ?? spaced;
}

/** `application/x-www-form-urlencoded` pairs, every value kept (a repeated name is an array). */
function parseQuery(search: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const pair of search.split('&')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    const key = decodeQueryPart(eq < 0 ? pair : pair.slice(0, eq));
    const value = decodeQueryPart(eq < 0 ? '' : pair.slice(eq + 1));
    out.set(key, [...(out.get(key) ?? []), value]);
  }
  return out;
}

/** The tenant a path names once percent-decoded, exactly; null when it names none. */
function tenantOfPath(world: World, url: string, prefix: string): { state: TenantState | null; search: string } | null {
  const q = url.indexOf('?');
  const path = q < 0 ? url : url.slice(0, q);
  if (!path.startsWith(prefix)) return null;
  const segment = path.slice(prefix.length);
  const slug = segment.includes('/') ? null : percentDecode(segment);
  return { state: world.find((s) => s.spec.slug === slug) ?? null, search: q < 0 ? '' : url.slice(q + 1) };
}

// --- one request and its answer, however it was sent ------------------------------------------

interface Exchange {
  method: string;
  /** The request target as the server received it. */
  url: string;
  authorization: string | undefined;
  /** How many Authorization headers were sent: more than one is refused (check 1). */
  authorizations: number;
  origin: string | undefined;
  status: number;
  headers: Record<string, string | undefined>;
  body: string;
}

function show(x: Exchange): string {
  const cut = (s: string | undefined) => (s !== undefined && s.length > 300 ? `${s.slice(0, 300)}...(${s.length})` : s);
  return JSON.stringify({
    method: x.method,
    url: cut(x.url),
    authorization: cut(x.authorization),
    origin: x.origin,
    status: x.status,
    body: cut(x.body),
  });
}

function flatHeaders(headers: Record<string, unknown>): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(headers))
    out[k.toLowerCase()] = v === undefined ? undefined : Array.isArray(v) ? v.join(', ') : String(v);
  return out;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** What every answer owes, whatever was asked: below 500, and a problem when an error. */
function checkAnyAnswer(x: Exchange, stats: Stats): void {
  stats.requests += 1;
  stats.statuses.set(x.status, (stats.statuses.get(x.status) ?? 0) + 1);
  if (x.status >= 500) stats.serverErrors += 1;
  if (x.status === 429) stats.rateLimited += 1;
  const where = show(x);
  expect(x.status, where).toBeGreaterThanOrEqual(200);
  expect(x.status, where).toBeLessThan(500);
  if (x.status >= 400) {
    expect(x.headers['content-type'] ?? '', where).toMatch(/^application\/problem\+json/);
    if (x.method !== 'HEAD') {
      const problem = parseJson(x.body);
      expect(problem, where).toMatchObject({
        type: 'about:blank',
        status: x.status,
        code: expect.any(String),
        title: expect.any(String),
      });
      // A problem carries nothing else: no status or setting of any tenant.
      expect(Object.keys(problem as object).sort(), where).toEqual(['code', 'detail', 'status', 'title', 'type']);
    }
    if (x.status === 401) expect(x.headers['www-authenticate'], where).toBe('Bearer');
  }
}

type Predicted = { status: 200; body: Record<string, unknown> } | { status: number; code: string };

/** docs/api.md, the lookup, checks 1 to 6 in their order, on the request as received. */
function predictLookup(world: World, x: Pick<Exchange, 'url' | 'authorization' | 'authorizations'>): Predicted | null {
  const target = tenantOfPath(world, x.url, LOOKUP_PREFIX);
  if (target === null) return null;
  // An empty or multi-segment path is another route (an unknown one): not the lookup's checks.
  const segment = (x.url.split('?')[0] ?? '').slice(LOOKUP_PREFIX.length);
  if (segment === '' || segment.includes('/')) return null;
  const auth = x.authorization;
  if (x.authorizations > 1) return { status: 401, code: 'invalid_publishable_key' };
  if (auth === undefined || auth.trim() === '') return { status: 401, code: 'missing_publishable_key' };
  const token = BEARER.exec(auth)?.[1];
  if (token === undefined) return { status: 401, code: 'invalid_publishable_key' };
  const state = target.state;
  if (state === null) return { status: 404, code: 'tenant_not_found' };
  if (!state.keys.includes(token)) return { status: 401, code: 'invalid_publishable_key' };
  if (state.spec.suspended) return { status: 402, code: 'tenant_suspended' };
  const query = parseQuery(target.search);
  const ids = query.get('processor_customer_id') ?? [];
  const cus = ids[0];
  if (cus === undefined) return { status: 400, code: 'missing_processor_customer_id' };
  if (ids.length > 1 || !CUSTOMER_ID.test(cus)) return { status: 400, code: 'invalid_processor_customer_id' };
  const hmacs = query.get('hmac') ?? [];
  const hmac = hmacs[0];
  if (hmac === undefined) {
    if (state.spec.hmacRequired) return { status: 403, code: 'hmac_required' };
  } else if (
    hmacs.length > 1 ||
    !HMAC_HEX.test(hmac) ||
    !state.hmacSecrets.some((s) => hmacHex(s, cus) === hmac.toLowerCase())
  ) {
    return { status: 403, code: 'hmac_mismatch' };
  }
  return { status: 200, body: expectedBody(state.spec, statusOf(state, cus)) };
}

/**
 * A 200 on the lookup's path, judged on its own: the path names a tenant, the key is one
 * of that tenant's current keys, the query is one valid customer id (with its hmac when
 * one is sent or required), and the body is that tenant's answer for that customer.
 */
function checkLookupSuccess(world: World, x: Exchange, stats: Stats): void {
  stats.lookupOk += 1;
  const where = show(x);
  expect(['GET', 'HEAD'], where).toContain(x.method);
  const target = tenantOfPath(world, x.url, LOOKUP_PREFIX);
  const state = target?.state ?? null;
  expect(state, `a 200 for a path that names no tenant: ${where}`).not.toBeNull();
  if (target === null || state === null) return;
  expect(state.spec.suspended, where).toBe(false);
  const token = /^bearer +(\S+) *$/i.exec(x.authorization ?? '')?.[1];
  expect(state.keys, `a 200 without a current key of ${state.spec.slug}: ${where}`).toContain(token);
  const query = parseQuery(target.search);
  const ids = query.get('processor_customer_id') ?? [];
  expect(ids, where).toHaveLength(1);
  const cus = ids[0] ?? '';
  expect(cus, where).toMatch(CUSTOMER_ID);
  const hmacs = query.get('hmac') ?? [];
  expect(hmacs.length, where).toBeLessThanOrEqual(1);
  const hmac = hmacs[0];
  if (hmac === undefined) expect(state.spec.hmacRequired, where).toBe(false);
  else
    expect(
      state.hmacSecrets.map((s) => hmacHex(s, cus)),
      where,
    ).toContain(hmac.toLowerCase());
  expect(x.headers['content-type'] ?? '', where).toMatch(/^application\/json/);
  expect(x.headers['cache-control'], where).toBe('no-store');
  checkCors(state, x);
  if (x.method === 'GET') {
    const expected = expectedBody(state.spec, statusOf(state, cus));
    const parsed = withoutPayUrl(parseJson(x.body), hmac !== undefined, where);
    expect(parsed, `wrong answer for ${state.spec.slug}/${cus}: ${where}`).toEqual(expected);
    expect(Object.keys(parsed as object), where).toEqual(Object.keys(expected));
  }
}

/** A tenant that lists its origins has only those echoed back, to those origins. */
function checkCors(state: TenantState, x: Exchange): void {
  const where = show(x);
  const allowed = x.headers['access-control-allow-origin'];
  const list = state.spec.allowedOrigins;
  if (list === null) {
    expect(allowed, where).toBe('*');
    return;
  }
  if (allowed !== undefined) {
    expect(list, where).toContain(allowed);
    expect(allowed, where).toBe(x.origin);
  }
  expect(x.headers.vary ?? '', where).toMatch(/origin/i);
}

/** The lookup answers every tenant's subscriber exactly as the model says. */
async function expectModelAnswer(h: Harness, state: TenantState, cus: string): Promise<void> {
  const key = state.keys[0] ?? '';
  const secret = state.hmacSecrets[0] ?? '';
  const res = await h.app.inject({
    method: 'GET',
    url: `${LOOKUP_PREFIX}${state.spec.slug}?processor_customer_id=${cus}&hmac=${hmacHex(secret, cus)}`,
    headers: { authorization: `Bearer ${key}` },
  });
  const where = `known-good lookup ${state.spec.slug}/${cus}: ${res.statusCode} ${res.body}`;
  if (state.spec.suspended) {
    expect(res.statusCode, where).toBe(402);
    return;
  }
  expect(res.statusCode, where).toBe(200);
  expect(withoutPayUrl(res.json(), true, where), where).toEqual(expectedBody(state.spec, statusOf(state, cus)));
}

// --- arbitraries: the lookup ------------------------------------------------------------------

const TENANT = fc.nat({ max: SPECS.length - 1 });

/** Ways to write a tenant's slug in a path, most of which name no tenant at all. */
const SLUG_FORMS = {
  exact: (s: string) => s,
  pctAll: (s: string) => pctAll(s),
  pctLower: (s: string) => pctAll(s).toLowerCase(),
  pctDash: (s: string) => s.replace('-', '%2D').replace('a', '%61'),
  double: (s: string) => pctAll(pctAll(s)),
  upper: (s: string) => s.toUpperCase(),
  trailingSlash: (s: string) => `${s}/`,
  leadingSlash: (s: string) => `/${s}`,
  doubleSlash: (s: string) => `${s}//`,
  dotdot: (s: string) => `x/../${s}`,
  dotdotOut: (s: string) => `${s}/../../healthz`,
  dotdotEncoded: (s: string) => `x%2F..%2F${s}`,
  nul: (s: string) => `${s}%00`,
  semicolon: (s: string) => `${s};jsessionid=1`,
  space: (s: string) => `${s}%20`,
  plus: (s: string) => `${s}+`,
  encodedSlash: (s: string) => `${s}%2F`,
  backslash: (s: string) => `${s}\\`,
  fragment: (s: string) => `${s}#x`,
  badPct: (s: string) => `${s}%`,
  badPct2: (s: string) => `${s}%zz`,
  badUtf8: (s: string) => `${s}%C3%28`,
  overlongUtf8: (s: string) => `%C0%AF${s}`,
  surrogate: (s: string) => `${s}%ED%A0%80`,
  unicode: (s: string) => `${s}\u00e9`,
  fullwidth: (s: string) => s.replace('a', '\uff41'),
  repeated: (s: string) => s.repeat(20),
  overlong: (s: string) => `${s}${'x'.repeat(400)}`,
} as const;
type SlugForm = keyof typeof SLUG_FORMS;
const SLUG_FORM_NAMES = Object.keys(SLUG_FORMS) as SlugForm[];
/** Forms that name the tenant exactly, once decoded. */
const EXACT_FORMS: ReadonlySet<SlugForm> = new Set(['exact', 'pctAll', 'pctLower', 'pctDash']);

type SlugRef = { kind: 'tenant'; t: number; form: SlugForm } | { kind: 'literal'; text: string };

const literalSlug = fc.oneof(
  fc.constantFrom(
    'nobody',
    'acme-e',
    'acmeeu',
    'acme-eu-',
    'acme--eu',
    '-acme',
    'a',
    '',
    '..',
    '.',
    '%2e%2e',
    '%2F',
    'x'.repeat(63),
    'x'.repeat(64),
    'healthz',
    '..%2Fhealthz',
    '__proto__',
    'constructor',
    'acme%00eu',
  ),
  fc.string({ unit: 'binary', maxLength: 30 }).map(safeEncode),
  fc.string({ unit: 'grapheme-ascii', maxLength: 30 }),
  fc.integer({ min: 250, max: 4000 }).map((n) => 'a'.repeat(n)),
);

const slugRef: fc.Arbitrary<SlugRef> = fc.oneof(
  {
    weight: 20,
    arbitrary: fc.record({ kind: fc.constant('tenant' as const), t: TENANT, form: fc.constant<SlugForm>('exact') }),
  },
  {
    weight: 5,
    arbitrary: fc.record({
      kind: fc.constant('tenant' as const),
      t: TENANT,
      form: fc.constantFrom(...SLUG_FORM_NAMES),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('literal' as const), text: literalSlug }) },
);

function renderSlug(world: World, ref: SlugRef): string {
  return ref.kind === 'tenant' ? SLUG_FORMS[ref.form](stateAt(world, ref.t).spec.slug) : ref.text;
}

const INVALID_CUSTOMERS = [
  '',
  'cus',
  'cus_',
  'CUS_shared',
  'Cus_shared',
  'cus-shared',
  'cus_shared ',
  ' cus_shared',
  'cus_shared\u0000',
  'cus_shared\n',
  'cus_a.b',
  'cus_\u00e9',
  'cus_shared/x',
  `cus_${'b'.repeat(252)}`,
  `cus_${'c'.repeat(5000)}`,
  'cus_shared&hmac=x',
  'cus_shared#x',
  '%',
  'cus_%41',
  'cus_shared\u200b',
  '\ufeffcus_shared',
];
const customerValue = fc.oneof(
  { weight: 20, arbitrary: fc.constantFrom(...MODELLED) },
  { weight: 1, arbitrary: fc.constant(`cus_${'a'.repeat(251)}`) },
  { weight: 3, arbitrary: fc.constantFrom(...INVALID_CUSTOMERS) },
  { weight: 1, arbitrary: fc.stringMatching(/^cus_[A-Za-z0-9_]{1,24}$/) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 24 }).map((s) => `cus_${s}`) },
  { weight: 2, arbitrary: fc.integer({ min: 248, max: 20_000 }).map((n) => `cus_${'x'.repeat(n)}`) },
);

type HmacMangle = 'none' | 'truncate' | 'extend' | 'flip' | 'space' | 'plus';
type QueryPart =
  | { kind: 'cus'; value: string; enc: 'component' | 'all' | 'raw'; pctKey: boolean }
  | { kind: 'hmac'; t: number | 'path'; secret: number; of: string | null; upper: boolean; mangle: HmacMangle }
  | { kind: 'raw'; text: string };

const cusPart: fc.Arbitrary<QueryPart> = fc.record({
  kind: fc.constant('cus' as const),
  value: customerValue,
  enc: fc.constantFrom('component', 'component', 'component', 'all', 'raw'),
  pctKey: fc.boolean(),
});

const hmacPart: fc.Arbitrary<QueryPart> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('hmac' as const),
      t: fc.oneof({ weight: 6, arbitrary: fc.constant('path' as const) }, { weight: 1, arbitrary: TENANT }),
      secret: fc.nat(1),
      of: fc.oneof({ weight: 8, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constantFrom(...MODELLED) }),
      upper: fc.boolean(),
      mangle: fc.oneof(
        { weight: 8, arbitrary: fc.constant<HmacMangle>('none') },
        { weight: 1, arbitrary: fc.constantFrom<HmacMangle>('truncate', 'extend', 'flip', 'space', 'plus') },
      ),
    }),
  },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom(
        '',
        'x',
        '0'.repeat(64),
        'g'.repeat(64),
        'F'.repeat(64),
        '%30'.repeat(64),
        '0'.repeat(128),
        '\u00e9'.repeat(32),
      )
      .map((v): QueryPart => ({ kind: 'raw', text: `hmac=${v}` })),
  },
);

const RAW_PARAMS = [
  'foo=bar',
  'status=lockout',
  'tenant=acme-eu',
  'tenantSlug=acme-eu',
  'callback=x',
  '__proto__=x',
  '__proto__[processor_customer_id]=cus_shared',
  'constructor=x',
  'constructor[prototype][status]=warning',
  'hasOwnProperty=1',
  'toString=1',
  'processor_customer_id',
  'processor_customer_id=',
  'processor_customer_id[]=cus_shared',
  'processor_customer_id[0]=cus_shared',
  'PROCESSOR_CUSTOMER_ID=cus_shared',
  'processor_customer_id%00=cus_shared',
  'hmac',
  'hmac=',
  'HMAC=00',
  '+',
  '++=+',
  '%',
  '%%',
  '%zz=1',
  'x=%zz',
  '=',
  '==x',
  '&',
  '&&',
  'x=%E0%A4%A',
  'x=%C0%AF',
  'x=%FF',
  'x=%00',
  '%3D=%26',
  `big=${'y'.repeat(3000)}`,
  ';',
  'a;b=c',
  'processor_customer_id=cus_shared%26hmac%3D00',
];
const rawPart: fc.Arbitrary<QueryPart> = fc
  .oneof(
    fc.constantFrom(...RAW_PARAMS),
    fc
      .tuple(fc.string({ maxLength: 12 }), fc.string({ maxLength: 20 }))
      .map(([k, v]) => `${safeEncode(k)}=${safeEncode(v)}`),
    fc.string({ unit: 'grapheme-ascii', maxLength: 20 }),
  )
  .map((text) => ({ kind: 'raw', text }));

const queryArb: fc.Arbitrary<QueryPart[]> = fc
  .tuple(
    fc.option(cusPart, { freq: 8, nil: null }),
    fc.option(hmacPart, { freq: 2, nil: null }),
    fc.array(
      fc.oneof(
        { weight: 4, arbitrary: rawPart },
        { weight: 1, arbitrary: cusPart },
        { weight: 1, arbitrary: hmacPart },
      ),
      { maxLength: 4 },
    ),
    fc.nat(),
  )
  .map(([cus, hmac, extra, rotation]) => {
    const parts = [...(cus ? [cus] : []), ...(hmac ? [hmac] : []), ...extra];
    const r = parts.length === 0 ? 0 : rotation % parts.length;
    return [...parts.slice(r), ...parts.slice(0, r)];
  });

function renderQuery(world: World, parts: QueryPart[], pathTenant: number): string {
  const first = parts.find((p): p is Extract<QueryPart, { kind: 'cus' }> => p.kind === 'cus')?.value ?? 'cus_shared';
  return parts
    .map((p) => {
      if (p.kind === 'raw') return p.text;
      if (p.kind === 'cus') {
        const key = p.pctKey ? pctAll('processor_customer_id') : 'processor_customer_id';
        const value = p.enc === 'component' ? safeEncode(p.value) : p.enc === 'all' ? pctAll(p.value) : p.value;
        return `${key}=${value}`;
      }
      const state = stateAt(world, p.t === 'path' ? pathTenant : p.t);
      const secret = state.hmacSecrets[p.secret % state.hmacSecrets.length] ?? '';
      let hex = hmacHex(secret, p.of ?? first);
      if (p.upper) hex = hex.toUpperCase();
      if (p.mangle === 'truncate') hex = hex.slice(0, 63);
      if (p.mangle === 'extend') hex = `${hex}0`;
      if (p.mangle === 'flip') hex = `${hex.slice(0, -1)}${hex.endsWith('0') ? '1' : '0'}`;
      if (p.mangle === 'space') hex = `%20${hex}`;
      if (p.mangle === 'plus') hex = `${hex}+`;
      return `hmac=${hex}`;
    })
    .join('&');
}

type KeyMutation = 'none' | 'flipLast' | 'dropLast' | 'append' | 'upper' | 'prefix';
type AuthSpec =
  | {
      kind: 'key';
      t: number | 'path';
      expired: boolean;
      idx: number;
      scheme: string;
      sep: string;
      suffix: string;
      mutate: KeyMutation;
    }
  | { kind: 'literal'; text: string };

const latin1 = (maxLength: number) =>
  fc.string({ unit: fc.integer({ min: 0x20, max: 0xff }).map((c) => String.fromCharCode(c)), maxLength });

const keyAuth: fc.Arbitrary<AuthSpec> = fc.record({
  kind: fc.constant('key' as const),
  t: fc.oneof({ weight: 5, arbitrary: fc.constant('path' as const) }, { weight: 2, arbitrary: TENANT }),
  expired: fc.boolean(),
  idx: fc.nat(1),
  scheme: fc.oneof(
    { weight: 10, arbitrary: fc.constant('Bearer') },
    {
      weight: 3,
      arbitrary: fc.constantFrom(
        'bearer',
        'BEARER',
        'bEaReR',
        'Basic',
        'Token',
        'Bearer:',
        'Bearer=',
        '',
        'Bear',
        'Bearerx',
        'Digest',
        '\u00a0Bearer',
      ),
    },
  ),
  sep: fc.oneof(
    { weight: 10, arbitrary: fc.constant(' ') },
    { weight: 2, arbitrary: fc.constantFrom('  ', '\t', '', ' \t', '\u00a0', '   ') },
  ),
  suffix: fc.oneof(
    { weight: 10, arbitrary: fc.constant('') },
    {
      weight: 2,
      arbitrary: fc.constantFrom(' ', '  ', '\t', ',', ', Bearer x', ' extra', '\u00ff', '=', '==', ';', '%20'),
    },
  ),
  mutate: fc.oneof(
    { weight: 10, arbitrary: fc.constant<KeyMutation>('none') },
    { weight: 2, arbitrary: fc.constantFrom<KeyMutation>('flipLast', 'dropLast', 'append', 'upper', 'prefix') },
  ),
});
const literalAuth: fc.Arbitrary<AuthSpec> = fc
  .oneof(
    fc.constantFrom(
      '',
      ' ',
      'Bearer',
      'Bearer ',
      'Bearer pk_',
      `Bearer pk_${'A'.repeat(24)}`,
      `Bearer ${'a'.repeat(20_000)}`,
      'Basic dXNlcjpwYXNz',
      'Bearer null',
      'Bearer undefined',
    ),
    latin1(60),
    latin1(40).map((s) => `Bearer ${s}`),
  )
  .map((text) => ({ kind: 'literal', text }));
/** The path tenant's current key, well formed: the fuzz must often get past check 3. */
const pristineAuth: fc.Arbitrary<AuthSpec> = fc.nat(1).map((idx) => ({
  kind: 'key',
  t: 'path',
  expired: false,
  idx,
  scheme: 'Bearer',
  sep: ' ',
  suffix: '',
  mutate: 'none',
}));
/** No header, one, or the header twice (of which a server keeps the first). */
const authArb: fc.Arbitrary<AuthSpec[]> = fc.oneof(
  { weight: 1, arbitrary: fc.constant<AuthSpec[]>([]) },
  { weight: 12, arbitrary: pristineAuth.map((a) => [a]) },
  { weight: 8, arbitrary: keyAuth.map((a) => [a]) },
  { weight: 2, arbitrary: literalAuth.map((a) => [a]) },
  { weight: 1, arbitrary: fc.tuple(fc.oneof(keyAuth, literalAuth), keyAuth).map((pair): AuthSpec[] => [...pair]) },
);

function renderAuth(world: World, spec: AuthSpec, pathTenant: number): string {
  if (spec.kind === 'literal') return spec.text;
  const state = stateAt(world, spec.t === 'path' ? pathTenant : spec.t);
  const pool = spec.expired && state.expiredKeys.length > 0 ? state.expiredKeys : state.keys;
  let key = pool[spec.idx % pool.length] ?? '';
  if (spec.mutate === 'flipLast') key = `${key.slice(0, -1)}${key.endsWith('A') ? 'B' : 'A'}`;
  if (spec.mutate === 'dropLast') key = key.slice(0, -1);
  if (spec.mutate === 'append') key = `${key}A`;
  if (spec.mutate === 'upper') key = key.toUpperCase();
  if (spec.mutate === 'prefix') key = `x${key}`;
  return `${spec.scheme}${spec.sep}${key}${spec.suffix}`;
}

const extraHeader: fc.Arbitrary<[string, string]> = fc.oneof(
  fc.tuple(
    fc.constant('origin'),
    fc.constantFrom(
      'https://app.globex.example',
      'https://evil.example',
      'null',
      '',
      'https://app.globex.example.evil.example',
      'HTTPS://APP.GLOBEX.EXAMPLE',
      'https://app.globex.example/',
    ),
  ),
  fc.tuple(
    fc.constant('x-forwarded-for'),
    fc.constantFrom('203.0.113.7', '::1', 'garbage', '1.1.1.1, 2.2.2.2', '', '127.0.0.1'),
  ),
  fc.tuple(
    fc.constant('content-type'),
    fc.constantFrom(
      'application/json',
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      '',
      'garbage',
      'application/json; charset=\u00ff',
    ),
  ),
  fc.tuple(
    fc.constant('accept-encoding'),
    fc.constantFrom('gzip', 'br', 'deflate, gzip;q=0', '*', 'identity;q=0', 'gzip;q=abc', ''),
  ),
  fc.tuple(
    fc.constant('accept'),
    fc.constantFrom('*/*', 'text/html', 'application/xml', 'application/problem+json', ''),
  ),
  fc.tuple(fc.constant('x-request-id'), fc.oneof(fc.stringMatching(/^[A-Za-z0-9._:-]{1,128}$/), latin1(200))),
  fc.tuple(fc.constant('host'), fc.constantFrom('evil.example', 'localhost:99999', '\u00ff', '127.0.0.1')),
  fc.tuple(fc.constant('cookie'), fc.constantFrom('session=x', 'a=b; c=d')),
  fc.tuple(fc.constant('x-http-method-override'), fc.constantFrom('POST', 'DELETE')),
  fc.tuple(fc.constant('access-control-request-method'), fc.constantFrom('GET', 'POST')),
  fc.tuple(
    fc.stringMatching(/^x-[a-z0-9-]{1,20}$/),
    fc.oneof(
      latin1(60),
      fc.integer({ min: 1000, max: 20_000 }).map((n) => 'v'.repeat(n)),
    ),
  ),
);

/** Methods a client library sends; the raw socket part sends the rest. */
const INJECT_METHODS = [
  'HEAD',
  'OPTIONS',
  'POST',
  'PUT',
  'DELETE',
  'PATCH',
  'TRACE',
  'PROPFIND',
  'SEARCH',
  'CONNECT',
  'get',
] as const;
const methodArb = fc.oneof(
  { weight: 16, arbitrary: fc.constant('GET') },
  { weight: 4, arbitrary: fc.constantFrom(...INJECT_METHODS) },
);
const payloadArb = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.jsonValue({ maxDepth: 3 }).map((v) => JSON.stringify(v) ?? 'null'),
);

const lookupRecipe = fc.record({
  method: methodArb,
  slug: slugRef,
  query: queryArb,
  auth: authArb,
  headers: fc.array(extraHeader, { maxLength: 4 }),
  payload: fc.option(payloadArb, { freq: 6, nil: undefined }),
});
type LookupRecipe = typeof lookupRecipe extends fc.Arbitrary<infer R> ? R : never;

/** The path and query as the server receives them from a client that parses the URL first. */
function asReceived(url: string): string {
  const u = new URL(url, 'http://localhost');
  return u.pathname + u.search;
}

function exchangeOf(
  method: string,
  url: string,
  headers: Record<string, string | string[]>,
  res: LightMyRequestResponse,
): Exchange {
  const auth = headers.authorization;
  const origin = headers.origin;
  return {
    method: method.toUpperCase(),
    url: asReceived(url),
    authorization: Array.isArray(auth) ? auth[0] : auth,
    authorizations: Array.isArray(auth) ? auth.length : auth === undefined ? 0 : 1,
    origin: Array.isArray(origin) ? origin[0] : origin,
    status: res.statusCode,
    headers: flatHeaders(res.headers),
    body: res.body,
  };
}

async function sendLookup(h: Harness, world: World, r: LookupRecipe): Promise<Exchange> {
  const pathTenant = r.slug.kind === 'tenant' ? r.slug.t : 0;
  const query = renderQuery(world, r.query, pathTenant);
  const url = `${LOOKUP_PREFIX}${renderSlug(world, r.slug)}${query === '' ? '' : `?${query}`}`;
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of r.headers) headers[name] = value;
  const auth = r.auth.map((a) => renderAuth(world, a, pathTenant));
  if (auth.length === 1 && auth[0] !== undefined) headers.authorization = auth[0];
  if (auth.length > 1) headers.authorization = auth;
  const res = await h.app.inject({
    method: r.method as 'GET',
    url,
    headers,
    ...(r.payload === undefined ? {} : { payload: r.payload }),
  });
  if (r.method.toUpperCase() === 'GET' && r.payload === undefined) await expectSameOnSocket(h, url, headers, res);
  return exchangeOf(r.method, url, headers, res);
}

/** Lookups answered alike through inject and a socket. */
let socketCompared = 0;

/**
 * What differs between two answers to one request by nature: the time, the connection, the
 * id, and the rate limit fields (the first answer's failure is counted before the second).
 */
const PER_ANSWER_HEADERS = new Set([
  'date',
  'connection',
  'keep-alive',
  'x-request-id',
  'ratelimit',
  'ratelimit-policy',
  'transfer-encoding',
]);

/**
 * The same GET through a real socket, where the fast path answers what it can: the same
 * status, body and headers as Fastify's route gave. Requests Node's client will not send
 * (characters it refuses in a path or a header) are skipped.
 */
async function expectSameOnSocket(
  h: Harness,
  url: string,
  headers: Record<string, string | string[]>,
  viaInject: LightMyRequestResponse,
): Promise<void> {
  // inject resolves dot segments and drops a fragment, and hands on characters a socket's
  // parser refuses as bytes: a browser does the same before it sends (it resolves, keeps
  // the fragment, percent-encodes), so only what a browser can send is compared.
  const path = url.split('?')[0] ?? '';
  if (url.includes('#') || !/^[\x21-\x7e]*$/.test(url) || /(^|\/)\.\.?(\/|$)/.test(path)) return;
  let res;
  try {
    res = await socketRequest(h.app, 'GET', url, headers);
  } catch (err) {
    if (
      (err as NodeJS.ErrnoException).code === 'ERR_UNESCAPED_CHARACTERS' ||
      (err as NodeJS.ErrnoException).code === 'ERR_INVALID_CHAR' ||
      (err as NodeJS.ErrnoException).code === 'ERR_INVALID_HTTP_TOKEN'
    )
      return;
    throw err;
  }
  // Only a socket has a header budget: inject never answers 431.
  if (res.statusCode === 431) return;
  socketCompared += 1;
  const where = `GET ${url} ${JSON.stringify(headers).slice(0, 300)}`;
  const comparable = (all: Record<string, unknown>) =>
    Object.fromEntries(Object.entries(all).filter(([k]) => !PER_ANSWER_HEADERS.has(k)));
  expect(res.statusCode, where).toBe(viaInject.statusCode);
  expect(res.body, where).toBe(viaInject.body);
  expect(JSON.stringify(comparable(res.headers)), where).toBe(JSON.stringify(comparable(viaInject.headers)));
  expect(res.headers['ratelimit-policy'] === undefined, where).toBe(
    viaInject.headers['ratelimit-policy'] === undefined,
  );
}

// --- arbitraries: the webhook ----------------------------------------------------------------

type ModelKind =
  | 'soft_charge'
  | 'hard_charge'
  | 'pi_soft'
  | 'pi_hard'
  | 'invoice_retrying'
  | 'invoice_exhausted'
  | 'invoice_manual'
  | 'action_required'
  | 'paid'
  | 'succeeded'
  | 'past_due'
  | 'unpaid'
  | 'reactivated'
  | 'canceled'
  | 'deleted'
  | 'irrelevant';
const MODEL_KINDS: ModelKind[] = [
  'soft_charge',
  'hard_charge',
  'pi_soft',
  'pi_hard',
  'invoice_retrying',
  'invoice_exhausted',
  'invoice_manual',
  'action_required',
  'paid',
  'succeeded',
  'past_due',
  'unpaid',
  'reactivated',
  'canceled',
  'deleted',
  'irrelevant',
];
/**
 * What an event does to its customer, per docs/stripe.md, statuses from dunning episodes. Every invoice and
 * subscription event of a customer here concerns one subscription, so the customer has
 * one episode and the last event wins; a decline names no invoice the store has heard
 * of, so it waits (`pending`) and changes nothing.
 */
type Effect = Status | 'delete' | 'none' | 'pending' | 'irrelevant';

interface ModelledSpec {
  kind: ModelKind;
  customer: string;
  api: ApiShape;
  softCode: string;
  hardCode: string;
  irrelevantType: string;
  metadata: unknown;
  depth: number | null;
}

const softCode = fc.oneof(
  fc.constantFrom(
    'insufficient_funds',
    'generic_decline',
    'card_velocity_exceeded',
    'try_again_later',
    'processing_error',
  ),
  fc.stringMatching(/^[a-z_]{1,30}$/).filter((c) => !HARD_DECLINES.includes(c)),
);
const modelledSpec: fc.Arbitrary<ModelledSpec> = fc.record({
  kind: fc.constantFrom(...MODEL_KINDS),
  customer: fc.oneof(
    { weight: 3, arbitrary: fc.constantFrom(...POOL) },
    { weight: 1, arbitrary: fc.constantFrom(...FRESH) },
  ),
  api: fc.constantFrom<ApiShape>(BASIL_API, LEGACY_API),
  softCode,
  hardCode: fc.constantFrom(...HARD_DECLINES),
  irrelevantType: fc.constantFrom(
    'customer.created',
    'charge.succeeded',
    'invoice.created',
    'product.updated',
    'customer.subscription.created',
  ),
  metadata: fc.jsonValue({ maxDepth: 3 }).filter((v) => !MODELLED_RE.test(JSON.stringify(v) ?? '')),
  depth: fc.option(fc.integer({ min: 100, max: 500 }), { freq: 8, nil: null }),
});

function nested(depth: number): unknown {
  let v: unknown = { leaf: true };
  for (let i = 0; i < depth; i += 1) v = i % 2 === 0 ? { n: v } : [v];
  return v;
}

function buildModelled(
  spec: ModelledSpec,
  id: string,
  createdS: number,
): { payload: Record<string, unknown>; effect: Effect } {
  const o = { created: createdS, id, api: spec.api };
  const cus = spec.customer;
  const ids = paymentIds({ subscription: `sub_fz_${cus}` });
  const made = ((): { e: ReturnType<typeof event>; effect: Effect } => {
    switch (spec.kind) {
      case 'soft_charge':
        return {
          e: event(
            'charge.failed',
            charge(cus, { outcome_reason: spec.softCode, failure_code: 'card_declined' }, spec.api),
            o,
          ),
          effect: 'pending',
        };
      case 'hard_charge':
        return {
          e: event('charge.failed', charge(cus, { outcome_reason: spec.hardCode }, spec.api), o),
          effect: 'pending',
        };
      case 'pi_soft':
        return {
          e: event('payment_intent.payment_failed', paymentIntent(cus, { decline_code: spec.softCode }), o),
          effect: 'pending',
        };
      case 'pi_hard':
        return {
          e: event('payment_intent.payment_failed', paymentIntent(cus, { decline_code: spec.hardCode }), o),
          effect: 'pending',
        };
      case 'invoice_retrying':
        return {
          e: event(
            'invoice.payment_failed',
            invoice(cus, { next_payment_attempt: createdS + 86_400, api: spec.api, ids }),
            o,
          ),
          effect: 'warning',
        };
      case 'invoice_exhausted':
        return {
          e: event('invoice.payment_failed', invoice(cus, { next_payment_attempt: null, api: spec.api, ids }), o),
          effect: 'lockout',
        };
      // Only automatic collection gates (the manual invoice is paid by hand).
      case 'invoice_manual':
        return {
          e: event(
            'invoice.payment_failed',
            invoice(cus, { collection_method: 'send_invoice', next_payment_attempt: null, api: spec.api, ids }),
            o,
          ),
          effect: 'none',
        };
      case 'action_required':
        return {
          e: event('invoice.payment_action_required', invoice(cus, { api: spec.api, ids }), o),
          effect: 'warning',
        };
      case 'paid':
        return { e: event('invoice.paid', invoice(cus, { api: spec.api, ids }), o), effect: 'active' };
      case 'succeeded':
        return { e: event('invoice.payment_succeeded', invoice(cus, { api: spec.api, ids }), o), effect: 'active' };
      case 'past_due':
        return {
          e: event('customer.subscription.updated', subscription(cus, 'past_due', { id: `sub_fz_${cus}` }), {
            ...o,
            previous: { status: 'active' },
          }),
          effect: 'warning',
        };
      case 'unpaid':
        return {
          e: event('customer.subscription.updated', subscription(cus, 'unpaid', { id: `sub_fz_${cus}` }), {
            ...o,
            previous: { status: 'past_due' },
          }),
          effect: 'lockout',
        };
      case 'reactivated':
        return {
          e: event('customer.subscription.updated', subscription(cus, 'active', { id: `sub_fz_${cus}` }), {
            ...o,
            previous: { status: 'past_due' },
          }),
          effect: 'active',
        };
      case 'canceled':
        return {
          e: event('customer.subscription.updated', subscription(cus, 'canceled', { id: `sub_fz_${cus}` }), {
            ...o,
            previous: { status: 'active' },
          }),
          effect: 'active',
        };
      case 'deleted':
        return { e: event('customer.deleted', customer(cus), o), effect: 'delete' };
      case 'irrelevant':
        return { e: event(spec.irrelevantType, { id: 'obj_1', customer: cus }, o), effect: 'irrelevant' };
    }
  })();
  const object = { ...made.e.data.object, metadata: spec.depth === null ? spec.metadata : nested(spec.depth) };
  return { payload: { ...made.e, data: { ...made.e.data, object }, account: 'acct_fuzz' }, effect: made.effect };
}

/** Signed events whose fields are anything at all; never about a customer the model tracks. */
const randomEvent: fc.Arbitrary<Record<string, unknown>> = fc
  .record(
    {
      id: fc.oneof(
        fc.stringMatching(/^evt_[A-Za-z0-9]{1,20}$/),
        fc.string({ maxLength: 20 }),
        fc.integer(),
        fc.constant(`evt_${'a'.repeat(300)}`),
      ),
      type: fc.oneof(
        fc.constantFrom(...RELEVANT_TYPES, 'customer.created'),
        fc.string({ maxLength: 20 }),
        fc.constant('a'.repeat(200)),
      ),
      created: fc.oneof(
        fc.constant('now'),
        fc.integer(),
        fc.double(),
        fc.constant('1700000000'),
        fc.constant(null),
        fc.constant(1e300),
      ),
      data: fc.oneof(
        fc.record(
          {
            object: fc.record(
              {
                id: fc.oneof(fc.stringMatching(/^cus_rnd[A-Za-z0-9]{1,8}$/), fc.string({ maxLength: 10 })),
                customer: fc.oneof(
                  fc.stringMatching(/^cus_rnd[A-Za-z0-9]{1,8}$/),
                  fc.stringMatching(/^cus_rnd[A-Za-z0-9]{1,8}$/).map((id) => ({ id })),
                  fc.constantFrom('', 'cus_', 'CUS_x', 'cus_\u00e9', `cus_${'z'.repeat(300)}`),
                  fc.jsonValue({ maxDepth: 2 }),
                ),
                status: fc.constantFrom('past_due', 'unpaid', 'active', 'canceled', 42),
                collection_method: fc.constantFrom('charge_automatically', 'send_invoice', null, 7),
                next_payment_attempt: fc.oneof(fc.integer(), fc.constant(null), fc.string({ maxLength: 5 })),
                outcome: fc.oneof(
                  fc.record({ reason: fc.oneof(fc.constantFrom(...HARD_DECLINES), fc.string({ maxLength: 8 })) }),
                  fc.jsonValue({ maxDepth: 1 }),
                ),
                failure_code: fc.oneof(fc.constantFrom(...HARD_DECLINES), fc.jsonValue({ maxDepth: 1 })),
                last_payment_error: fc.jsonValue({ maxDepth: 2 }),
                payments: fc.jsonValue({ maxDepth: 3 }),
              },
              { requiredKeys: [] },
            ),
            previous_attributes: fc.jsonValue({ maxDepth: 2 }),
          },
          { requiredKeys: ['object'] },
        ),
        fc.jsonValue({ maxDepth: 2 }),
      ),
      extra: fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }),
    },
    { requiredKeys: [] },
  )
  .filter((e) => !MODELLED_RE.test(JSON.stringify(e)) && !JSON.stringify(e).includes('evt_fz'));

type BodySpec =
  | { kind: 'modelled'; spec: ModelledSpec; borrowId: boolean }
  | { kind: 'redeliver'; from: number; idx: number }
  | { kind: 'random-event'; value: Record<string, unknown> }
  | { kind: 'bytes'; bytes: Uint8Array }
  | { kind: 'json'; value: unknown }
  | { kind: 'deep-array'; depth: number }
  | { kind: 'big'; size: number };

type Signer =
  { kind: 'destination' } | { kind: 'tenant'; t: number } | { kind: 'random'; secret: string } | { kind: 'none' };
type SigMangle =
  | 'none'
  | 'extra-v1'
  | 'dup-garbage'
  | 'spaces'
  | 'flip'
  | 'drop-v1'
  | 'empty'
  | 'garbage'
  | 'v0-only'
  | 'no-t'
  | 'upper';
type Tamper = 'none' | 'append-space' | 'flip-byte' | 'truncate' | 'bom';
/** Signature manglings that leave a valid v1 in the header: accepting them is allowed. */
const KEEPS_VALID_V1: ReadonlySet<SigMangle> = new Set(['none', 'extra-v1', 'dup-garbage', 'spaces']);
const JSON_TYPES = ['application/json', 'application/json; charset=utf-8'];
const WEBHOOK_BODY_LIMIT_BYTES = 1024 * 1024;

const bodySpec: fc.Arbitrary<BodySpec> = fc.oneof(
  {
    weight: 14,
    arbitrary: fc.record({ kind: fc.constant('modelled' as const), spec: modelledSpec, borrowId: fc.boolean() }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('redeliver' as const),
      from: fc.oneof(fc.constant(-1), TENANT),
      idx: fc.nat(),
    }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('random-event' as const), value: randomEvent }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('bytes' as const), bytes: fc.uint8Array({ maxLength: 2000 }) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('json' as const),
      value: fc.jsonValue({ maxDepth: 4 }).filter((v) => !MODELLED_RE.test(JSON.stringify(v) ?? '')),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('deep-array' as const), depth: fc.integer({ min: 1000, max: 20_000 }) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('big' as const),
      size: fc.constantFrom(100_000, 1024 * 1024 + 1, 2 * 1024 * 1024),
    }),
  },
);

const webhookRecipe = fc.record({
  to: fc.oneof(
    { weight: 3, arbitrary: TENANT.map((t): SlugRef => ({ kind: 'tenant', t, form: 'exact' })) },
    { weight: 1, arbitrary: slugRef },
  ),
  method: fc.oneof(
    { weight: 20, arbitrary: fc.constant('POST') },
    { weight: 1, arbitrary: fc.constantFrom('PUT', 'GET', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD') },
  ),
  body: bodySpec,
  signer: fc.oneof(
    { weight: 12, arbitrary: fc.constant<Signer>({ kind: 'destination' }) },
    { weight: 3, arbitrary: TENANT.map((t): Signer => ({ kind: 'tenant', t })) },
    {
      weight: 1,
      arbitrary: fc.stringMatching(/^whsec_[A-Za-z0-9]{8,40}$/).map((secret): Signer => ({ kind: 'random', secret })),
    },
    { weight: 1, arbitrary: fc.constant<Signer>({ kind: 'none' }) },
  ),
  tsOffset: fc.oneof(
    { weight: 8, arbitrary: fc.constant(0) },
    { weight: 2, arbitrary: fc.constantFrom(-30, -299, -301, -3600, 600, -1e9) },
  ),
  sigMangle: fc.oneof(
    { weight: 10, arbitrary: fc.constant<SigMangle>('none') },
    {
      weight: 3,
      arbitrary: fc.constantFrom<SigMangle>(
        'extra-v1',
        'dup-garbage',
        'spaces',
        'flip',
        'drop-v1',
        'empty',
        'garbage',
        'v0-only',
        'no-t',
        'upper',
      ),
    },
  ),
  tamper: fc.oneof(
    { weight: 10, arbitrary: fc.constant<Tamper>('none') },
    { weight: 2, arbitrary: fc.constantFrom<Tamper>('append-space', 'flip-byte', 'truncate', 'bom') },
  ),
  contentType: fc.oneof(
    { weight: 10, arbitrary: fc.constantFrom(...JSON_TYPES) },
    {
      weight: 2,
      arbitrary: fc.constantFrom(
        null,
        'text/plain',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=zz',
        '',
        'garbage',
        'application/json; charset=latin1',
        'APPLICATION/JSON',
      ),
    },
  ),
  pretty: fc.boolean(),
  headers: fc.array(
    fc.oneof(
      fc.tuple(fc.constant('content-encoding'), fc.constantFrom('gzip', 'br', 'identity', 'garbage')),
      fc.tuple(fc.constant('user-agent'), fc.constantFrom('Stripe/1.0 (+https://stripe.com/docs/webhooks)', '')),
      fc.tuple(fc.constant('x-forwarded-for'), fc.constantFrom('3.18.12.63', 'garbage')),
      fc.tuple(fc.stringMatching(/^x-[a-z0-9-]{1,20}$/), latin1(60)),
    ),
    { maxLength: 3 },
  ),
});
type WebhookRecipe = typeof webhookRecipe extends fc.Arbitrary<infer R> ? R : never;

function mangleSignature(header: string, mangle: SigMangle): string | string[] {
  switch (mangle) {
    case 'none':
      return header;
    case 'extra-v1':
      return `${header},v1=${'0'.repeat(64)}`;
    case 'dup-garbage':
      return [header, 'garbage'];
    case 'spaces':
      return header.replace(',', ', ');
    case 'flip':
      return `${header.slice(0, -1)}${header.endsWith('0') ? '1' : '0'}`;
    case 'drop-v1':
      return header.replace(/,v1=.*$/, '');
    case 'empty':
      return '';
    case 'garbage':
      return 't=abc,v1=zz';
    case 'v0-only':
      return header.replace('v1=', 'v0=');
    case 'no-t':
      return header.replace(/^t=\d+,/, '');
    case 'upper':
      return header.toUpperCase();
  }
}

function tamperBody(body: Buffer, tamper: Tamper): Buffer {
  switch (tamper) {
    case 'none':
      return body;
    case 'append-space':
      return Buffer.concat([body, Buffer.from(' ')]);
    case 'flip-byte': {
      const copy = Buffer.from(body);
      const i = Math.floor(copy.length / 2);
      copy[i] = (copy[i] ?? 0) ^ 0x01;
      return copy;
    }
    case 'truncate':
      return body.subarray(0, Math.max(0, body.length - 1));
    case 'bom':
      return Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), body]);
  }
}

interface Built {
  body: Buffer;
  /** The event as the model knows it, when the body is one. */
  modelled: (Delivered & { borrowed: boolean }) | null;
  /** A body made to be the event of a tenant (modelled or redelivered). */
  isEvent: boolean;
}

function buildWebhookBody(
  world: World,
  r: WebhookRecipe,
  destination: number,
  nowS: number,
  nextId: () => string,
): Built {
  const b = r.body;
  const encode = (v: unknown) => Buffer.from(r.pretty ? JSON.stringify(v, null, 2) : (JSON.stringify(v) ?? 'null'));
  switch (b.kind) {
    case 'modelled': {
      let id = nextId();
      let borrowed = false;
      if (b.borrowId) {
        const others = world.filter((_, i) => i !== destination).flatMap((s) => s.delivered);
        const pick = others[nowS % Math.max(1, others.length)];
        if (pick) {
          id = pick.id;
          borrowed = true;
        }
      }
      const { payload, effect } = buildModelled(b.spec, id, nowS);
      const body = encode(payload);
      return {
        body,
        modelled: { id, payload: body.toString('utf8'), effect, customer: b.spec.customer, createdS: nowS, borrowed },
        isEvent: true,
      };
    }
    case 'redeliver': {
      const from = b.from < 0 ? stateAt(world, destination) : stateAt(world, b.from);
      const pick = from.delivered[b.idx % Math.max(1, from.delivered.length)];
      if (!pick) return { body: Buffer.from('{}'), modelled: null, isEvent: false };
      return { body: Buffer.from(pick.payload), modelled: { ...pick, borrowed: false }, isEvent: true };
    }
    case 'random-event': {
      const { extra, ...fields } = b.value as { extra?: Record<string, unknown> } & Record<string, unknown>;
      const value = { ...(extra ?? {}), ...fields, ...(fields.created === 'now' ? { created: nowS } : {}) };
      return { body: encode(value), modelled: null, isEvent: false };
    }
    case 'bytes':
      return { body: Buffer.from(b.bytes), modelled: null, isEvent: false };
    case 'json':
      return { body: encode(b.value), modelled: null, isEvent: false };
    case 'deep-array':
      return { body: Buffer.from(`${'['.repeat(b.depth)}${']'.repeat(b.depth)}`), modelled: null, isEvent: false };
    case 'big':
      return { body: Buffer.from(`{"pad":"${'x'.repeat(b.size)}"}`), modelled: null, isEvent: false };
  }
}

/**
 * The model's side of an accepted event: the contract's order (created, rank, id), the
 * last one wins; a duplicate or an older event changes nothing.
 */
function applyAccepted(state: TenantState, ev: Delivered, outcome: unknown, where: string): void {
  if (ev.effect === 'irrelevant') {
    expect(outcome, where).toBe('irrelevant');
    return;
  }
  if (state.recordedIds.has(ev.id)) {
    expect(outcome, where).toBe('duplicate');
    return;
  }
  state.recordedIds.add(ev.id);
  if (ev.effect === 'none' || ev.effect === 'pending') {
    expect(outcome, where).toBe(ev.effect === 'none' ? 'ignored' : 'pending');
    return;
  }
  const status = ev.effect === 'delete' ? null : ev.effect;
  const next: Position = { status, atMs: ev.createdS * 1000, rank: RANK[status ?? 'removed'], id: ev.id };
  const current = state.positions.get(ev.customer);
  const newer =
    current === undefined ||
    next.atMs > current.atMs ||
    (next.atMs === current.atMs && (next.rank > current.rank || (next.rank === current.rank && next.id > current.id)));
  if (!newer) {
    expect(outcome, where).toBe('stale');
    return;
  }
  expect(outcome, where).toBe('applied');
  state.positions.set(ev.customer, next);
}

// --- the raw socket ---------------------------------------------------------------------------

interface RawAnswer {
  status: number;
  headers: Record<string, string | undefined>;
  body: string;
}

function dechunk(body: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  while (at < body.length) {
    const eol = body.indexOf('\r\n', at);
    if (eol < 0) break;
    const size = Number.parseInt(body.subarray(at, eol).toString('latin1'), 16);
    if (!Number.isFinite(size) || size === 0) break;
    out.push(body.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
  return Buffer.concat(out);
}

/** Writes raw bytes on a fresh connection and reads the answer until the server closes it. */
function rawExchange(port: number, request: Buffer, boundMs = 5_000): Promise<RawAnswer | null> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const bound = setTimeout(() => {
      socket.destroy();
      reject(
        new Error(
          `the server held the connection for ${boundMs} ms: ${JSON.stringify(request.toString('latin1').slice(0, 300))}`,
        ),
      );
    }, boundMs);
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(bound);
      let all = Buffer.concat(chunks);
      let end = all.indexOf('\r\n\r\n');
      // Interim answers (100 Continue) precede the one that counts.
      while (end >= 0 && /^HTTP\/1\.[01] 1\d\d/.test(all.subarray(0, 12).toString('latin1'))) {
        all = all.subarray(end + 4);
        end = all.indexOf('\r\n\r\n');
      }
      if (end < 0) {
        resolve(null);
        return;
      }
      const [statusLine = '', ...lines] = all.subarray(0, end).toString('latin1').split('\r\n');
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1] ?? 0);
      const headers: Record<string, string | undefined> = {};
      for (const line of lines) {
        const colon = line.indexOf(':');
        if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      const rawBody = all.subarray(end + 4);
      const body = headers['transfer-encoding']?.toLowerCase() === 'chunked' ? dechunk(rawBody) : rawBody;
      resolve({ status, headers, body: body.toString('utf8') });
    });
    // No half-close: a client waits for the answer, and the server closes (Connection: close).
    socket.on('connect', () => socket.write(request));
  });
}

const RAW_SLUG_FORMS = {
  exact: (s: string) => s,
  pctAll: (s: string) => pctAll(s),
  highByte: (s: string) => `${s}\xff`,
  latin1Prefix: (s: string) => `\xe9${s}`,
  utf8Raw: (s: string) => `${s}\xc3\xa9`,
  softHyphen: (s: string) => s.replace('-', '\xad'),
  badUtf8: (s: string) => `${s}%C3%28`,
  lonePct: (s: string) => `${s}%`,
  badHex: (s: string) => `${s}%G1`,
  surrogate: (s: string) => `${s}%ED%A0%80`,
  overlong: (s: string) => `%C0%AF${s}`,
  nul: (s: string) => `${s}%00`,
  rawNul: (s: string) => `${s}\x00`,
  rawSpace: (s: string) => `${s} x`,
  rawTab: (s: string) => `${s}\tx`,
  rawDel: (s: string) => `${s}\x7f`,
  dotdot: (s: string) => `../${s}`,
  doubleEncoded: (s: string) => pctAll(pctAll(s)),
} as const;
type RawSlugForm = keyof typeof RAW_SLUG_FORMS;
const RAW_SLUG_FORM_NAMES = Object.keys(RAW_SLUG_FORMS) as RawSlugForm[];

const RAW_QUERY_JUNK = [
  '\xff',
  '%ff',
  '%C3%28',
  '%',
  '%%',
  '%E2%82',
  '\xe9',
  '\xc3\xa9',
  '%C0%AF',
  '\xff=\xfe',
  '%ED%A0%80',
  '%00',
  '\x80',
];
const RAW_HEADER_LINES = [
  'X-Junk: \x80\xff\xfe',
  'X-\xff: 1',
  'Origin: https://app.globex.example',
  'Origin: \xff',
  'Accept-Encoding: gzip',
  'Content-Type: application/json',
  'X-Forwarded-For: \xff',
  'X-Request-Id: \xe9\xe9',
  'Cookie: \xff=\xff',
  'X-Folded: a\r\n b',
  'X-Nul: a\x00b',
  'X-Cr: a\rb',
  ' X-Leading-Space: 1',
  'Bad Header: 1',
  'X-Empty:',
  `X-Long: ${'L'.repeat(4000)}`,
  'Content-Length: abc',
  'Expect: 100-continue',
  'Upgrade: websocket',
  'Connection: Upgrade',
];

type RawAuth =
  | 'none'
  | 'valid'
  | 'other'
  | 'highSuffix'
  | 'latin1Prefix'
  | 'nbspScheme'
  | 'dupOtherFirst'
  | 'dupValidFirst'
  | 'tab'
  | 'folded'
  | 'utf8InToken';

const rawRecipe = fc.record({
  route: fc.oneof(
    { weight: 3, arbitrary: fc.constant('lookup' as const) },
    { weight: 1, arbitrary: fc.constant('webhook' as const) },
  ),
  method: fc.oneof(
    { weight: 8, arbitrary: fc.constant('default') },
    { weight: 1, arbitrary: fc.constantFrom('get', 'G\xffT', 'FOO', 'PRI', 'M-SEARCH', 'GET GET', '') },
  ),
  version: fc.oneof(
    { weight: 8, arbitrary: fc.constant('HTTP/1.1') },
    { weight: 1, arbitrary: fc.constantFrom('HTTP/1.0', 'HTTP/2.0', 'HTTP/1.2', 'http/1.1', 'HTTP/9.9', '') },
  ),
  t: TENANT,
  slugForm: fc.oneof(
    { weight: 4, arbitrary: fc.constant<RawSlugForm>('exact') },
    { weight: 6, arbitrary: fc.constantFrom(...RAW_SLUG_FORM_NAMES) },
  ),
  cus: fc.constantFrom(...MODELLED),
  cusJunk: fc.option(fc.constantFrom(...RAW_QUERY_JUNK), { freq: 2, nil: null }),
  queryJunk: fc.array(fc.constantFrom(...RAW_QUERY_JUNK), { maxLength: 2 }),
  hmac: fc.constantFrom('right', 'right', 'none', 'other', 'upperRight'),
  auth: fc.oneof(
    { weight: 6, arbitrary: fc.constant<RawAuth>('valid') },
    {
      weight: 4,
      arbitrary: fc.constantFrom<RawAuth>(
        'none',
        'other',
        'highSuffix',
        'latin1Prefix',
        'nbspScheme',
        'dupOtherFirst',
        'dupValidFirst',
        'tab',
        'folded',
        'utf8InToken',
      ),
    },
  ),
  host: fc.oneof(
    { weight: 8, arbitrary: fc.constant('Host: 127.0.0.1') },
    { weight: 1, arbitrary: fc.constantFrom('', 'Host: \xff', 'Host: a b', 'Host: 127.0.0.1\r\nHost: evil.example') },
  ),
  headerLines: fc.array(fc.constantFrom(...RAW_HEADER_LINES), { maxLength: 2 }),
  signer: fc.oneof(
    { weight: 2, arbitrary: fc.constant<'destination' | number>('destination') },
    { weight: 2, arbitrary: TENANT },
  ),
  kind: fc.constantFrom(...MODEL_KINDS),
  chunked: fc.boolean(),
});
type RawRecipe = typeof rawRecipe extends fc.Arbitrary<infer R> ? R : never;

function renderRawAuth(world: World, r: RawRecipe): string[] {
  const own = stateAt(world, r.t).keys[0] ?? '';
  const other = stateAt(world, r.t + 1).keys[0] ?? '';
  switch (r.auth) {
    case 'none':
      return [];
    case 'valid':
      return [`Bearer ${own}`];
    case 'other':
      return [`Bearer ${other}`];
    case 'highSuffix':
      return [`Bearer ${own}\xff`];
    case 'latin1Prefix':
      return [`Bearer \xe9${own}`];
    case 'nbspScheme':
      return [`\xa0Bearer ${own}`];
    case 'dupOtherFirst':
      return [`Bearer ${other}`, `Bearer ${own}`];
    case 'dupValidFirst':
      return [`Bearer ${own}`, `Bearer ${other}`];
    case 'tab':
      return [`Bearer\t${own}`];
    case 'folded':
      return [`Bearer\r\n ${own}`];
    case 'utf8InToken':
      return [`Bearer ${own.slice(0, 5)}\xc3\xa9${own.slice(5)}`];
  }
}

interface RawBuilt {
  request: Buffer;
  method: string;
  target: string;
  authorization: string | undefined;
  authorizations: number;
  origin: string | undefined;
  /** A webhook signed with the destination's own secret, untouched: it may be accepted. */
  mayAccept: boolean;
  crossTenant: boolean;
}

function buildRaw(world: World, r: RawRecipe, nowS: number, nextId: () => string): RawBuilt {
  const state = stateAt(world, r.t);
  const segment = RAW_SLUG_FORMS[r.slugForm](state.spec.slug);
  const authLines = renderRawAuth(world, r);
  const origin = r.headerLines.find((l) => l.startsWith('Origin: '))?.slice('Origin: '.length);
  let target: string;
  let body = Buffer.alloc(0);
  let mayAccept = false;
  let crossTenant = false;
  const defaultMethod = r.route === 'lookup' ? 'GET' : 'POST';
  const method = r.method === 'default' ? defaultMethod : r.method;
  if (r.route === 'lookup') {
    const secret = r.hmac === 'other' ? (stateAt(world, r.t + 1).hmacSecrets[0] ?? '') : (state.hmacSecrets[0] ?? '');
    const hex = hmacHex(secret, r.cus);
    const parts = [
      `processor_customer_id=${r.cus}${r.cusJunk ?? ''}`,
      ...(r.hmac === 'none' ? [] : [`hmac=${r.hmac === 'upperRight' ? hex.toUpperCase() : hex}`]),
      ...r.queryJunk,
    ];
    target = `${LOOKUP_PREFIX}${segment}?${parts.join('&')}`;
  } else {
    target = `${WEBHOOK_PREFIX}${segment}`;
    // An event signed by its own tenant names a customer the model does not track; one
    // signed by another tenant names a tracked one, and must change nothing.
    const signer = r.signer === 'destination' ? state : stateAt(world, r.signer);
    crossTenant = signer !== state;
    const cus = crossTenant ? r.cus : `cus_raw_${r.t}`;
    const spec: ModelledSpec = {
      kind: r.kind,
      customer: cus,
      api: BASIL_API,
      softCode: 'generic_decline',
      hardCode: 'lost_card',
      irrelevantType: 'customer.created',
      metadata: null,
      depth: null,
    };
    body = Buffer.from(JSON.stringify(buildModelled(spec, nextId(), nowS).payload));
    authLines.length = 0;
    authLines.push(stripeSignature(signer.spec.webhookSecret, nowS, body));
    mayAccept = !crossTenant && method === 'POST' && tenantOfPath(world, target, WEBHOOK_PREFIX)?.state === state;
  }
  const lines = [`${method} ${target} ${r.version}`.trimEnd()];
  if (r.host !== '') lines.push(r.host);
  const authName = r.route === 'lookup' ? 'Authorization' : 'Stripe-Signature';
  for (const a of authLines) lines.push(`${authName}: ${a}`);
  lines.push(...r.headerLines);
  if (r.route === 'webhook') {
    lines.push('Content-Type: application/json');
    lines.push(r.chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${body.length}`);
  }
  lines.push('Connection: close');
  const head = Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
  const payload =
    r.route === 'webhook' && r.chunked
      ? Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')])
      : body;
  return {
    request: Buffer.concat([head, payload]),
    method,
    target,
    authorization: r.route === 'lookup' ? authLines[0]?.replace(/^[ \t]+|[ \t]+$/g, '') : undefined,
    authorizations: r.route === 'lookup' ? authLines.length : 0,
    origin,
    mayAccept,
    crossTenant,
  };
}

// --- the properties --------------------------------------------------------------------------

describe.each(engines)('fuzzing the lookup and the Stripe webhook ($name)', (engine) => {
  let h: Harness;
  let world: World;
  const stats = { lookup: newStats(), webhook: newStats(), raw: newStats() };
  let eventCounter = 0;
  const nextId = () => `evt_fz_${engine.name}_${(eventCounter += 1)}`;

  beforeAll(async () => {
    // The rate limiter and the forwarding header are on the path of every request, with
    // quotas the run never reaches: a 429 here would be a bug, not a limit.
    const proxies = parseTrustedProxies('loopback');
    if (typeof proxies === 'string') throw new Error(proxies);
    h = await harness(engine, {
      rotationOverlapS: ROTATION_OVERLAP_S,
      rateLimits: UNREACHED_LIMITS,
      trustedProxies: proxies,
    });
    world = [];
    for (const spec of SPECS) {
      const created = await h.createTenant(spec.slug, {
        tier: spec.tier,
        card_update_url: spec.cardUpdateUrl,
        hmac_required: spec.hmacRequired,
        ...(spec.allowedOrigins ? { allowed_origins: spec.allowedOrigins } : {}),
      });
      const patched = await h.admin('PATCH', `/tenants/${spec.slug}`, {
        stripe_webhook_secret: spec.webhookSecret,
        suspended: spec.suspended,
      });
      expect(patched.statusCode, patched.body).toBe(200);
      world.push({
        spec,
        keys: [created.publishable_key],
        expiredKeys: [],
        hmacSecrets: [created.hmac_secret],
        positions: new Map(),
        recordedIds: new Set(),
        acceptedIds: new Set(),
        delivered: [],
      });
    }
    const rotate = async (t: number, key: 'publishable' | 'hmac'): Promise<string> => {
      const res = await h.admin('POST', `/tenants/${stateAt(world, t).spec.slug}/rotate`, { key });
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json() as { publishable_key?: string; hmac_secret?: string };
      const value = key === 'publishable' ? body.publishable_key : body.hmac_secret;
      if (typeof value !== 'string') throw new Error('rotation returned no key');
      return value;
    };
    // globex's first key outlives its overlap: it must verify nowhere afterwards.
    const globex = stateAt(world, 2);
    const fresh = await rotate(2, 'publishable');
    globex.expiredKeys = globex.keys;
    globex.keys = [fresh];
    h.clock.advance((ROTATION_OVERLAP_S + 1) * 1000);
    // acme holds two current keys, acme-eu two current HMAC secrets: either verifies.
    const acme = stateAt(world, 0);
    acme.keys = [await rotate(0, 'publishable'), ...acme.keys];
    const eu = stateAt(world, 1);
    eu.hmacSecrets = [await rotate(1, 'hmac'), ...eu.hmacSecrets];
    for (const state of world) {
      for (const [cus, status] of Object.entries(state.spec.initial)) {
        await h.setSubscriber(state.spec.slug, cus, status);
        state.positions.set(cus, { status, atMs: h.clock.ms, rank: RANK[status], id: '' });
      }
    }
  });
  afterAll(async () => {
    if (process.env.FUZZ_STATS) {
      for (const [name, s] of Object.entries(stats)) {
        const statuses = [...s.statuses.entries()]
          .sort(([a], [b]) => a - b)
          .map(([k, v]) => `${k}:${v}`)
          .join(' ');
        process.stdout.write(
          `fuzz ${engine.name} ${name}: ${s.requests} requests, 5xx ${s.serverErrors}, 429 ${s.rateLimited}, lookup 200 ${s.lookupOk}, ` +
            `webhook accepted ${s.webhookAccepted}, cross-tenant refused ${s.crossTenantRefused} [${statuses}]\n`,
        );
      }
    }
    await h?.close();
  });

  it("answers arbitrary lookups below 500, as problems, and only ever with the named tenant's answer", async () => {
    const s = stats.lookup;
    let predicted = 0;
    const comparedBefore = socketCompared;
    await fc.assert(
      fc.asyncProperty(lookupRecipe, async (r) => {
        const x = await sendLookup(h, world, r);
        checkAnyAnswer(x, s);
        const onLookup = tenantOfPath(world, x.url, LOOKUP_PREFIX) !== null;
        if (x.status === 200 && onLookup) checkLookupSuccess(world, x, s);
        if (x.status === 204 && onLookup) {
          const state = tenantOfPath(world, x.url, LOOKUP_PREFIX)?.state;
          if (state) checkCors(state, x);
        }
        if (onLookup && (x.method === 'GET' || x.method === 'HEAD') && x.status !== 429) {
          const expected = predictLookup(world, x);
          if (expected) {
            predicted += 1;
            const where = show(x);
            expect(x.status, where).toBe(expected.status);
            if ('code' in expected && x.method === 'GET')
              expect((parseJson(x.body) as { code?: unknown }).code, where).toBe(expected.code);
          }
        }
        // Whatever came before, a well-formed lookup still gets its tenant's answer.
        await expectModelAnswer(h, stateAt(world, 1), 'cus_shared');
        await expectModelAnswer(h, stateAt(world, r.slug.kind === 'tenant' ? r.slug.t : 0), 'cus_shared');
      }),
      { numRuns: LOOKUP_RUNS, seed: SEED, endOnFailure: true },
    );
    expect(s.serverErrors).toBe(0);
    // The fuzz reaches past the first checks: enough answers of each kind to mean something.
    expect(s.rateLimited, 'no quota is reached by the fuzz: a 429 is a limiter bug').toBe(0);
    expect(s.lookupOk).toBeGreaterThan(LOOKUP_RUNS / 20);
    expect(predicted).toBeGreaterThan(LOOKUP_RUNS / 2);
    expect(socketCompared - comparedBefore, 'lookups compared on a socket').toBeGreaterThan(LOOKUP_RUNS / 20);
    for (const status of [400, 401, 403, 404])
      expect(s.statuses.get(status) ?? 0, `status ${status}`).toBeGreaterThan(0);
  });

  it("never accepts an event on another tenant's URL, and applies exactly the events signed for the tenant", async () => {
    const s = stats.webhook;
    await fc.assert(
      fc.asyncProperty(webhookRecipe, async (r) => {
        h.clock.advance(1000);
        const nowS = Math.floor(h.clock.ms / 1000);
        const named = r.to.kind === 'tenant' ? r.to.t : 0;
        const url = `${WEBHOOK_PREFIX}${renderSlug(world, r.to)}`;
        const destination = tenantOfPath(world, asReceived(url), WEBHOOK_PREFIX)?.state ?? null;
        const built = buildWebhookBody(world, r, destination ? world.indexOf(destination) : named, nowS, nextId);
        const secret =
          r.signer.kind === 'destination'
            ? (destination ?? stateAt(world, named)).spec.webhookSecret
            : r.signer.kind === 'tenant'
              ? stateAt(world, r.signer.t).spec.webhookSecret
              : r.signer.kind === 'random'
                ? r.signer.secret
                : null;
        const headers: Record<string, string | string[]> = {};
        for (const [name, value] of r.headers) headers[name] = value;
        if (r.contentType !== null) headers['content-type'] = r.contentType;
        if (secret !== null)
          headers['stripe-signature'] = mangleSignature(
            stripeSignature(secret, nowS + r.tsOffset, built.body),
            r.sigMangle,
          );
        const sent = tamperBody(built.body, r.tamper);
        const res = await h.app.inject({ method: r.method as 'POST', url, headers, payload: sent });
        const x: Exchange = { ...exchangeOf(r.method, url, {}, res), authorization: undefined, authorizations: 0 };
        checkAnyAnswer(x, s);

        const signedForDestination = destination !== null && secret === destination.spec.webhookSecret;
        const fresh = r.tsOffset > -SIGNATURE_TOLERANCE_S;
        // Stripe verifies the body decoded as UTF-8 text, which drops a leading BOM: the same event.
        const intact = r.tamper === 'none' || r.tamper === 'bom';
        const mayAccept =
          r.method === 'POST' && signedForDestination && fresh && intact && KEEPS_VALID_V1.has(r.sigMangle);
        const mustAccept =
          mayAccept &&
          built.isEvent &&
          r.to.kind === 'tenant' &&
          EXACT_FORMS.has(r.to.form) &&
          (r.sigMangle === 'none' || r.sigMangle === 'extra-v1') &&
          r.tamper === 'none' &&
          r.contentType !== null &&
          JSON_TYPES.includes(r.contentType) &&
          r.tsOffset <= 0 &&
          !r.headers.some(([n]) => n === 'content-encoding') &&
          built.body.length <= WEBHOOK_BODY_LIMIT_BYTES;
        const accepted = x.status >= 200 && x.status < 300;
        const where = `${show(x)} signer=${JSON.stringify(r.signer)} mangle=${r.sigMangle} tamper=${r.tamper} ts=${r.tsOffset} ct=${r.contentType}`;
        if (!signedForDestination && secret !== null && built.isEvent) {
          expect(accepted, `accepted an event signed for another tenant: ${where}`).toBe(false);
          s.crossTenantRefused += 1;
        }
        if (accepted) expect(mayAccept, `accepted an event that does not verify for this tenant: ${where}`).toBe(true);
        if (mustAccept && x.status !== 429) expect(x.status, where).toBe(200);
        if (accepted && destination) {
          s.webhookAccepted += 1;
          const answer = parseJson(x.body) as { received?: unknown; outcome?: unknown };
          expect(answer.received, where).toBe(true);
          expect(['applied', 'stale', 'ignored', 'pending', 'duplicate', 'irrelevant'], where).toContain(
            answer.outcome,
          );
          const id = (parseJson(built.body.toString('utf8')) as { id?: unknown } | undefined)?.id;
          if (typeof id === 'string') destination.acceptedIds.add(id);
          if (built.modelled) {
            applyAccepted(destination, built.modelled, answer.outcome, where);
            if (r.body.kind === 'modelled') destination.delivered.push(built.modelled);
          }
        }
        // Every tenant answers this customer as the model says, whichever tenant the event reached.
        const cus = built.modelled?.customer ?? 'cus_shared';
        for (const state of world) await expectModelAnswer(h, state, cus);
      }),
      { numRuns: WEBHOOK_RUNS, seed: SEED, endOnFailure: true },
    );
    expect(s.serverErrors).toBe(0);
    expect(s.rateLimited, 'no quota is reached by the fuzz: a 429 is a limiter bug').toBe(0);
    expect(s.webhookAccepted).toBeGreaterThan(WEBHOOK_RUNS / 8);
    expect(s.crossTenantRefused).toBeGreaterThan(WEBHOOK_RUNS / 20);
  });

  it("leaves every tenant's subscribers as set up, changed only by events signed for that tenant", async () => {
    for (const state of world) {
      for (const cus of MODELLED) {
        if (!state.spec.suspended) await expectModelAnswer(h, state, cus);
        const res = await h.admin('GET', `/tenants/${state.spec.slug}/subscribers/${cus}`);
        const where = `${state.spec.slug}/${cus}: ${res.statusCode} ${res.body}`;
        const status = statusOf(state, cus);
        if (status === undefined && res.statusCode === 404) continue;
        expect(res.statusCode, where).toBe(200);
        // A customer with no record may still have a history (a decline kept for the record).
        const record = res.json() as { status: string | null; history: { event_id: string | null }[] };
        expect(record.status, where).toBe(status ?? null);
        for (const entry of record.history) {
          if (entry.event_id !== null)
            expect(state.acceptedIds, `history names an event this tenant never accepted: ${where}`).toContain(
              entry.event_id,
            );
        }
      }
    }
  });

  it('answers raw bytes on a socket (non-UTF-8 paths and headers, broken escapes) below 500, and keeps serving', async () => {
    const port = await portOf(h.app);
    const s = stats.raw;
    const acme = stateAt(world, 0);
    const knownGood = Buffer.from(
      `GET ${LOOKUP_PREFIX}acme?processor_customer_id=cus_shared HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${acme.keys[0] ?? ''}\r\nConnection: close\r\n\r\n`,
      'latin1',
    );
    // HTTP/1.1 without Host is refused (RFC 9112), as a problem like every other error.
    const hostless = await rawExchange(
      port,
      Buffer.from(`GET ${LOOKUP_PREFIX}acme HTTP/1.1\r\nConnection: close\r\n\r\n`, 'latin1'),
    );
    expect(hostless?.status).toBe(400);
    expect(hostless?.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(parseJson(hostless?.body ?? '')).toMatchObject({ code: 'bad_request' });
    await fc.assert(
      fc.asyncProperty(rawRecipe, async (r) => {
        h.clock.advance(1000);
        const built = buildRaw(world, r, Math.floor(h.clock.ms / 1000), nextId);
        const answer = await rawExchange(port, built.request);
        expect(answer, `no answer to ${JSON.stringify(built.request.toString('latin1').slice(0, 300))}`).not.toBeNull();
        if (answer === null) return;
        const x: Exchange = {
          method: built.method,
          url: built.target,
          authorization: built.authorization,
          authorizations: built.authorizations,
          origin: built.origin,
          ...answer,
        };
        checkAnyAnswer(x, s);
        const accepted = x.status >= 200 && x.status < 300;
        if (r.route === 'webhook') {
          if (built.crossTenant) {
            expect(accepted, `accepted an event signed for another tenant: ${show(x)}`).toBe(false);
            s.crossTenantRefused += 1;
          }
          if (accepted) {
            s.webhookAccepted += 1;
            expect(built.mayAccept, show(x)).toBe(true);
          }
        } else if (x.status === 200) {
          checkLookupSuccess(world, x, s);
        }
        const good = await rawExchange(port, knownGood);
        expect(good?.status, 'a well-formed lookup after the fuzzed one').toBe(200);
        expect(
          withoutPayUrl(parseJson(good?.body ?? ''), false, 'a well-formed lookup after the fuzzed one'),
          'a well-formed lookup after the fuzzed one',
        ).toEqual(expectedBody(acme.spec, statusOf(acme, 'cus_shared')));
      }),
      { numRuns: RAW_RUNS, seed: SEED, endOnFailure: true },
    );
    expect(s.serverErrors).toBe(0);
    // Cross-tenant events sent over the socket changed nothing the model tracks.
    for (const state of world) for (const cus of POOL) await expectModelAnswer(h, state, cus);
  });
});
