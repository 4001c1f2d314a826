import pkg from '../../../package.json' with { type: 'json' };
import { isValidSlug } from '../../domain/lookup.js';
import { signStripePayload } from '../../domain/stripe/signature.js';
import { CUSTOMER_ID_RE } from '../../domain/types.js';
import { stringOption, tenantOption } from '../args.js';
import { formatLockoutAt } from '../../domain/policy.js';
import type { TenantPolicy } from '../../domain/policy.js';
import { DEFAULT_TIMEOUT_MS, displayUrl, networkReason } from '../client.js';
import type { SubscriberView } from '../client.js';
import { baseUrlFrom, clientFrom } from '../env.js';
import { ApiError, CliError, NetworkError, UsageError, oneLine } from '../errors.js';
import { policySummary } from '../format.js';
import type { Command, CommandContext } from '../io.js';
import { readAll } from '../io.js';
import {
  INVOICE_ID_RE,
  MAX_SAMPLE_AGE_DAYS,
  SAMPLE_API_VERSIONS,
  SAMPLE_DERIVED,
  SAMPLE_SCENARIOS,
  SAMPLE_SHAPES,
  SUBSCRIPTION_ID_RE,
  sampleAnswer,
  sampleEvents,
  sampleIds,
} from '../stripe-samples.js';
import type { SampleAnswer, SampleScenario, SampleShape } from '../stripe-samples.js';

/**
 * `dunwall stripe send-sample`: signed sample Stripe events sent to a running Dunwall's
 * webhook, to see a customer go through warning, lockout and back without a Stripe
 * account. The signing secret is read from stdin only, and never printed: neither it nor
 * the Stripe-Signature header made with it appears in any output.
 *
 * `--at TIME` or `--days-ago N` date the events in the past (their `created`; the signature
 * stays current, as Stripe's are when it delivers), so that a grace period's end or an
 * escalation falls within minutes. After sending, it reads the tenant's policy and the
 * customer's episodes through the admin API (when it has the admin token) and prints what the
 * policy answers, computed by the policy's own function, beside what the events derive.
 */

const DAY_MS = 86_400_000;
const RFC3339_RE = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

interface SentEvent {
  id: string;
  type: string;
  created: number;
  http_status: number;
  outcome: string;
}

interface SendSampleResult {
  url: string;
  tenant: string;
  customer: string;
  scenario: SampleScenario;
  shape: SampleShape;
  api_version: string;
  subscription: string;
  invoice: string;
  /** The last event's `created` (RFC 3339): now, unless backdated. */
  dated: string;
  events: SentEvent[];
  /** What the events derive, before the tenant's policy. */
  derived: { status: string; reason: string };
  /** What the lookup answers under the tenant's policy; null when it could not be read (`answered_unknown` says why). */
  answered: (SampleAnswer & { policy: TenantPolicy }) | null;
  answered_unknown: string | null;
}

const RULE_TEXT: Readonly<Record<string, string>> = {
  grace_ended: 'the grace ends',
  escalated: 'the warning escalates',
};

function answeredLine(r: SendSampleResult): string {
  const a = r.answered;
  if (a === null) return `unknown: ${r.answered_unknown ?? 'not read'}`;
  const turns = a.lockout_at === null ? '' : `, lockout at ${a.lockout_at} (${RULE_TEXT[a.rule ?? ''] ?? 'scheduled'})`;
  return `${a.status}${turns}; policy: ${policySummary(a.policy)}`;
}

function formatSent(r: SendSampleResult): string {
  const width = Math.max(...r.events.map((e) => e.type.length));
  return [
    `sent to:      ${r.url}`,
    `tenant:       ${r.tenant}`,
    `customer:     ${r.customer}`,
    `shape:        ${r.shape} (API ${r.api_version})`,
    `subscription: ${r.subscription}`,
    `invoice:      ${r.invoice}`,
    `dated:        ${r.dated}`,
    'events:',
    ...r.events.map(
      (e) => `  ${e.type.padEnd(width)}  ${e.id}  created ${e.created}  -> ${e.http_status} ${e.outcome}`,
    ),
    `derived:      ${r.derived.status} (${r.derived.reason})`,
    `answered:     ${answeredLine(r)}`,
  ].join('\n');
}

function choice<T extends string>(value: string | undefined, allowed: readonly T[], what: string, fallback?: T): T {
  if (value === undefined && fallback !== undefined) return fallback;
  if (value !== undefined && (allowed as readonly string[]).includes(value)) return value as T;
  throw new UsageError(
    `stripe send-sample: ${what} must be one of ${allowed.join(', ')}${value === undefined ? '' : ` (got '${value}')`}`,
  );
}

function idOption(ctx: CommandContext, name: string, re: RegExp, example: string): string | undefined {
  const value = stringOption(ctx.values, name);
  if (value !== undefined && !re.test(value))
    throw new UsageError(`stripe send-sample: --${name} must look like ${example} (got '${value}')`);
  return value;
}

/** The signing secret, from stdin: a command-line value would land in shell history and the process list. */
async function secretOf(ctx: CommandContext): Promise<string> {
  const option = stringOption(ctx.values, 'secret');
  if (option !== '-') {
    throw new UsageError(
      "stripe send-sample: give --secret - and the tenant's Stripe signing secret (whsec_...) on stdin",
    );
  }
  const secret = (await readAll(ctx.io.stdin)).trim();
  if (secret === '') throw new UsageError('stripe send-sample: --secret -: no secret on stdin');
  return secret;
}

/** When the last event happened, in ms: `--at TIME` (RFC 3339), `--days-ago N`, or now. Never later than now. */
function datedAt(ctx: CommandContext, nowMs: number): number {
  const at = stringOption(ctx.values, 'at');
  const daysAgo = stringOption(ctx.values, 'days-ago');
  if (at !== undefined && daysAgo !== undefined)
    throw new UsageError('stripe send-sample: give --at or --days-ago, not both');
  let ms = nowMs;
  if (at !== undefined) {
    ms = RFC3339_RE.test(at) ? Date.parse(at) : Number.NaN;
    if (Number.isNaN(ms))
      throw new UsageError(
        `stripe send-sample: --at must be an RFC 3339 date and time such as 2026-11-20T09:30:00Z (got '${at}')`,
      );
    if (ms > nowMs)
      throw new UsageError(
        `stripe send-sample: --at must not be in the future (got '${at}'): Stripe dates an event when it happens`,
      );
  } else if (daysAgo !== undefined) {
    const days = /^\d{1,3}(\.\d{1,6})?$/.test(daysAgo) ? Number(daysAgo) : Number.NaN;
    if (Number.isNaN(days) || days > MAX_SAMPLE_AGE_DAYS) {
      throw new UsageError(
        `stripe send-sample: --days-ago must be a number of days from 0 to ${MAX_SAMPLE_AGE_DAYS}, such as 7 or 6.5 (got '${daysAgo}')`,
      );
    }
    ms = nowMs - Math.round(days * DAY_MS);
  }
  if (ms < nowMs - MAX_SAMPLE_AGE_DAYS * DAY_MS)
    throw new UsageError(`stripe send-sample: --at must be within the last ${MAX_SAMPLE_AGE_DAYS} days`);
  return ms;
}

/**
 * What the tenant's policy answers the customer now, read through the admin API; or why it
 * could not be read (no admin token, an error): the events were sent either way.
 */
async function answerOf(
  ctx: CommandContext,
  base: string,
  tenant: string,
  customer: string,
): Promise<Pick<SendSampleResult, 'answered' | 'answered_unknown'>> {
  try {
    // The samples are test-mode events (livemode false): their answer is the tenant's test mode's.
    const client = clientFrom({ ...ctx.io.env, DUNWALL_URL: base }, ctx.io.fetch ?? globalThis.fetch, 'test');
    const { policy } = await client.getTenant(tenant);
    let subscriber: SubscriberView | null = null;
    try {
      subscriber = await client.getSubscriber(tenant, customer);
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 404)) throw err;
    }
    return { answered: { ...sampleAnswer(subscriber, policy, Date.now()), policy }, answered_unknown: null };
  } catch (err) {
    if (!(err instanceof CliError)) throw err;
    return {
      answered: null,
      answered_unknown: `the tenant's policy is read through the admin API: ${oneLine(err.message)}`,
    };
  }
}

/** What to do about a refusal, after Dunwall's own words. */
function hintFor(code: string, tenant: string): string {
  if (code === 'invalid_signature') {
    return ` Is the secret on stdin the tenant's test-mode Stripe signing secret? Set it with: dunwall tenant update ${tenant} --stripe-webhook-secret - --test`;
  }
  if (code === 'tenant_not_found') return ` Create it with: dunwall tenant create ${tenant}`;
  return '';
}

async function post(
  ctx: CommandContext,
  url: string,
  payload: string,
  signature: string,
): Promise<{ status: number; body: Record<string, unknown> | null }> {
  const fetchImpl = ctx.io.fetch ?? globalThis.fetch;
  let response: Response;
  let text: string;
  try {
    response = await fetchImpl(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json; charset=utf-8',
        'stripe-signature': signature,
        'user-agent': `dunwall-cli/${pkg.version} (send-sample)`,
      },
      body: payload,
      signal: AbortSignal.timeout(DEFAULT_TIMEOUT_MS),
    });
    text = await response.text();
  } catch (err) {
    throw new NetworkError(`cannot reach ${displayUrl(url)} (${networkReason(err, DEFAULT_TIMEOUT_MS)})`);
  }
  let body: Record<string, unknown> | null;
  try {
    const parsed: unknown = JSON.parse(text);
    body =
      typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)
        ? (parsed as Record<string, unknown>)
        : null;
  } catch {
    body = null;
  }
  return { status: response.status, body };
}

export const sendSample: Command = {
  name: 'stripe send-sample',
  usage: `${SAMPLE_SCENARIOS.join('|')} --tenant SLUG --customer cus_... --secret - [--at TIME | --days-ago N] [--shape basil|legacy] [--url URL] [--subscription sub_...] [--invoice in_...]`,
  summary:
    "Send signed sample Stripe events (test mode) to a running Dunwall's webhook, to test without a Stripe account. The tenant's signing secret is read from stdin (--secret -). The same customer's samples share one subscription and invoice, so 'paid' resolves what a failure opened. --at TIME (RFC 3339) or --days-ago N dates the events in the past, to see a grace period end or a warning escalate. Prints what the events derive and, with the admin token, what the tenant's policy answers.",
  options: {
    tenant: { type: 'string' },
    customer: { type: 'string' },
    secret: { type: 'string' },
    shape: { type: 'string' },
    url: { type: 'string' },
    subscription: { type: 'string' },
    invoice: { type: 'string' },
    at: { type: 'string' },
    'days-ago': { type: 'string' },
  },
  positionals: ['SCENARIO'],
  async run(ctx) {
    const scenario = choice(ctx.positionals[0], SAMPLE_SCENARIOS, 'SCENARIO');
    const tenant = tenantOption(ctx.values, 'stripe send-sample');
    if (!isValidSlug(tenant)) throw new UsageError(`stripe send-sample: '${tenant}' is not a tenant slug`);
    const customer = stringOption(ctx.values, 'customer');
    if (customer === undefined || !CUSTOMER_ID_RE.test(customer))
      throw new UsageError('stripe send-sample: --customer must be a Stripe customer id (cus_...)');
    const shape = choice(stringOption(ctx.values, 'shape'), SAMPLE_SHAPES, '--shape', 'basil');
    const subscription = idOption(ctx, 'subscription', SUBSCRIPTION_ID_RE, 'sub_...');
    const invoice = idOption(ctx, 'invoice', INVOICE_ID_RE, 'in_...');
    const url = stringOption(ctx.values, 'url');
    const base = baseUrlFrom(url === undefined ? ctx.io.env : { DUNWALL_URL: url });
    const datedMs = datedAt(ctx, Date.now());
    const secret = await secretOf(ctx);

    const ids = sampleIds(tenant, customer, {
      ...(subscription ? { subscription } : {}),
      ...(invoice ? { invoice } : {}),
    });
    const target = `${base}/webhooks/stripe/${tenant}`;
    const events = sampleEvents({ scenario, shape, tenant, customer, ids, nowS: Math.floor(datedMs / 1000) });
    const sent: SentEvent[] = [];
    for (const event of events) {
      const payload = JSON.stringify(event, null, 2);
      const answer = await post(
        ctx,
        target,
        payload,
        signStripePayload(payload, secret, Math.floor(Date.now() / 1000)),
      );
      const code = typeof answer.body?.code === 'string' ? answer.body.code : `http_${answer.status}`;
      if (answer.status !== 200) {
        const detail =
          typeof answer.body?.detail === 'string' ? oneLine(answer.body.detail) : `${target} answered ${answer.status}`;
        const before = sent.length > 0 ? ` (${sent.length} of ${events.length} events were accepted before)` : '';
        throw new ApiError(answer.status, code, `${detail.replace(/\.$/, '')}${before}.${hintFor(code, tenant)}`);
      }
      sent.push({
        id: String(event.id),
        type: String(event.type),
        created: Number(event.created),
        http_status: answer.status,
        outcome: String(answer.body?.outcome ?? 'unknown'),
      });
    }
    ctx.output(
      {
        url: target,
        tenant,
        customer,
        scenario,
        shape,
        api_version: SAMPLE_API_VERSIONS[shape],
        subscription: ids.subscription,
        invoice: ids.invoice,
        dated: formatLockoutAt(datedMs),
        events: sent,
        derived: SAMPLE_DERIVED[scenario],
        ...(await answerOf(ctx, base, tenant, customer)),
      },
      formatSent,
    );
  },
};
