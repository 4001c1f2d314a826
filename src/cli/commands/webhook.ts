import { DELIVERY_STATES, DOWNSTREAM_EVENT_TYPES } from '../../domain/downstream-endpoints.js';
import type { DownstreamEventType } from '../../domain/downstream-endpoints.js';
import { parseBoolean, stringOption, tenantOption, wholeNumberOption } from '../args.js';
import { UsageError } from '../errors.js';
import { formatAttempts, formatEndpoint, formatEndpointList, formatMessages } from '../format.js';
import type { Command, CommandContext } from '../io.js';

/** Downstream webhook endpoints of a tenant (docs/webhooks.md). */

const EVENT_TYPES = DOWNSTREAM_EVENT_TYPES;
const STATES = DELIVERY_STATES;

function endpointOf(ctx: CommandContext): string {
  return ctx.positionals[0] ?? '';
}

/** `--events a,b` -> the types; `all` -> null (every type). */
function eventsOption(ctx: CommandContext): DownstreamEventType[] | null | undefined {
  const raw = stringOption(ctx.values, 'events');
  if (raw === undefined) return undefined;
  if (raw === 'all') return null;
  const types = raw
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t !== '');
  for (const t of types) {
    if (!(EVENT_TYPES as readonly string[]).includes(t))
      throw new UsageError(`--events: unknown event type '${t}' (known: ${EVENT_TYPES.join(', ')}, or all)`);
  }
  if (types.length === 0) throw new UsageError('--events: name at least one event type, or all');
  return types as DownstreamEventType[];
}

function instantOption(ctx: CommandContext, name: string): string | undefined {
  const raw = stringOption(ctx.values, name);
  if (raw === undefined) return undefined;
  const ms = Date.parse(raw);
  if (Number.isNaN(ms))
    throw new UsageError(`--${name} must be a date and time such as 2026-11-20T00:00:00Z (got '${raw}')`);
  return new Date(ms).toISOString();
}

const tenantOnly = { tenant: { type: 'string' } } as const;

const create: Command = {
  name: 'webhook create',
  usage: '--tenant SLUG URL [--description D] [--events TYPE,TYPE|all]',
  summary: 'Add an endpoint that hears of status changes; prints its signing secret once.',
  options: { ...tenantOnly, description: { type: 'string' }, events: { type: 'string' } },
  positionals: ['URL'],
  async run(ctx) {
    const tenant = tenantOption(ctx.values, 'webhook create');
    const events = eventsOption(ctx);
    const description = stringOption(ctx.values, 'description');
    const answer = await ctx.client().createEndpoint(tenant, {
      url: ctx.positionals[0] ?? '',
      ...(description !== undefined ? { description } : {}),
      ...(events ? { event_types: events } : {}),
    });
    ctx.output(answer, formatEndpoint);
  },
};

const list: Command = {
  name: 'webhook list',
  usage: '--tenant SLUG',
  summary: "List a tenant's webhook endpoints.",
  options: tenantOnly,
  positionals: [],
  async run(ctx) {
    ctx.output(await ctx.client().listEndpoints(tenantOption(ctx.values, 'webhook list')), formatEndpointList);
  },
};

const show: Command = {
  name: 'webhook show',
  usage: '--tenant SLUG EP_ID',
  summary: 'Show an endpoint: enabled or why not, messages pending, secrets in force.',
  options: tenantOnly,
  positionals: ['EP_ID'],
  async run(ctx) {
    ctx.output(
      await ctx.client().getEndpoint(tenantOption(ctx.values, 'webhook show'), endpointOf(ctx)),
      formatEndpoint,
    );
  },
};

const update: Command = {
  name: 'webhook update',
  usage: '--tenant SLUG EP_ID [--url U] [--description D] [--events TYPE,TYPE|all] [--enabled true|false]',
  summary: 'Change an endpoint, or enable it again (after a 410 or days of failures) or disable it.',
  options: {
    ...tenantOnly,
    url: { type: 'string' },
    description: { type: 'string' },
    events: { type: 'string' },
    enabled: { type: 'string' },
  },
  positionals: ['EP_ID'],
  async run(ctx) {
    const tenant = tenantOption(ctx.values, 'webhook update');
    const url = stringOption(ctx.values, 'url');
    const description = stringOption(ctx.values, 'description');
    const events = eventsOption(ctx);
    const enabled = stringOption(ctx.values, 'enabled');
    const body = {
      ...(url !== undefined ? { url } : {}),
      ...(description !== undefined ? { description } : {}),
      ...(events !== undefined ? { event_types: events } : {}),
      ...(enabled !== undefined ? { enabled: parseBoolean(enabled, '--enabled') } : {}),
    };
    if (Object.keys(body).length === 0)
      throw new UsageError('webhook update: give at least one of --url, --description, --events, --enabled');
    ctx.output(await ctx.client().updateEndpoint(tenant, endpointOf(ctx), body), formatEndpoint);
  },
};

const remove: Command = {
  name: 'webhook delete',
  usage: '--tenant SLUG EP_ID',
  summary: 'Delete an endpoint with its secrets and deliveries.',
  options: tenantOnly,
  positionals: ['EP_ID'],
  async run(ctx) {
    await ctx.client().deleteEndpoint(tenantOption(ctx.values, 'webhook delete'), endpointOf(ctx));
    if (!ctx.json) ctx.print(`webhook endpoint ${endpointOf(ctx)} deleted`);
  },
};

const rotate: Command = {
  name: 'webhook rotate-secret',
  usage: '--tenant SLUG EP_ID [--overlap-seconds N]',
  summary: 'A new signing secret, printed once; the old one keeps signing too for the overlap.',
  options: { ...tenantOnly, 'overlap-seconds': { type: 'string' } },
  positionals: ['EP_ID'],
  async run(ctx) {
    const tenant = tenantOption(ctx.values, 'webhook rotate-secret');
    ctx.output(
      await ctx
        .client()
        .rotateEndpointSecret(tenant, endpointOf(ctx), wholeNumberOption(ctx.values, 'overlap-seconds', 0, 31_536_000)),
      formatEndpoint,
    );
  },
};

const attempts: Command = {
  name: 'webhook attempts',
  usage: '--tenant SLUG EP_ID [--limit N]',
  summary: "An endpoint's latest delivery attempts: status code, latency, error.",
  options: { ...tenantOnly, limit: { type: 'string' } },
  positionals: ['EP_ID'],
  async run(ctx) {
    const tenant = tenantOption(ctx.values, 'webhook attempts');
    ctx.output(
      await ctx.client().listAttempts(tenant, endpointOf(ctx), wholeNumberOption(ctx.values, 'limit', 1, 500)),
      formatAttempts,
    );
  },
};

const messages: Command = {
  name: 'webhook messages',
  usage: '--tenant SLUG EP_ID [--state pending|delivered|failed] [--limit N]',
  summary: "An endpoint's messages and their delivery state.",
  options: { ...tenantOnly, state: { type: 'string' }, limit: { type: 'string' } },
  positionals: ['EP_ID'],
  async run(ctx) {
    const tenant = tenantOption(ctx.values, 'webhook messages');
    const state = stringOption(ctx.values, 'state');
    if (state !== undefined && !(STATES as readonly string[]).includes(state))
      throw new UsageError(`--state must be one of ${STATES.join(', ')} (got '${state}')`);
    const limit = wholeNumberOption(ctx.values, 'limit', 1, 500);
    ctx.output(
      await ctx.client().listMessages(tenant, endpointOf(ctx), {
        ...(state ? { state } : {}),
        ...(limit !== undefined ? { limit } : {}),
      }),
      formatMessages,
    );
  },
};

const retry: Command = {
  name: 'webhook retry',
  usage: '--tenant SLUG EP_ID MSG_ID',
  summary: 'Send a message to the endpoint again now.',
  options: tenantOnly,
  positionals: ['EP_ID', 'MSG_ID'],
  async run(ctx) {
    await ctx
      .client()
      .retryMessage(tenantOption(ctx.values, 'webhook retry'), endpointOf(ctx), ctx.positionals[1] ?? '');
    ctx.output({ queued: true }, () => `message ${ctx.positionals[1] ?? ''} queued for ${endpointOf(ctx)}`);
  },
};

const replay: Command = {
  name: 'webhook replay',
  usage: '--tenant SLUG EP_ID --since TIME [--until TIME]',
  summary: 'Send the messages of a time range to the endpoint again (until now by default).',
  options: { ...tenantOnly, since: { type: 'string' }, until: { type: 'string' } },
  positionals: ['EP_ID'],
  async run(ctx) {
    const tenant = tenantOption(ctx.values, 'webhook replay');
    const since = instantOption(ctx, 'since');
    if (since === undefined) throw new UsageError('webhook replay: missing --since TIME');
    const until = instantOption(ctx, 'until') ?? new Date().toISOString();
    let queued = 0;
    // The API queues a bounded number a call: follow `next` to the end of the range.
    let range: { since: string; until: string; after?: string } = { since, until };
    for (;;) {
      const answer = await ctx.client().replayMessages(tenant, endpointOf(ctx), range);
      queued += answer.queued;
      if (answer.next === null) break;
      range = { since: answer.next.since, until, after: answer.next.after };
    }
    ctx.output({ queued }, () => `${queued} messages queued for ${endpointOf(ctx)}`);
  },
};

export const webhookCommands: Command[] = [
  create,
  list,
  show,
  update,
  remove,
  rotate,
  attempts,
  messages,
  retry,
  replay,
];
