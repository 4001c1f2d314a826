import { MODES } from '../../src/domain/types.js';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { NOTICE_KINDS } from '../../src/domain/notices.js';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_CONSOLE_SESSION_TTL_MS } from '../../src/console/session.js';
import { MAX_BRANDING_LOCALES, MAX_BRANDING_TEXT } from '../../src/domain/branding.js';
import {
  DISABLE_FAILING_AFTER_MS,
  DOWNSTREAM_EVENT_TYPES,
  MAX_DESCRIPTION_LENGTH,
  RETRY_WINDOW_MS,
} from '../../src/domain/downstream-endpoints.js';
import { MAX_CURSOR_LENGTH } from '../../src/domain/feed-cursor.js';
import { generateSecretKey, publishableKeyPrefix, SCOPES, SECRET_KEY_PREFIX_CHARS } from '../../src/domain/keys.js';
import { LINK_STRIPE_TIMEOUT_MS, LINK_TTL_MS } from '../../src/domain/links.js';
import { PREVIEW_LOCKOUT_AHEAD_MS } from '../../src/domain/lookup.js';
import { ENFORCEMENTS, MAX_ESCALATE_AFTER_DAYS, MAX_GRACE_DAYS } from '../../src/domain/policy.js';
import { MAX_ANALYTICS_RANGE_DAYS } from '../../src/domain/runs.js';
import { HARD_DECLINE_CODES } from '../../src/domain/stripe/declines.js';
import { MAX_INVOICE_PAYMENTS, RELEVANT_EVENT_TYPES } from '../../src/domain/stripe/derive.js';
import { MAX_AHEAD_S } from '../../src/domain/stripe/event.js';
import {
  CUSTOMER_ID_PATTERN,
  FLAG_NAME_PATTERN,
  REASON_PATTERN,
  SLUG_PATTERN,
  STATUSES,
  TIER_NAME_PATTERN,
} from '../../src/domain/types.js';
import { MAX_URL_LENGTH } from '../../src/domain/validation.js';
import {
  CUT_AFTER_MS,
  DEFAULT_DELIVERY_SETTINGS,
  MAX_IN_FLIGHT,
  MAX_IN_FLIGHT_PER_TENANT,
} from '../../src/downstream/index.js';
import { DEFAULT_HTTP_LIMITS } from '../../src/http/app.js';
import { KEY_USAGE_FLUSH_INTERVAL_MS } from '../../src/http/key-usage.js';
import { MAX_TARBALL_BYTES } from '../../src/http/package-tarballs.js';
import { ERRORS, STORE_UNAVAILABLE_RETRY_AFTER_S } from '../../src/http/problems.js';
import { RATE_LIMIT_WINDOW_MS } from '../../src/http/rate-limit.js';
import { BRANDING_MAX_AGE_S } from '../../src/http/routes/branding.js';
import { READY_TIMEOUT_MS } from '../../src/http/routes/health.js';
import {
  DEFAULT_FEED_PAGE,
  DEFAULT_STATUS_FEED_LIMITS,
  MAX_FEED_PAGE,
  MAX_WAIT_S,
} from '../../src/http/routes/statuses.js';
import { MAX_ENDPOINTS_PER_TENANT } from '../../src/http/routes/webhook-endpoints.js';
import {
  MAX_ALLOWED_ORIGINS,
  MAX_CUSTOMER_WEBHOOKS,
  MAX_KEY_NAME,
  MAX_LOOKUPS_PER_MINUTE,
  MAX_REPLAY_EVENTS,
  MAX_REPLAY_MESSAGES,
  MAX_SUBSCRIBERS_PAGE,
  MAX_WEBHOOK_PAGE,
} from '../../src/http/schemas.js';
import * as schemas from '../../src/http/schemas.js';
import { STRIPE_INTAKE_FLUSH_INTERVAL_MS } from '../../src/http/stripe-intake.js';
import { DEFAULT_STALE_IF_ERROR_MS } from '../../src/readmodel/index.js';
import {
  DEFAULT_HISTORY_RETENTION_DAYS,
  DEFAULT_RATE_LIMITS,
  DEFAULT_ROTATION_OVERLAP_S,
  DEFAULT_STATUS_FEED_RETENTION_DAYS,
  DEFAULT_STRIPE_EVENTS_RETENTION_DAYS,
  DEFAULT_WEBHOOK_RETENTION_DAYS,
  MAX_STALE_IF_ERROR_MS,
  MAX_STORE_REQUEST_TIMEOUT_MS,
  MIN_ADMIN_TOKEN_LENGTH,
  MIN_STRIPE_EVENTS_RETENTION_DAYS,
  MIN_WEBHOOK_RETENTION_DAYS,
} from '../../src/runtime/config.js';
import { POLICY_SWEEP_BATCH, POLICY_TICK_MS } from '../../src/runtime/policy-clock.js';
import { REDIS_COMMAND_TIMEOUT_MS } from '../../src/runtime/redis.js';
import { anchorsOf, codesOf, sectionsOf, tablesOf } from '../helpers/markdown.js';

/**
 * docs/reference.md is held to the code where that is cheap: its problem codes, scopes,
 * Stripe event types, hard decline codes, policy values, key prefixes and downstream event
 * types are the code's own lists, each of its limits is the constant the service enforces,
 * and its links lead somewhere. A change to one side fails here until the other follows.
 */

const ROOT = resolve(import.meta.dirname, '../..');
const PAGE = 'docs/reference.md';
const text = readFileSync(join(ROOT, PAGE), 'utf8');
const sections = sectionsOf(text, 2);
const subsections = sectionsOf(text, 3);

/** The sections other pages and the code link to, in their order. */
const HEADINGS = [
  'The lookup',
  'Statuses and their derivation',
  'The dunning policy',
  'Modes',
  'Keys and scopes',
  'The status feed',
  'Downstream messages',
  'Limits',
];

function section(heading: string): string {
  const body = sections.get(heading) ?? subsections.get(heading);
  if (body === undefined) throw new Error(`${PAGE} has no section "${heading}"`);
  return body;
}

/** The table of a section whose header row names `column` first. */
function table(heading: string, column: string): string[][] {
  const body = section(heading);
  const lines = body.split('\n');
  const at = lines.findIndex((line) => line.startsWith(`| ${column} |`));
  if (at < 0) throw new Error(`${PAGE}, "${heading}": no table starting with the column "${column}"`);
  const [rows] = tablesOf(lines.slice(at).join('\n'));
  return rows ?? [];
}

/**
 * A constant that is not exported, or whose module or name is moving: read from the source,
 * `const NAME = 8 * 1024;`, wherever it lives under src/. `name` is a whole name or a pattern
 * of names (the Stripe intake's constants are being renamed from `WEBHOOK_...`).
 */
function sourceConstant(name: string | RegExp): number {
  const names = typeof name === 'string' ? name : name.source;
  const re = new RegExp(`\\bconst (?:${names})(?:: *number)? *= *([0-9_ *]+);`, 'g');
  const found: number[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts')) {
        for (const m of readFileSync(path, 'utf8').matchAll(re)) {
          found.push(
            (m[1] ?? '')
              .split('*')
              .map((factor) => Number(factor.replace(/[_ ]/g, '')))
              .reduce((a, b) => a * b, 1),
          );
        }
      }
    }
  };
  walk(join(ROOT, 'src'));
  if (found.length !== 1) throw new Error(`${names}: found ${found.length} times in src/, not once`);
  return found[0] as number;
}

/** The longest match of a pattern: its `{m,N}` repeat at its longest, plus the characters before it (`[a-z0-9]` counts one). */
function longest(pattern: string, before: number): number {
  const m = /\{\d+,(\d+)\}/.exec(pattern);
  if (!m) throw new Error(`${pattern}: no {m,N}`);
  return Number(m[1]) + before;
}

/** The `maximum` of a body schema's integer field, the schema found by whichever of its names it has now. */
function schemaMaximum(field: string, ...names: string[]): number {
  const exports = schemas as unknown as Record<string, { properties?: Record<string, { maximum?: number }> }>;
  const schema = names.map((name) => exports[name]).find((s) => s?.properties?.[field] !== undefined);
  const maximum = schema?.properties?.[field]?.maximum;
  if (maximum === undefined) throw new Error(`none of ${names.join(', ')} has a ${field} with a maximum`);
  return maximum;
}

const count = (n: number): string => n.toLocaleString('en-US');
const chars = (n: number): string => `${count(n)} characters`;
const mib = (bytes: number): string => `${bytes / 1024 / 1024} MiB`;
const kib = (bytes: number): string => `${bytes / 1024} KiB`;
const ms = (n: number): string => `${count(n)} ms`;
const seconds = (msValue: number): string => `${count(msValue / 1000)} s`;
const minutes = (msValue: number): string => `${msValue / 60_000} min`;
const hours = (msValue: number): string => `${msValue / 3_600_000} h`;
const days = (n: number): string => `${n} days`;
const bytes = (n: number): string => `${count(n)} bytes`;
const DAY_MS = 86_400_000;

/** Every row of the Limits table, by its first cell: the value it must show, from the code. */
const LIMITS: Readonly<Record<string, string>> = {
  'request body (admin API, tenant API)': mib(sourceConstant('DEFAULT_BODY_LIMIT_BYTES')),
  'Stripe event body': mib(sourceConstant(/(?:STRIPE|WEBHOOK)[A-Z_]*_BODY_LIMIT_BYTES/)),
  'Stripe events replayed by the operator, per call': count(MAX_REPLAY_EVENTS),
  'Stripe events replayed, body': mib(sourceConstant('REPLAY_BODY_LIMIT_BYTES')),
  'request line and headers': kib(DEFAULT_HTTP_LIMITS.maxHeaderBytes),
  'path parameter length': chars(sourceConstant('MAX_PARAM_LENGTH')),
  'headers to arrive within': seconds(DEFAULT_HTTP_LIMITS.headersTimeoutMs),
  'whole request to arrive within': seconds(DEFAULT_HTTP_LIMITS.requestTimeoutMs),
  'idle keep-alive connection closed after': seconds(DEFAULT_HTTP_LIMITS.keepAliveTimeoutMs),
  'silent socket destroyed after': seconds(DEFAULT_HTTP_LIMITS.idleSocketTimeoutMs),
  'requests per connection': count(DEFAULT_HTTP_LIMITS.maxRequestsPerSocket),
  'open connections per address': count(DEFAULT_HTTP_LIMITS.maxConnectionsPerAddress),
  'rate limit window': seconds(RATE_LIMIT_WINDOW_MS),
  'lookups per address, per minute': count(DEFAULT_RATE_LIMITS.lookupPerIp),
  'opens of pay and card links per address, per minute': count(DEFAULT_RATE_LIMITS.lookupPerIp),
  'a pay or card link valid for': days(LINK_TTL_MS / 86_400_000),
  "Stripe's answer to a link waited for": seconds(LINK_STRIPE_TIMEOUT_MS),
  'lookups per tenant, per minute': count(DEFAULT_RATE_LIMITS.lookupPerTenant),
  'failures per address, per minute': count(DEFAULT_RATE_LIMITS.failuresPerIp),
  'admin requests per address, per minute': count(DEFAULT_RATE_LIMITS.adminPerIp),
  'requests per secret key, per minute': count(DEFAULT_RATE_LIMITS.perSecretKey ?? 0),
  "a tenant's `lookups_per_minute`": count(MAX_LOOKUPS_PER_MINUTE),
  'rate limit count in Redis': ms(REDIS_COMMAND_TIMEOUT_MS),
  '`Retry-After` of `store_unavailable`': `${STORE_UNAVAILABLE_RETRY_AFTER_S} s`,
  'readiness check (`/readyz`)': seconds(READY_TIMEOUT_MS),
  "a request's wait on the store": seconds(sourceConstant('DEFAULT_STORE_REQUEST_TIMEOUT_MS')),
  "a request's wait on the store, at most": seconds(MAX_STORE_REQUEST_TIMEOUT_MS),
  'a PostgreSQL query': seconds(sourceConstant('DEFAULT_DB_QUERY_TIMEOUT_MS')),
  'a PostgreSQL connection': seconds(sourceConstant('DEFAULT_DB_CONNECT_TIMEOUT_MS')),
  'lookups answered from memory while the database is away': minutes(DEFAULT_STALE_IF_ERROR_MS),
  'the same, at most': hours(MAX_STALE_IF_ERROR_MS),
  'Stripe signature age': `${sourceConstant(/[A-Z_]*TOLERANCE_S/)} s`,
  "Stripe time ahead of Dunwall's clock": `${MAX_AHEAD_S} s`,
  'payments read from one invoice event': count(MAX_INVOICE_PAYMENTS),
  'Stripe intake counts stored every': seconds(STRIPE_INTAKE_FLUSH_INTERVAL_MS),
  'CORS preflight cached': `${count(sourceConstant('PREFLIGHT_MAX_AGE_S'))} s`,
  'previewed lockout ahead': days(PREVIEW_LOCKOUT_AHEAD_MS / DAY_MS),
  '`processor_customer_id` after `cus_`': chars(longest(CUSTOMER_ID_PATTERN, 0)),
  'tenant slug': chars(longest(SLUG_PATTERN, 1)),
  'tier name': chars(longest(TIER_NAME_PATTERN, 1)),
  'tier flag name': chars(longest(FLAG_NAME_PATTERN, 1)),
  reason: chars(longest(REASON_PATTERN, 1)),
  'URL (card update, branding, endpoint)': chars(MAX_URL_LENGTH),
  '`allowed_origins`': count(MAX_ALLOWED_ORIGINS),
  'branding text': chars(MAX_BRANDING_TEXT),
  'branding locales': count(MAX_BRANDING_LOCALES),
  'secret key name': chars(MAX_KEY_NAME),
  'endpoint description': chars(MAX_DESCRIPTION_LENGTH),
  '`grace_days`': count(MAX_GRACE_DAYS),
  '`escalate_after_days`': count(MAX_ESCALATE_AFTER_DAYS),
  'policy clock tick': seconds(POLICY_TICK_MS),
  'subscribers per policy sweep batch': count(POLICY_SWEEP_BATCH),
  'secret keys per tenant': count(sourceConstant('MAX_SECRET_KEYS_PER_TENANT')),
  'secret key rotation overlap, at most': days(schemaMaximum('overlap_seconds', 'RotateKeyBody') / 86_400),
  'endpoint signing secret rotation overlap, at most': days(
    schemaMaximum('overlap_seconds', 'RotateEndpointSecretBody', 'RotateWebhookSecretBody') / 86_400,
  ),
  'credential rotation overlap': `${count(DEFAULT_ROTATION_OVERLAP_S)} s`,
  'secret key prefix shown': chars(SECRET_KEY_PREFIX_CHARS),
  "a secret key's last use recorded every": seconds(KEY_USAGE_FLUSH_INTERVAL_MS),
  'admin token, at least': chars(MIN_ADMIN_TOKEN_LENGTH),
  'console session': hours(DEFAULT_CONSOLE_SESSION_TTL_MS),
  "a signed-out session's stream or long poll checked every": ms(DEFAULT_STATUS_FEED_LIMITS.sessionRecheckMs),
  'subscribers per page': count(MAX_SUBSCRIBERS_PAGE),
  'history entries shown': count(sourceConstant('HISTORY_LIMIT')),
  "a subscriber's messages per page": count(MAX_CUSTOMER_WEBHOOKS),
  'endpoint messages or attempts per page': count(MAX_WEBHOOK_PAGE),
  'messages replayed per call': count(MAX_REPLAY_MESSAGES),
  'analytics range': days(MAX_ANALYTICS_RANGE_DAYS),
  'analytics range, default': days(sourceConstant('DEFAULT_RANGE_DAYS')),
  'status feed page, default': count(DEFAULT_FEED_PAGE),
  'status feed page, at most': count(MAX_FEED_PAGE),
  'status feed `wait`, at most': `${MAX_WAIT_S} s`,
  'status feed cursor': chars(MAX_CURSOR_LENGTH),
  'status feed streams per tenant and process': count(DEFAULT_STATUS_FEED_LIMITS.maxStreamsPerTenant),
  'status feed long polls per tenant and process': count(DEFAULT_STATUS_FEED_LIMITS.maxWaitsPerTenant),
  'status feed keep-alive comment every': seconds(DEFAULT_STATUS_FEED_LIMITS.heartbeatMs),
  'status feed safety read every': seconds(DEFAULT_STATUS_FEED_LIMITS.safetyPollMs),
  'bytes waiting for a slow stream reader before it is cut': kib(DEFAULT_STATUS_FEED_LIMITS.maxBufferedBytes),
  '`Retry-After` of `too_many_streams`': `${sourceConstant('TOO_MANY_RETRY_AFTER_S')} s`,
  'status feed changes kept': days(DEFAULT_STATUS_FEED_RETENTION_DAYS),
  'Stripe events kept': days(DEFAULT_STRIPE_EVENTS_RETENTION_DAYS),
  'Stripe events kept, at least': days(MIN_STRIPE_EVENTS_RETENTION_DAYS),
  'history kept': days(DEFAULT_HISTORY_RETENTION_DAYS),
  'downstream messages kept': days(DEFAULT_WEBHOOK_RETENTION_DAYS),
  'downstream messages kept, at least': days(MIN_WEBHOOK_RETENTION_DAYS),
  'endpoints per tenant': count(MAX_ENDPOINTS_PER_TENANT),
  'a downstream attempt': seconds(DEFAULT_DELIVERY_SETTINGS.attemptTimeoutMs),
  'downstream attempts at once per endpoint': count(DEFAULT_DELIVERY_SETTINGS.concurrencyPerEndpoint),
  'downstream attempts at once per process': count(MAX_IN_FLIGHT),
  'downstream attempts at once per tenant': count(MAX_IN_FLIGHT_PER_TENANT),
  'a downstream attempt cut to free a slot after': seconds(CUT_AFTER_MS),
  "a receiver's answer kept": bytes(sourceConstant('BODY_SNIPPET_BYTES')),
  'a downstream message retried for': hours(RETRY_WINDOW_MS),
  'an endpoint failing this long is disabled': days(DISABLE_FAILING_AFTER_MS / DAY_MS),
  'branding cached by browsers': `${BRANDING_MAX_AGE_S} s`,
  'package tarball': mib(MAX_TARBALL_BYTES),
};

describe('docs/reference.md', () => {
  it('has the sections others link to, in their order', () => {
    expect([...sections.keys()].filter((h) => HEADINGS.includes(h))).toEqual(HEADINGS);
  });

  it('lists every problem code of the service, with its status, and no other', () => {
    const rows = table('Problem codes', '`code`');
    const listed = Object.fromEntries(
      rows.map(([code = '', status = '']) => [codesOf(code)[0] ?? code, Number(status)]),
    );
    const actual = Object.fromEntries(Object.entries(ERRORS).map(([code, { status }]) => [code, status]));
    expect(listed).toEqual(actual);
    expect(rows).toHaveLength(Object.keys(ERRORS).length);
  });

  it('names only codes the service has in the lookup’s checks, numbered 1 to 6', () => {
    const rows = table('The lookup', '#');
    expect(rows.map(([n]) => n)).toEqual(['1', '2', '3', '4', '5', '6']);
    for (const [, , failure = ''] of rows) {
      for (const code of codesOf(failure)) expect(Object.keys(ERRORS), code).toContain(code);
    }
  });

  it('names the statuses', () => {
    const first = section('Statuses and their derivation').trim().split('\n\n')[0] ?? '';
    expect(codesOf(first).slice(0, STATUSES.length)).toEqual([...STATUSES]);
  });

  it('lists the Stripe event types the derivation reads, and no other', () => {
    const events = table('Statuses and their derivation', 'Stripe event').flatMap(([event = '']) =>
      codesOf(event).filter((code) => /^[a-z_]+\.[a-z_.]+$/.test(code)),
    );
    expect(new Set(events)).toEqual(new Set(RELEVANT_EVENT_TYPES));
  });

  it('lists the hard decline codes', () => {
    const codes = table('Statuses and their derivation', 'hard decline code').map(([code = '']) => codesOf(code)[0]);
    expect(new Set(codes)).toEqual(new Set(HARD_DECLINE_CODES));
    expect(codes).toHaveLength(HARD_DECLINE_CODES.size);
  });

  it('gives the policy’s values and bounds', () => {
    const rows = Object.fromEntries(
      table('The dunning policy', 'field').map(([field = '', values = '']) => [codesOf(field)[0], values]),
    );
    expect(Object.keys(rows)).toEqual(['enforcement', 'grace_days', 'escalate_after_days', 'notices']);
    expect(codesOf(rows.enforcement ?? '')).toEqual([...ENFORCEMENTS]);
    expect(rows.grace_days).toBe(`\`0\`, or 1 to ${MAX_GRACE_DAYS}`);
    expect(rows.escalate_after_days).toBe(`\`null\`, or 1 to ${MAX_ESCALATE_AFTER_DAYS}`);
    expect(rows.notices).toBe(`\`[]\`, or \`${JSON.stringify([...NOTICE_KINDS])}\``);
  });

  it('gives each mode’s key prefixes', () => {
    const rows = table('Modes', 'mode');
    expect(rows.map(([mode = '']) => mode)).toEqual([...MODES]);
    for (const [mode = '', publishable = '', secret = ''] of rows) {
      const live = mode === 'live';
      expect(codesOf(publishable)).toEqual([`${publishableKeyPrefix(live)}...`]);
      expect(codesOf(secret)).toEqual([`${generateSecretKey(live).slice(0, 8)}...`]);
    }
  });

  it('lists the scopes of secret keys, in the code’s order', () => {
    const scopes = table('Keys and scopes', 'scope').map(([scope = '']) => codesOf(scope)[0]);
    expect(scopes).toEqual([...SCOPES]);
  });

  it('names the downstream event types', () => {
    const types = codesOf(section('Downstream messages')).filter((code) => code.startsWith('subscriber.'));
    expect(new Set(types)).toEqual(new Set(DOWNSTREAM_EVENT_TYPES));
  });

  it('shows every limit as the code enforces it, and only limits the code has', () => {
    const rows = table('Limits', 'limit');
    const shown = Object.fromEntries(rows.map(([limit = '', value = '']) => [limit, value]));
    expect(shown).toEqual(LIMITS);
    expect(rows).toHaveLength(Object.keys(LIMITS).length);
  });

  it('names only settings the configuration reads', () => {
    const config = readFileSync(join(ROOT, 'src/runtime/config.ts'), 'utf8');
    const settings = table('Limits', 'limit').flatMap(([, , setBy = '']) =>
      codesOf(setBy).filter((code) => code.startsWith('DUNWALL_')),
    );
    expect(settings.length).toBeGreaterThan(10);
    for (const name of settings) expect(config, name).toContain(`'${name}'`);
  });
});

describe('the documentation’s index', () => {
  const pages = readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md') && f !== 'README.md')
    .sort();

  it('lists every page of docs/ in the README and in docs/README.md', () => {
    const readme = sectionsOf(readFileSync(join(ROOT, 'README.md'), 'utf8')).get('Documentation') ?? '';
    const index = readFileSync(join(ROOT, 'docs/README.md'), 'utf8');
    for (const page of pages) {
      expect(readme, `README.md: docs/${page}`).toContain(`](docs/${page})`);
      expect(index, `docs/README.md: ${page}`).toContain(`](${page})`);
    }
  });

  it('links, from the reference and the index, only to pages and sections that exist', () => {
    const broken: string[] = [];
    for (const from of [PAGE, 'docs/README.md']) {
      const source = readFileSync(join(ROOT, from), 'utf8');
      for (const m of source.matchAll(/\]\(([^)\s]+)\)/g)) {
        const link = m[1] ?? '';
        if (/^[a-z]+:/.test(link)) continue;
        const [file = '', anchor] = link.split('#');
        const target = file === '' ? join(ROOT, from) : join(dirname(join(ROOT, from)), file);
        if (!existsSync(target)) broken.push(`${from}: ${link}`);
        else if (anchor !== undefined && !anchorsOf(readFileSync(target, 'utf8')).has(anchor))
          broken.push(`${from}: ${link}`);
      }
    }
    expect(broken).toEqual([]);
  });
});
