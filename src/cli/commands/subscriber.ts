import { booleanOption, listOption, stringOption, tenantOption, wholeNumberOption } from '../args.js';
import { STATUSES } from '../../domain/types.js';
import type { SubscriberStatus } from '../client.js';
import { UsageError } from '../errors.js';
import { formatSubscriber, formatSubscriberPage, formatSubscriberWithHistory } from '../format.js';
import type { Command, CommandContext } from '../io.js';

function isStatus(value: string): value is SubscriberStatus {
  return (STATUSES as readonly string[]).includes(value);
}

/** `--status warning,lockout`: one status or several, each checked; sent as the API takes it (comma-separated). */
function statusListOption(ctx: CommandContext, name: string): string | undefined {
  const given = listOption(ctx.values, name);
  if (given === undefined) return undefined;
  if (given.length === 0)
    throw new UsageError(`--${name} must name one or more of ${STATUSES.join(', ')}, comma-separated`);
  const bad = given.find((s) => !isStatus(s));
  if (bad !== undefined)
    throw new UsageError(`--${name} must be one or more of ${STATUSES.join(', ')}, comma-separated (got '${bad}')`);
  return [...new Set(given)].join(',');
}

function customerOf(ctx: CommandContext): string {
  return ctx.positionals[0] ?? '';
}

const set: Command = {
  name: 'subscriber set',
  usage: '--tenant SLUG CUS_ID active|warning|lockout [--reason R]',
  summary: "Set a subscriber's status by hand (reason defaults to manual).",
  options: { tenant: { type: 'string' }, reason: { type: 'string' } },
  positionals: ['CUS_ID', 'STATUS'],
  async run(ctx) {
    const tenant = tenantOption(ctx.values, 'subscriber set');
    const status = ctx.positionals[1] ?? '';
    if (!isStatus(status)) throw new UsageError(`STATUS must be one of ${STATUSES.join(', ')} (got '${status}')`);
    const answer = await ctx
      .client()
      .putSubscriber(tenant, customerOf(ctx), status, stringOption(ctx.values, 'reason'));
    ctx.output(answer, formatSubscriber);
  },
};

const show: Command = {
  name: 'subscriber show',
  usage: '--tenant SLUG CUS_ID',
  summary: "Show a subscriber's status and the history of its changes.",
  options: { tenant: { type: 'string' } },
  positionals: ['CUS_ID'],
  async run(ctx) {
    const tenant = tenantOption(ctx.values, 'subscriber show');
    ctx.output(await ctx.client().getSubscriber(tenant, customerOf(ctx)), formatSubscriberWithHistory);
  },
};

const clear: Command = {
  name: 'subscriber clear',
  usage: '--tenant SLUG CUS_ID',
  summary: 'Forget a subscriber: it becomes unknown, so lookups answer active.',
  options: { tenant: { type: 'string' } },
  positionals: ['CUS_ID'],
  async run(ctx) {
    const tenant = tenantOption(ctx.values, 'subscriber clear');
    const customer = customerOf(ctx);
    await ctx.client().deleteSubscriber(tenant, customer);
    // The API answers 204 with no body: --json prints nothing.
    if (!ctx.json) ctx.print(`${customer} cleared: lookups on ${tenant} now answer active.`);
  },
};

const list: Command = {
  name: 'subscriber list',
  usage:
    '--tenant SLUG [--status S[,S]] [--derived-status S[,S]] [--reason R] [--updated-since ISO_TIME] [--limit N] [--all]',
  summary:
    "List a tenant's subscribers in customer id order, a page at a time (--all: every page); --status filters by the answered status, --derived-status by the status before the tenant's policy.",
  options: {
    tenant: { type: 'string' },
    status: { type: 'string' },
    'derived-status': { type: 'string' },
    reason: { type: 'string' },
    'updated-since': { type: 'string' },
    limit: { type: 'string' },
    cursor: { type: 'string' },
    all: { type: 'boolean' },
  },
  positionals: [],
  async run(ctx) {
    const tenant = tenantOption(ctx.values, 'subscriber list');
    const status = statusListOption(ctx, 'status');
    const derivedStatus = statusListOption(ctx, 'derived-status');
    const limit = wholeNumberOption(ctx.values, 'limit', 1, 1000);
    const reason = stringOption(ctx.values, 'reason');
    const updatedSince = stringOption(ctx.values, 'updated-since');
    const filter = {
      ...(status !== undefined ? { status } : {}),
      ...(derivedStatus !== undefined ? { derivedStatus } : {}),
      ...(reason !== undefined ? { reason } : {}),
      ...(updatedSince !== undefined ? { updatedSince } : {}),
      ...(limit !== undefined ? { limit } : {}),
    };
    const cursor = stringOption(ctx.values, 'cursor');
    let page = await ctx.client().listSubscribers(tenant, { ...filter, ...(cursor !== undefined ? { cursor } : {}) });
    if (!booleanOption(ctx.values, 'all')) {
      ctx.output(page, (p) =>
        p.next_cursor === null
          ? formatSubscriberPage(p.data)
          : `${formatSubscriberPage(p.data)}\n(more: --cursor ${p.next_cursor}, or --all)`,
      );
      return;
    }
    const rows = [...page.data];
    while (page.next_cursor !== null) {
      ctx.io.stderr.write(`${rows.length} subscribers so far\n`);
      page = await ctx.client().listSubscribers(tenant, { ...filter, cursor: page.next_cursor });
      rows.push(...page.data);
    }
    ctx.output({ data: rows, next_cursor: null }, (p) => formatSubscriberPage(p.data));
  },
};

const clearOverride: Command = {
  name: 'subscriber clear-override',
  usage: '--tenant SLUG CUS_ID',
  summary:
    "End a status set by hand: the status is again what the subscriber's Stripe episodes and the tenant's policy give.",
  options: { tenant: { type: 'string' } },
  positionals: ['CUS_ID'],
  async run(ctx) {
    const tenant = tenantOption(ctx.values, 'subscriber clear-override');
    const customer = customerOf(ctx);
    await ctx.client().clearOverride(tenant, customer);
    // The API answers 204 with no body: --json prints nothing.
    if (!ctx.json)
      ctx.print(
        `${customer}: override cleared on ${tenant}; its status is again what its Stripe episodes and the policy give (subscriber show to see it)`,
      );
  },
};

export const subscriberCommands: Command[] = [set, show, clear, clearOverride, list];
