import { booleanOption, stringOption, tenantOption, wholeNumberOption } from '../args.js';
import type { SubscriberStatus } from '../client.js';
import { UsageError } from '../errors.js';
import { formatSubscriber, formatSubscriberPage, formatSubscriberWithHistory } from '../format.js';
import type { Command, CommandContext } from '../io.js';

const STATUSES: readonly SubscriberStatus[] = ['active', 'warning', 'lockout'];

function isStatus(value: string): value is SubscriberStatus {
  return (STATUSES as readonly string[]).includes(value);
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
    const answer = await ctx.client().putSubscriber(tenant, customerOf(ctx), status, stringOption(ctx.values, 'reason'));
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
  usage: '--tenant SLUG [--status S] [--reason R] [--updated-since ISO_TIME] [--limit N] [--all]',
  summary: "List a tenant's subscribers in customer id order, a page at a time (--all: every page).",
  options: { tenant: { type: 'string' }, status: { type: 'string' }, reason: { type: 'string' }, 'updated-since': { type: 'string' }, limit: { type: 'string' }, cursor: { type: 'string' }, all: { type: 'boolean' } },
  positionals: [],
  async run(ctx) {
    const tenant = tenantOption(ctx.values, 'subscriber list');
    const status = stringOption(ctx.values, 'status');
    if (status !== undefined && !isStatus(status)) throw new UsageError(`--status must be one of ${STATUSES.join(', ')} (got '${status}')`);
    const limit = wholeNumberOption(ctx.values, 'limit', 1, 1000);
    const reason = stringOption(ctx.values, 'reason');
    const updatedSince = stringOption(ctx.values, 'updated-since');
    const filter = {
      ...(status !== undefined ? { status } : {}),
      ...(reason !== undefined ? { reason } : {}),
      ...(updatedSince !== undefined ? { updatedSince } : {}),
      ...(limit !== undefined ? { limit } : {}),
    };
    const cursor = stringOption(ctx.values, 'cursor');
    let page = await ctx.client().listSubscribers(tenant, { ...filter, ...(cursor !== undefined ? { cursor } : {}) });
    if (!booleanOption(ctx.values, 'all')) {
      ctx.output(page, (p) => (p.next_cursor === null ? formatSubscriberPage(p.data) : `${formatSubscriberPage(p.data)}\n(more: --cursor ${p.next_cursor}, or --all)`));
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

export const subscriberCommands: Command[] = [set, show, clear, list];
