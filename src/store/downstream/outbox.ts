import { publicId, RETRY_WINDOW_MS } from '../../domain/downstream-endpoints.js';
import type { DownstreamTarget, OutboxMessage } from '../../domain/downstream.js';
import type { Db, Queryable } from '../db/db.js';
import { ENTITLED } from './endpoints.js';
import type { CustomerMessageRecord, DownstreamMessageRecord, Outbox } from './types.js';

/**
 * Where the tenant's messages go, read in the caller's transaction (after `lockCustomer`, so
 * that the customer's last sequence number stays the last until the write): its endpoints,
 * when its tier includes downstream webhooks; null when it has none. KEY SHARE: an endpoint
 * deleted meanwhile waits for this commit, rather than failing the deliveries' foreign key
 * and, with it, the status change.
 */
export async function downstreamTarget(
  tx: Queryable,
  tenantId: number,
  customerId: string,
): Promise<DownstreamTarget | null> {
  // `tenantId` is a mode's data space; the endpoints are its tenant's, shared by both modes.
  const endpoints = await tx.query<{
    id: number;
    slug: string;
    enabled: boolean;
    event_types: string[] | null;
    mode: string;
  }>(
    `SELECT e.id, t.slug, e.enabled, e.event_types, s.mode FROM tenants s
     JOIN webhook_endpoints e ON e.tenant_id = COALESCE(s.mode_of, s.id)
     JOIN tenants t ON t.id = e.tenant_id JOIN tiers tr ON tr.name = t.tier
     WHERE s.id = $1 AND ${ENTITLED} FOR KEY SHARE OF e`,
    [tenantId],
  );
  const slug = endpoints[0]?.slug;
  if (slug === undefined) return null;
  const livemode = endpoints[0]?.mode !== 'test';
  const [seq] = await tx.query<{ last_sequence: string }>(
    'SELECT last_sequence FROM webhook_sequences WHERE tenant_id = $1 AND processor_customer_id = $2',
    [tenantId, customerId],
  );
  return {
    slug,
    livemode,
    endpoints: endpoints.map((e) => ({ key: e.id, enabled: e.enabled, eventTypes: e.event_types })),
    lastSequence: Number(seq?.last_sequence ?? 0),
    messageId: publicId('msg'),
  };
}

/**
 * Writes a message of the outbox in the caller's transaction: its sequence number as the
 * customer's last, the message, and a delivery for each of its endpoints.
 */
export async function writeOutboxMessage(
  tx: Queryable,
  tenantId: number,
  customerId: string,
  message: OutboxMessage,
  now: Date,
): Promise<void> {
  await tx.query(
    `INSERT INTO webhook_sequences (tenant_id, processor_customer_id, last_sequence) VALUES ($1, $2, $3)
     ON CONFLICT (tenant_id, processor_customer_id) DO UPDATE SET last_sequence = EXCLUDED.last_sequence`,
    [tenantId, customerId, message.sequence],
  );
  const [event] = await tx.query<{ id: string }>(
    `INSERT INTO webhook_events (uid, tenant_id, type, processor_customer_id, sequence, payload, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
    [message.id, tenantId, message.type, customerId, message.sequence, JSON.stringify(message.payload), now],
  );
  if (event === undefined || message.endpointKeys.length === 0) return;
  await tx.query(
    `INSERT INTO webhook_deliveries (endpoint_id, event_id, state, next_attempt_at, give_up_at, created_at)
     SELECT e, $2, 'pending', $3, $4, $3 FROM unnest($1::int[]) AS e`,
    [message.endpointKeys, event.id, now, new Date(now.getTime() + RETRY_WINDOW_MS)],
  );
}

/** Each customer's downstream messages in SQL. */
export class SqlOutbox implements Outbox {
  constructor(private readonly db: Db) {}

  async listCustomerMessages(tenantId: number, customerId: string, limit: number): Promise<CustomerMessageRecord[]> {
    // Along webhook_events_customer (migration 018): the customer's newest messages, then
    // their deliveries by event (webhook_deliveries_event), each naming its endpoint.
    const rows = await this.db.query<{
      uid: string;
      type: string;
      sequence: string;
      created_at: Date;
      deliveries:
        | {
            endpoint_id: string;
            state: DownstreamMessageRecord['state'];
            attempts: number;
            last_status: number | null;
            last_attempt_at: string | null;
          }[]
        | null;
    }>(
      `SELECT ev.uid, ev.type, ev.sequence, ev.created_at,
         (SELECT json_agg(json_build_object('endpoint_id', e.uid, 'state', d.state, 'attempts', d.attempts,
                  'last_status', d.last_status, 'last_attempt_at', d.last_attempt_at) ORDER BY e.id)
            FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE d.event_id = ev.id) AS deliveries
       FROM webhook_events ev
       WHERE ev.tenant_id = $1 AND ev.processor_customer_id = $2
       ORDER BY ev.sequence DESC LIMIT $3`,
      [tenantId, customerId, limit],
    );
    return rows.map((r) => ({
      messageId: r.uid,
      type: r.type,
      sequence: Number(r.sequence),
      createdAt: new Date(r.created_at),
      deliveries: (r.deliveries ?? []).map((d) => ({
        endpointId: d.endpoint_id,
        state: d.state,
        attempts: d.attempts,
        lastStatus: d.last_status,
        lastAttemptAt: d.last_attempt_at === null ? null : new Date(d.last_attempt_at),
      })),
    }));
  }
}
