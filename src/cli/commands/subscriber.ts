import { stringOption, tenantOption } from '../args.js';
import type { SubscriberStatus } from '../client.js';
import { UsageError } from '../errors.js';
import { formatSubscriber, formatSubscriberWithHistory } from '../format.js';
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

export const subscriberCommands: Command[] = [set, show, clear];
