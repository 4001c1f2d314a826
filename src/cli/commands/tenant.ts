import { readFileSync } from 'node:fs';
import { NOTICE_KINDS, normaliseNotices } from '../../domain/notices.js';
import type { NoticeKind } from '../../domain/notices.js';
import { booleanOption, parseBoolean, stringOption, wholeNumberOption } from '../args.js';
import { ENFORCEMENTS, MAX_ESCALATE_AFTER_DAYS, MAX_GRACE_DAYS } from '../../domain/policy.js';
import type { AdminClient, RotateKey } from '../client.js';
import { CliError, EXIT_FAILURE, UsageError } from '../errors.js';
import {
  formatCreatedTenant,
  formatRotated,
  formatStripeApiKeyState,
  formatTenant,
  formatTenantDetail,
  formatTenantList,
} from '../format.js';
import { readAll, readLine } from '../io.js';
import { MAX_LOOKUPS_PER_MINUTE } from '../../http/schemas.js';
import type { Command, CommandContext } from '../io.js';

type UpdateBody = Parameters<AdminClient['updateTenant']>[1];

function slugOf(ctx: CommandContext): string {
  return ctx.positionals[0] ?? '';
}

/** `none` clears the field (null). */
function orNull(value: string): string | null {
  return value === 'none' ? null : value;
}

function originList(value: string): string[] | null {
  if (value === 'none') return null;
  const origins = value
    .split(',')
    .map((o) => o.trim())
    .filter((o) => o !== '');
  if (origins.length === 0) throw new UsageError("--allowed-origins needs at least one origin, or 'none'");
  return origins;
}

/** `none`: the service's default limit. */
function lookupsPerMinute(value: string): number | null {
  if (value === 'none') return null;
  if (!/^[1-9]\d{0,9}$/.test(value) || Number(value) > MAX_LOOKUPS_PER_MINUTE) {
    throw new UsageError(`--lookups-per-minute must be a whole number from 1 to ${MAX_LOOKUPS_PER_MINUTE}, or 'none'`);
  }
  return Number(value);
}

async function webhookSecret(ctx: CommandContext, value: string): Promise<string> {
  if (value !== '-') return value;
  const secret = (await readAll(ctx.io.stdin)).trim();
  if (secret === '') throw new UsageError('--stripe-webhook-secret -: no secret on stdin');
  return secret;
}

/**
 * `--stripe-api-key -`: the key from stdin, never from the command line (where shell history
 * and the process list would keep it); `none` removes it.
 */
async function stripeApiKey(ctx: CommandContext, value: string): Promise<string | null> {
  if (value === 'none') return null;
  if (value !== '-')
    throw new UsageError(
      "--stripe-api-key takes '-' (the key on stdin) or 'none', never the key itself: echo \"$KEY\" | dunwall tenant update SLUG --stripe-api-key -",
    );
  const key = (await readAll(ctx.io.stdin)).trim();
  if (key === '') throw new UsageError('--stripe-api-key -: no key on stdin');
  return key;
}

/** The branding JSON (docs/snippet-and-client.md) from a file, or from stdin with `-`. */
async function brandingFrom(ctx: CommandContext, file: string): Promise<NonNullable<UpdateBody['branding']>> {
  let text: string;
  try {
    text = file === '-' ? await readAll(ctx.io.stdin) : readFileSync(file, 'utf8');
  } catch (err) {
    throw new CliError(
      `--branding-file: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
      EXIT_FAILURE,
    );
  }
  try {
    return JSON.parse(text) as NonNullable<UpdateBody['branding']>;
  } catch {
    throw new UsageError(`--branding-file: ${file === '-' ? 'stdin' : file} is not JSON`);
  }
}

const POLICY_USAGE = `[--enforcement ${ENFORCEMENTS.join('|')}] [--grace-days N] [--escalate-after-days N|none] [--notices ${NOTICE_KINDS.join(',')}|none]`;
const POLICY_OPTIONS = {
  enforcement: { type: 'string' },
  'grace-days': { type: 'string' },
  'escalate-after-days': { type: 'string' },
  notices: { type: 'string' },
} as const;

/** `--notices card_expiring` (a comma-separated list of kinds) or `--notices none`; undefined when not given. */
function noticesOption(ctx: CommandContext): NoticeKind[] | undefined {
  const value = stringOption(ctx.values, 'notices');
  if (value === undefined) return undefined;
  if (value === 'none') return [];
  const kinds = value.split(',').map((k) => k.trim());
  const unknown = kinds.find((k) => !(NOTICE_KINDS as readonly string[]).includes(k));
  if (unknown !== undefined)
    throw new UsageError(
      `--notices must be none or a comma-separated list of ${NOTICE_KINDS.join(', ')} (got '${unknown}')`,
    );
  return normaliseNotices(kinds);
}

/** The policy fields given (docs/policy.md); undefined when none is. */
function policyOptions(ctx: CommandContext): UpdateBody['policy'] {
  const enforcement = stringOption(ctx.values, 'enforcement');
  if (enforcement !== undefined && !(ENFORCEMENTS as readonly string[]).includes(enforcement)) {
    throw new UsageError(`--enforcement must be one of ${ENFORCEMENTS.join(', ')} (got '${enforcement}')`);
  }
  const graceDays = wholeNumberOption(ctx.values, 'grace-days', 0, MAX_GRACE_DAYS);
  const notices = noticesOption(ctx);
  // `none`: never escalate.
  const escalateAfterDays =
    stringOption(ctx.values, 'escalate-after-days') === 'none'
      ? null
      : wholeNumberOption(ctx.values, 'escalate-after-days', 1, MAX_ESCALATE_AFTER_DAYS);
  const policy = {
    ...(enforcement !== undefined ? { enforcement: enforcement as (typeof ENFORCEMENTS)[number] } : {}),
    ...(graceDays !== undefined ? { grace_days: graceDays } : {}),
    ...(escalateAfterDays !== undefined ? { escalate_after_days: escalateAfterDays } : {}),
    ...(notices !== undefined ? { notices } : {}),
  };
  return Object.keys(policy).length === 0 ? undefined : policy;
}

const create: Command = {
  name: 'tenant create',
  usage: `SLUG [--tier T] [--card-update-url URL] [--hmac-required true|false] [--allowed-origins A,B] [--lookups-per-minute N] ${POLICY_USAGE}`,
  summary:
    "Create a tenant, with its live and its test mode; prints both modes' publishable keys and the HMAC secret, shown this once only.",
  options: {
    tier: { type: 'string' },
    'card-update-url': { type: 'string' },
    'hmac-required': { type: 'string' },
    'allowed-origins': { type: 'string' },
    'lookups-per-minute': { type: 'string' },
    ...POLICY_OPTIONS,
  },
  positionals: ['SLUG'],
  async run(ctx) {
    const tier = stringOption(ctx.values, 'tier');
    const cardUpdateUrl = stringOption(ctx.values, 'card-update-url');
    const originsText = stringOption(ctx.values, 'allowed-origins');
    const origins = originsText === undefined ? null : originList(originsText);
    const hmacRequired = stringOption(ctx.values, 'hmac-required');
    const limit = stringOption(ctx.values, 'lookups-per-minute');
    const policy = policyOptions(ctx);
    const created = await ctx.client().createTenant({
      ...(policy !== undefined ? { policy } : {}),
      slug: slugOf(ctx),
      ...(tier !== undefined ? { tier } : {}),
      ...(cardUpdateUrl !== undefined ? { card_update_url: cardUpdateUrl } : {}),
      ...(hmacRequired !== undefined ? { hmac_required: parseBoolean(hmacRequired, '--hmac-required') } : {}),
      ...(origins !== null ? { allowed_origins: origins } : {}),
      ...(limit !== undefined ? { lookups_per_minute: lookupsPerMinute(limit) } : {}),
    });
    ctx.output(created, formatCreatedTenant);
  },
};

const list: Command = {
  name: 'tenant list',
  usage: '',
  summary: 'List the tenants.',
  options: {},
  positionals: [],
  async run(ctx) {
    ctx.output(await ctx.client().listTenants(), (answer) => formatTenantList(answer.data));
  },
};

const show: Command = {
  name: 'tenant show',
  usage: 'SLUG',
  summary: 'Show a tenant, its credentials in force (never their values) and its subscribers by status.',
  options: {},
  positionals: ['SLUG'],
  async run(ctx) {
    ctx.output(await ctx.client().getTenant(slugOf(ctx)), formatTenantDetail);
  },
};

const remove: Command = {
  name: 'tenant delete',
  usage: 'SLUG [--yes]',
  summary:
    'Delete a tenant and all its data (keys, subscribers, history, Stripe events); asks for the slug unless --yes.',
  options: { yes: { type: 'boolean' } },
  positionals: ['SLUG'],
  async run(ctx) {
    const slug = slugOf(ctx);
    if (!booleanOption(ctx.values, 'yes')) {
      ctx.io.stderr.write(
        `Delete tenant ${slug} and every subscriber, key and event it has? This cannot be undone.\nType the slug to confirm: `,
      );
      const typed = (await readLine(ctx.io.stdin)).trim();
      if (typed !== slug)
        throw new CliError(
          `not deleted: the slug typed did not match (${slug}); pass --yes to delete without asking`,
          EXIT_FAILURE,
        );
    }
    await ctx.client().deleteTenant(slug);
    if (!ctx.json) ctx.print(`tenant ${slug} deleted, with all its data`);
  },
};

const update: Command = {
  name: 'tenant update',
  usage: `SLUG [--tier T] [--card-update-url URL|none] [--hmac-required true|false] [--allowed-origins A,B|none] [--lookups-per-minute N|none] [--stripe-webhook-secret whsec_...|-] [--stripe-api-key -|none] [--branding-file FILE|-] ${POLICY_USAGE}`,
  summary:
    "Change a tenant's settings; 'none' clears a field, '-' reads the webhook secret or the Stripe API key from stdin; the webhook secret and the Stripe API key are the live mode's, or with --test the test mode's.",
  options: {
    tier: { type: 'string' },
    'card-update-url': { type: 'string' },
    'hmac-required': { type: 'string' },
    'allowed-origins': { type: 'string' },
    'lookups-per-minute': { type: 'string' },
    'stripe-webhook-secret': { type: 'string' },
    'stripe-api-key': { type: 'string' },
    'branding-file': { type: 'string' },
    ...POLICY_OPTIONS,
  },
  positionals: ['SLUG'],
  async run(ctx) {
    const tier = stringOption(ctx.values, 'tier');
    const cardUpdateUrl = stringOption(ctx.values, 'card-update-url');
    const hmacRequired = stringOption(ctx.values, 'hmac-required');
    const origins = stringOption(ctx.values, 'allowed-origins');
    const secret = stringOption(ctx.values, 'stripe-webhook-secret');
    const limit = stringOption(ctx.values, 'lookups-per-minute');
    const brandingFile = stringOption(ctx.values, 'branding-file');
    const policy = policyOptions(ctx);
    const apiKeyOption = stringOption(ctx.values, 'stripe-api-key');
    if (apiKeyOption !== undefined) return updateStripeApiKey(ctx, apiKeyOption);
    const body: UpdateBody = {
      ...(policy !== undefined ? { policy } : {}),
      ...(brandingFile !== undefined ? { branding: await brandingFrom(ctx, brandingFile) } : {}),
      ...(tier !== undefined ? { tier } : {}),
      ...(cardUpdateUrl !== undefined ? { card_update_url: orNull(cardUpdateUrl) } : {}),
      ...(hmacRequired !== undefined ? { hmac_required: parseBoolean(hmacRequired, '--hmac-required') } : {}),
      ...(origins !== undefined ? { allowed_origins: originList(origins) } : {}),
      ...(limit !== undefined ? { lookups_per_minute: lookupsPerMinute(limit) } : {}),
      ...(secret !== undefined ? { stripe_webhook_secret: await webhookSecret(ctx, secret) } : {}),
    };
    if (Object.keys(body).length === 0) {
      throw new UsageError(
        'tenant update: give at least one of --tier, --card-update-url, --hmac-required, --allowed-origins, --lookups-per-minute, --stripe-webhook-secret, --stripe-api-key, --branding-file, --enforcement, --grace-days, --escalate-after-days, --notices',
      );
    }
    ctx.output(await ctx.client().updateTenant(slugOf(ctx), body), formatTenant);
  },
};

/**
 * `--stripe-api-key -|none`: the key of one mode (live, or the test mode's with --test), set
 * (Stripe checks it first) or removed. Given alone: the other settings are changed by another call.
 */
async function updateStripeApiKey(ctx: CommandContext, value: string): Promise<void> {
  const others = Object.keys(ctx.values).filter((k) => k !== 'stripe-api-key');
  if (others.length > 0)
    throw new UsageError(
      `tenant update --stripe-api-key: give it alone, with --test for the test mode (not with --${others[0]})`,
    );
  const key = await stripeApiKey(ctx, value);
  const client = ctx.client();
  ctx.output(
    key === null ? await client.deleteStripeApiKey(slugOf(ctx)) : await client.setStripeApiKey(slugOf(ctx), key),
    formatStripeApiKeyState,
  );
}

function suspension(name: string, suspended: boolean, summary: string): Command {
  return {
    name,
    usage: 'SLUG',
    summary,
    options: {},
    positionals: ['SLUG'],
    async run(ctx) {
      ctx.output(await ctx.client().updateTenant(slugOf(ctx), { suspended }), formatTenant);
    },
  };
}

const rotate: Command = {
  name: 'tenant rotate',
  usage: 'SLUG --key publishable|hmac',
  summary: 'Replace the publishable key or the HMAC secret; the old one keeps working for the overlap period.',
  options: { key: { type: 'string' } },
  positionals: ['SLUG'],
  async run(ctx) {
    const key = stringOption(ctx.values, 'key');
    if (key === undefined) throw new UsageError('tenant rotate: missing --key publishable|hmac');
    if (key !== 'publishable' && key !== 'hmac')
      throw new UsageError(`--key must be publishable or hmac (got '${key}')`);
    const rotateKey: RotateKey = key;
    ctx.output(await ctx.client().rotate(slugOf(ctx), rotateKey), formatRotated);
  },
};

export const tenantCommands: Command[] = [
  create,
  list,
  show,
  update,
  remove,
  suspension('tenant suspend', true, 'Suspend a tenant: its lookups answer 402 tenant_suspended.'),
  suspension('tenant resume', false, 'Resume a suspended tenant.'),
  rotate,
];
