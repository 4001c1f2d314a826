import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { answerBody, lookupBody } from '../../domain/lookup.js';
import type { SubscriberStatus } from '../../domain/types.js';
import type { Change } from '../../domain/stripe/fold.js';
import type { ReadModel } from '../../readmodel/index.js';
import type { ChangeCause, Outbox, SubscriberStore } from '../../store/index.js';
import type { App } from '../app-instance.js';
import { AppError } from '../problems.js';
import { presentSubscriber } from '../presenters.js';
import {
  CustomerId,
  CustomerWebhookList,
  CustomerWebhooksQuery,
  LookupKnown,
  MAX_CUSTOMER_WEBHOOKS,
  LookupUnknown,
  MAX_SUBSCRIBERS_PAGE,
  ProblemRef,
  PutSubscriberBody,
  Subscriber,
  SubscriberListQuery,
  SubscriberPage,
} from '../schemas.js';
import { doc, ERRORS, invalid, paramsOf, tenantOf } from './common.js';
import type { Audience } from './common.js';

/**
 * A tenant's subscribers, for the operator (/admin/v1/tenants/:slug/subscribers) and the
 * tenant (/v1/subscribers): list by answered or derived status, show one with its episodes
 * and history, the webhook messages its changes raised, its status as the lookup answers it
 * (with `pay_url`), and an override set or cleared. The operator alone may also set a status directly and forget a customer (the
 * admin routes the service began with, kept as they were).
 */
export interface SubscriberRoutesOptions {
  audience: Audience;
  subscribers: SubscriberStore;
  /** The downstream messages of a customer. */
  outbox: Outbox;
  model: ReadModel;
  now: () => number;
}

const DEFAULT_CUSTOMER_WEBHOOKS = 50;

/** An action is an event at the time it is made, with its author. */
function causeOf(req: FastifyRequest, at: Date): ChangeCause {
  const p = req.principal;
  return {
    source: 'admin',
    eventId: null,
    eventType: null,
    declineCode: null,
    occurredAt: at,
    ...(p?.kind === 'key' ? { secretKeyId: p.keyId } : {}),
  };
}

const statusesOf = (list: string | undefined): SubscriberStatus[] | undefined =>
  list === undefined ? undefined : ([...new Set(list.split(','))] as SubscriberStatus[]);

export async function subscriberRoutes(app: App, opts: SubscriberRoutesOptions): Promise<void> {
  const { audience, subscribers, model } = opts;
  const now = () => new Date(opts.now());
  const tag = 'subscribers';
  const customer = paramsOf(audience, { customerId: CustomerId });

  async function apply(req: FastifyRequest, customerId: string, change: Change): Promise<void> {
    const tenant = tenantOf(req);
    const at = now();
    const outcome = await subscribers.applyChange(tenant.id, customerId, change, causeOf(req, at), at);
    if (outcome === 'applied') return;
    // Stale, but the state asked for may hold already (a repeated DELETE or PUT): that is success.
    const current = await subscribers.getSubscriber(tenant.id, customerId);
    const holds =
      change.kind === 'delete'
        ? (current?.status ?? null) === null
        : change.kind === 'set' && current?.derivedStatus === change.status && current.reason === change.reason;
    if (!holds) throw new AppError('stale_change');
  }

  async function shown(req: FastifyRequest, customerId: string) {
    const record = await subscribers.getSubscriber(tenantOf(req).id, customerId);
    if (!record) throw new AppError('subscriber_not_found');
    return presentSubscriber(record);
  }

  app.get(
    '/subscribers',
    {
      config: { scope: 'subscribers:read' },
      schema: {
        ...doc(
          audience,
          'listSubscribers',
          "A page of the tenant's subscribers in customer id order, filtered by answered or derived status, reason and time of change",
          tag,
        ),
        params: paramsOf(audience, {}),
        querystring: SubscriberListQuery,
        response: { 200: SubscriberPage, ...ERRORS },
      },
    },
    async (req) => {
      const q = req.query;
      const limit = q.limit === undefined ? 100 : Number(q.limit);
      if (limit > MAX_SUBSCRIBERS_PAGE) throw invalid('limit', `must be at most ${MAX_SUBSCRIBERS_PAGE}`);
      const status = statusesOf(q.status);
      const derivedStatus = statusesOf(q.derived_status);
      const page = await subscribers.listSubscribers(tenantOf(req).id, {
        limit,
        ...(status !== undefined ? { status } : {}),
        ...(derivedStatus !== undefined ? { derivedStatus } : {}),
        ...(q.reason !== undefined ? { reason: q.reason } : {}),
        ...(q.updated_since !== undefined ? { updatedSince: new Date(q.updated_since) } : {}),
        ...(q.cursor !== undefined ? { after: q.cursor } : {}),
      });
      return {
        data: page.rows.map((r) => ({
          processor_customer_id: r.processorCustomerId,
          status: r.status,
          derived_status: r.derivedStatus,
          reason: r.reason,
          updated_at: r.updatedAt.toISOString(),
        })),
        next_cursor: page.more ? (page.rows.at(-1)?.processorCustomerId ?? null) : null,
      };
    },
  );

  app.get(
    '/subscribers/:customerId',
    {
      config: { scope: 'subscribers:read' },
      schema: {
        ...doc(audience, 'getSubscriber', 'Show a subscriber with its episodes and history', tag),
        params: customer,
        response: { 200: Subscriber, ...ERRORS },
      },
    },
    async (req) => shown(req, req.params.customerId),
  );

  app.get(
    '/subscribers/:customerId/webhooks',
    {
      config: { scope: 'subscribers:read' },
      schema: {
        ...doc(
          audience,
          'listSubscriberWebhooks',
          "The webhook messages the subscriber's changes raised, newest first, with their deliveries",
          tag,
        ),
        description:
          'An empty list for a customer that raised none (or is unknown): messages are kept for the retention period only.',
        params: customer,
        querystring: CustomerWebhooksQuery,
        response: { 200: CustomerWebhookList, ...ERRORS },
      },
    },
    async (req) => {
      const limit = req.query.limit === undefined ? DEFAULT_CUSTOMER_WEBHOOKS : Number(req.query.limit);
      if (limit > MAX_CUSTOMER_WEBHOOKS) throw invalid('limit', `must be at most ${MAX_CUSTOMER_WEBHOOKS}`);
      const messages = await opts.outbox.listCustomerMessages(tenantOf(req).id, req.params.customerId, limit);
      return {
        data: messages.map((m) => ({
          message_id: m.messageId,
          type: m.type,
          sequence: m.sequence,
          created_at: m.createdAt.toISOString(),
          deliveries: m.deliveries.map((d) => ({
            endpoint_id: d.endpointId,
            state: d.state,
            attempts: d.attempts,
            last_status: d.lastStatus,
            last_attempt_at: d.lastAttemptAt?.toISOString() ?? null,
          })),
        })),
      };
    },
  );

  app.get(
    '/subscribers/:customerId/status',
    {
      config: { scope: 'status:read' },
      schema: {
        ...doc(
          audience,
          'getSubscriberAnswer',
          "The subscriber's status as the lookup answers it, with pay_url (a secret key stands in for the hmac)",
          tag,
        ),
        params: customer,
        response: { 200: { anyOf: [LookupKnown, LookupUnknown] }, 402: ProblemRef, ...ERRORS },
      },
    },
    async (req, reply) => {
      const nowMs = opts.now();
      if (!model.serving(nowMs)) throw new AppError('store_unavailable');
      // The space of the request's mode: its subscribers answer.
      const tenant = model.tenantById(tenantOf(req).id);
      if (tenant === null) throw new AppError('store_unavailable');
      if (tenant.suspended) throw new AppError('tenant_suspended');
      const customerId = req.params.customerId;
      const status = model.status(tenant.id, customerId);
      const body =
        status === null || status === 'active'
          ? lookupBody(tenant, status)
          : answerBody(tenant, status, model.extra(tenant.id, customerId), true, nowMs);
      // The lookup's own bytes, not serialised again.
      return (reply as FastifyReply)
        .header('content-type', 'application/json; charset=utf-8')
        .header('cache-control', 'no-store')
        .send(body);
    },
  );

  /**
   * An override, as of now: the tenant's `PUT .../override`, and the operator's `PUT
   * /subscribers/:customerId` of the first admin API, which is the same action under its first name.
   */
  const setStatus = (path: string, operationId: string, summary: string) =>
    app.put(
      path,
      {
        config: { scope: 'subscribers:write' },
        schema: {
          ...doc(audience, operationId, summary, tag),
          description:
            'An event at the time it is made: a Stripe event dated later keeps precedence (409 stale_change).',
          params: customer,
          body: PutSubscriberBody,
          response: { 200: Subscriber, 409: ProblemRef, ...ERRORS },
        },
      },
      async (req) => {
        await apply(req, req.params.customerId, {
          kind: 'set',
          status: req.body.status,
          reason: req.body.reason ?? 'manual',
        });
        return shown(req, req.params.customerId);
      },
    );
  setStatus(
    '/subscribers/:customerId/override',
    'setSubscriberOverride',
    "Override a subscriber's status as of now, until a later Stripe event changes one of its episodes",
  );

  app.delete(
    '/subscribers/:customerId/override',
    {
      config: { scope: 'subscribers:write' },
      schema: {
        ...doc(
          audience,
          'clearSubscriberOverride',
          'Clear an override: the status is again what the episodes and the policy say',
          tag,
        ),
        params: customer,
        response: { 204: Type.Null({ description: 'Cleared' }), 409: ProblemRef, ...ERRORS },
      },
    },
    async (req, reply) => {
      await apply(req, req.params.customerId, { kind: 'clear' });
      return reply.code(204).send(null);
    },
  );

  if (audience !== 'operator') return;

  setStatus('/subscribers/:customerId', 'setSubscriberStatus', "Set a subscriber's status");

  app.delete(
    '/subscribers/:customerId',
    {
      schema: {
        ...doc(audience, 'deleteSubscriber', 'Forget a subscriber (it becomes unknown, so active)', tag),
        params: customer,
        response: { 204: Type.Null({ description: 'Forgotten' }), 409: ProblemRef, ...ERRORS },
      },
    },
    async (req, reply) => {
      await apply(req, req.params.customerId, { kind: 'delete' });
      return reply.code(204).send(null);
    },
  );
}
