import { randomUUID } from 'node:crypto';
import { DISABLE_FAILING_AFTER_MS, RETRY_WINDOW_MS, publicId } from '../../domain/downstream-endpoints.js';
import type { DownstreamTarget, OutboxMessage } from '../../domain/downstream.js';
import type { SecretBox } from '../../secrets/cipher.js';
import { rotateIn } from '../keys/credentials.js';
import type { Db, Queryable } from '../db/db.js';
import type {
  AttemptResult,
  ClaimLimits,
  ClaimResult,
  ClaimedDelivery,
  CreateEndpointResult,
  CustomerMessageRecord,
  DeliveryHealth,
  NewDownstreamEndpoint,
  ReplayPage,
  ReplayRange,
  DownstreamAttemptRecord,
  DownstreamEndpointPatch,
  DownstreamEndpointRecord,
  DownstreamMessageRecord,
  DownstreamStore,
} from '../store.js';

/**
 * The SQL of downstream webhooks (migration 010). A change's message is built by the domain
 * (domain/downstream.ts) and written by `writeOutboxMessage` inside the transaction of the
 * change (the outbox); the deliverer claims its deliveries, sends them and records each attempt.
 */

const ENTITLED = `(tr.entitlements->>'downstream_webhooks') = 'true'`;
const KIND = 'webhook_signing_secret';
/**
 * The deliveries of an endpoint whose signing secret does not open wait this long before a
 * claim looks at them again: they keep their attempts and their place, and do not take a
 * claim's room from other endpoints at every poll.
 */
export const UNREADABLE_SECRET_RETRY_MS = 60_000;

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
  const endpoints = await tx.query<{ id: number; slug: string; enabled: boolean; event_types: string[] | null }>(
    `SELECT e.id, t.slug, e.enabled, e.event_types FROM webhook_endpoints e
     JOIN tenants t ON t.id = e.tenant_id JOIN tiers tr ON tr.name = t.tier
     WHERE e.tenant_id = $1 AND ${ENTITLED} FOR KEY SHARE OF e`,
    [tenantId],
  );
  const slug = endpoints[0]?.slug;
  if (slug === undefined) return null;
  const [seq] = await tx.query<{ last_sequence: string }>(
    'SELECT last_sequence FROM webhook_sequences WHERE tenant_id = $1 AND processor_customer_id = $2',
    [tenantId, customerId],
  );
  return {
    slug,
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

interface EndpointRow {
  id: number;
  uid: string;
  url: string;
  description: string;
  event_types: string[] | null;
  enabled: boolean;
  disabled_reason: DownstreamEndpointRecord['disabledReason'];
  disabled_detail: string | null;
  disabled_at: Date | null;
  failing_since: Date | null;
  created_at: Date;
  updated_at: Date;
  pending: number;
  secrets: { created_at: string; expires_at: string | null }[] | null;
}

const ENDPOINT_SELECT = `SELECT e.id, e.uid, e.url, e.description, e.event_types, e.enabled, e.disabled_reason, e.disabled_detail,
    e.disabled_at, e.failing_since, e.created_at, e.updated_at,
    (SELECT count(*)::integer FROM webhook_deliveries d WHERE d.endpoint_id = e.id AND d.state = 'pending') AS pending,
    (SELECT json_agg(json_build_object('created_at', c.created_at, 'expires_at', c.expires_at) ORDER BY c.id DESC)
       FROM tenant_credentials c WHERE c.endpoint_id = e.id AND (c.expires_at IS NULL OR c.expires_at > $2)) AS secrets
  FROM webhook_endpoints e`;

function toEndpoint(row: EndpointRow): DownstreamEndpointRecord {
  const date = (v: Date | string | null) => (v === null ? null : new Date(v));
  return {
    id: row.uid,
    url: row.url,
    description: row.description,
    eventTypes: row.event_types,
    enabled: row.enabled,
    disabledReason: row.disabled_reason,
    disabledDetail: row.disabled_detail,
    disabledAt: date(row.disabled_at),
    failingSince: date(row.failing_since),
    secrets: (row.secrets ?? []).map((s) => ({ createdAt: new Date(s.created_at), expiresAt: date(s.expires_at) })),
    pending: Number(row.pending),
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}

/** The endpoint's key, when the tenant has it. */
async function endpointKey(q: Queryable, tenantId: number, uid: string): Promise<number | null> {
  const [row] = await q.query<{ id: number }>('SELECT id FROM webhook_endpoints WHERE tenant_id = $1 AND uid = $2', [
    tenantId,
    uid,
  ]);
  return row?.id ?? null;
}

/**
 * Parks what waits for a disabled endpoint: due at no time, so that no claim looks at it
 * (nor the check of whether anything is due) until the endpoint is enabled again, which
 * makes it due at once. Deliveries under way are parked when their attempt is recorded.
 */
async function parkIfDisabled(q: Queryable, endpoint: number): Promise<void> {
  await q.query(
    `UPDATE webhook_deliveries d SET next_attempt_at = 'infinity'
     FROM webhook_endpoints e
     WHERE e.id = $1 AND NOT e.enabled AND d.endpoint_id = e.id AND d.state = 'pending' AND d.leased_until IS NULL
       AND d.next_attempt_at <> 'infinity'`,
    [endpoint],
  );
}

/**
 * Queues (again) the given events for the endpoint, now, as new: a new retry window, its
 * backoff from the start. Returns how many.
 */
async function requeue(q: Queryable, endpoint: number, eventKeys: readonly number[], now: Date): Promise<number> {
  if (eventKeys.length === 0) return 0;
  const rows = await q.query(
    `INSERT INTO webhook_deliveries (endpoint_id, event_id, state, next_attempt_at, give_up_at, created_at)
     SELECT $1, ev, 'pending', $3, $4, $3 FROM unnest($2::bigint[]) AS ev
     ON CONFLICT (endpoint_id, event_id) DO UPDATE SET state = 'pending', give_up_at = EXCLUDED.give_up_at, completed_at = NULL,
       attempts = 0, created_at = EXCLUDED.created_at,
       next_attempt_at = CASE WHEN webhook_deliveries.leased_until > $3 THEN webhook_deliveries.next_attempt_at ELSE $3 END
     RETURNING 1`,
    [endpoint, eventKeys, now, new Date(now.getTime() + RETRY_WINDOW_MS)],
  );
  await parkIfDisabled(q, endpoint);
  return rows.length;
}

export class SqlDownstreamStore implements DownstreamStore {
  constructor(
    private readonly db: Db,
    private readonly secrets: SecretBox,
  ) {}

  private async endpointById(q: Queryable, id: number, now: Date): Promise<DownstreamEndpointRecord | null> {
    const [row] = await q.query<EndpointRow>(`${ENDPOINT_SELECT} WHERE e.id = $1`, [id, now]);
    return row ? toEndpoint(row) : null;
  }

  async createEndpoint(
    tenantId: number,
    endpoint: NewDownstreamEndpoint,
    now: Date,
    maxPerTenant: number,
  ): Promise<CreateEndpointResult> {
    return this.db.transaction(async (tx) => {
      // The count and the insert under the tenant row's lock: creations for one tenant take
      // their turn, so that parallel ones cannot each see room for one more. NO KEY UPDATE
      // leaves the inserts that only reference the tenant (its events, its history) free.
      // The count is a statement of its own, after the lock: under READ COMMITTED it then
      // reads what the creation before it committed (a subquery of the locking statement
      // would read the snapshot taken before the wait).
      const locked = await tx.query('SELECT 1 FROM tenants WHERE id = $1 FOR NO KEY UPDATE', [tenantId]);
      if (locked.length === 0) return 'tenant_not_found';
      const [count] = await tx.query<{ n: number }>(
        'SELECT count(*)::integer AS n FROM webhook_endpoints WHERE tenant_id = $1',
        [tenantId],
      );
      if ((count?.n ?? 0) >= maxPerTenant) return 'limit_reached';
      const [row] = await tx.query<{ id: number }>(
        `INSERT INTO webhook_endpoints (uid, tenant_id, url, description, event_types, enabled, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, true, $6, $6) RETURNING id`,
        [publicId('ep'), tenantId, endpoint.url, endpoint.description, endpoint.eventTypes, now],
      );
      if (!row) throw new Error('endpoint insert returned no row');
      await rotateIn(
        tx,
        tenantId,
        { kind: KIND, material: endpoint.secret, overlapS: 0, endpointId: row.id },
        now,
        this.secrets,
      );
      const created = await this.endpointById(tx, row.id, now);
      if (!created) throw new Error('endpoint vanished inside its own transaction');
      return created;
    });
  }

  async listEndpoints(tenantId: number, now: Date): Promise<DownstreamEndpointRecord[]> {
    const rows = await this.db.query<EndpointRow>(`${ENDPOINT_SELECT} WHERE e.tenant_id = $1 ORDER BY e.id`, [
      tenantId,
      now,
    ]);
    return rows.map(toEndpoint);
  }

  async getEndpoint(tenantId: number, id: string, now: Date): Promise<DownstreamEndpointRecord | null> {
    const [row] = await this.db.query<EndpointRow>(`${ENDPOINT_SELECT} WHERE e.tenant_id = $1 AND e.uid = $3`, [
      tenantId,
      now,
      id,
    ]);
    return row ? toEndpoint(row) : null;
  }

  async updateEndpoint(
    tenantId: number,
    id: string,
    patch: DownstreamEndpointPatch,
    now: Date,
  ): Promise<DownstreamEndpointRecord | null> {
    const fields = Object.keys(patch).filter((k) => patch[k as keyof DownstreamEndpointPatch] !== undefined);
    return this.db.transaction(async (tx) => {
      const [row] = await tx.query<{ id: number }>(
        `UPDATE webhook_endpoints SET
           url = CASE WHEN 'url' = ANY($3::text[]) THEN $4 ELSE url END,
           description = CASE WHEN 'description' = ANY($3::text[]) THEN $5 ELSE description END,
           event_types = CASE WHEN 'eventTypes' = ANY($3::text[]) THEN $6::text[] ELSE event_types END,
           enabled = CASE WHEN 'enabled' = ANY($3::text[]) THEN $7 ELSE enabled END,
           disabled_reason = CASE WHEN 'enabled' = ANY($3::text[]) THEN (CASE WHEN $7 THEN NULL WHEN enabled THEN 'admin' ELSE disabled_reason END) ELSE disabled_reason END,
           disabled_detail = CASE WHEN 'enabled' = ANY($3::text[]) THEN (CASE WHEN $7 THEN NULL WHEN enabled THEN 'disabled through the admin API' ELSE disabled_detail END) ELSE disabled_detail END,
           disabled_at = CASE WHEN 'enabled' = ANY($3::text[]) THEN (CASE WHEN $7 THEN NULL WHEN enabled THEN $8 ELSE disabled_at END) ELSE disabled_at END,
           failing_since = CASE WHEN 'enabled' = ANY($3::text[]) AND $7 THEN NULL ELSE failing_since END,
           updated_at = $8
         WHERE tenant_id = $1 AND uid = $2 RETURNING id`,
        [
          tenantId,
          id,
          fields,
          patch.url ?? null,
          patch.description ?? null,
          patch.eventTypes ?? null,
          patch.enabled ?? null,
          now,
        ],
      );
      if (!row) return null;
      await parkIfDisabled(tx, row.id);
      // Enabled (again): what waits is sent now, not at the end of its backoff.
      if (patch.enabled === true) {
        await tx.query(
          `UPDATE webhook_deliveries SET next_attempt_at = $2
           WHERE endpoint_id = $1 AND state = 'pending' AND next_attempt_at > $2 AND (leased_until IS NULL OR leased_until <= $2)`,
          [row.id, now],
        );
      }
      return this.endpointById(tx, row.id, now);
    });
  }

  async deleteEndpoint(tenantId: number, id: string): Promise<boolean> {
    const rows = await this.db.query('DELETE FROM webhook_endpoints WHERE tenant_id = $1 AND uid = $2 RETURNING id', [
      tenantId,
      id,
    ]);
    return rows.length > 0;
  }

  async rotateEndpointSecret(
    tenantId: number,
    id: string,
    secret: string,
    overlapS: number,
    now: Date,
  ): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const key = await endpointKey(tx, tenantId, id);
      if (key === null) return false;
      await rotateIn(tx, tenantId, { kind: KIND, material: secret, overlapS, endpointId: key }, now, this.secrets);
      return true;
    });
  }

  async listAttempts(tenantId: number, id: string, limit: number): Promise<DownstreamAttemptRecord[] | null> {
    const key = await endpointKey(this.db, tenantId, id);
    if (key === null) return null;
    const rows = await this.db.query<{
      uid: string;
      attempted_at: Date;
      status_code: number | null;
      latency_ms: number;
      outcome: DownstreamAttemptRecord['outcome'];
      error: string | null;
    }>(
      `SELECT ev.uid, a.attempted_at, a.status_code, a.latency_ms, a.outcome, a.error
       FROM webhook_attempts a JOIN webhook_events ev ON ev.id = a.event_id
       WHERE a.endpoint_id = $1 ORDER BY a.id DESC LIMIT $2`,
      [key, limit],
    );
    return rows.map((r) => ({
      messageId: r.uid,
      attemptedAt: new Date(r.attempted_at),
      statusCode: r.status_code,
      latencyMs: r.latency_ms,
      outcome: r.outcome,
      error: r.error,
    }));
  }

  async listMessages(
    tenantId: number,
    id: string,
    query: { state?: DownstreamMessageRecord['state']; limit: number },
  ): Promise<DownstreamMessageRecord[] | null> {
    const key = await endpointKey(this.db, tenantId, id);
    if (key === null) return null;
    const rows = await this.db.query<{
      uid: string;
      type: string;
      processor_customer_id: string;
      sequence: string;
      created_at: Date;
      state: DownstreamMessageRecord['state'];
      attempts: number;
      next_attempt_at: Date | null;
      last_attempt_at: Date | null;
      last_status: number | null;
      last_error: string | null;
    }>(
      `SELECT ev.uid, ev.type, ev.processor_customer_id, ev.sequence, ev.created_at, d.state, d.attempts,
         CASE WHEN d.next_attempt_at = 'infinity' THEN NULL ELSE d.next_attempt_at END AS next_attempt_at,
         d.last_attempt_at, d.last_status, d.last_error
       FROM webhook_deliveries d JOIN webhook_events ev ON ev.id = d.event_id
       WHERE d.endpoint_id = $1 AND ($2::text IS NULL OR d.state = $2) ORDER BY d.event_id DESC LIMIT $3`,
      [key, query.state ?? null, query.limit],
    );
    return rows.map((r) => ({
      messageId: r.uid,
      type: r.type,
      processorCustomerId: r.processor_customer_id,
      sequence: Number(r.sequence),
      createdAt: new Date(r.created_at),
      state: r.state,
      attempts: r.attempts,
      nextAttemptAt: r.state === 'pending' && r.next_attempt_at !== null ? new Date(r.next_attempt_at) : null,
      lastAttemptAt: r.last_attempt_at === null ? null : new Date(r.last_attempt_at),
      lastStatus: r.last_status,
      lastError: r.last_error,
    }));
  }

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

  async retryMessage(
    tenantId: number,
    id: string,
    messageId: string,
    now: Date,
  ): Promise<'queued' | 'endpoint_not_found' | 'message_not_found'> {
    return this.db.transaction(async (tx) => {
      const key = await endpointKey(tx, tenantId, id);
      if (key === null) return 'endpoint_not_found';
      const [event] = await tx.query<{ id: string }>(
        'SELECT id FROM webhook_events WHERE tenant_id = $1 AND uid = $2',
        [tenantId, messageId],
      );
      if (!event) return 'message_not_found';
      await requeue(tx, key, [Number(event.id)], now);
      return 'queued';
    });
  }

  async deliveryHealth(tenantId: number, failedSince: Date): Promise<DeliveryHealth> {
    // A tenant has a few endpoints (20 at most by the API), each read through its partial indexes:
    // the pending rows (webhook_deliveries_due) and the failed ones (webhook_deliveries_failed).
    const [row] = await this.db.query<{
      endpoints: number;
      disabled: number;
      pending: number;
      oldest: Date | null;
      failed: number;
    }>(
      `SELECT count(*)::int AS endpoints, (count(*) FILTER (WHERE NOT e.enabled))::int AS disabled,
         COALESCE(sum(p.n), 0)::int AS pending, min(p.oldest) AS oldest, COALESCE(sum(f.n), 0)::int AS failed
       FROM webhook_endpoints e
       CROSS JOIN LATERAL (SELECT count(*) AS n, min(d.created_at) AS oldest FROM webhook_deliveries d
         WHERE d.endpoint_id = e.id AND d.state = 'pending') p
       CROSS JOIN LATERAL (SELECT count(*) AS n FROM webhook_deliveries d
         WHERE d.endpoint_id = e.id AND d.state = 'failed' AND d.completed_at >= $2) f
       WHERE e.tenant_id = $1`,
      [tenantId, failedSince],
    );
    return {
      pending: Number(row?.pending ?? 0),
      oldestPendingAt: row?.oldest ? new Date(row.oldest) : null,
      failed: Number(row?.failed ?? 0),
      endpoints: Number(row?.endpoints ?? 0),
      disabledEndpoints: Number(row?.disabled ?? 0),
    };
  }

  async replay(tenantId: number, id: string, range: ReplayRange, limit: number, now: Date): Promise<ReplayPage | null> {
    return this.db.transaction(async (tx) => {
      const [endpoint] = await tx.query<{ id: number; event_types: string[] | null }>(
        'SELECT id, event_types FROM webhook_endpoints WHERE tenant_id = $1 AND uid = $2',
        [tenantId, id],
      );
      if (!endpoint) return null;
      // Keyset pages on (created_at, id): many messages share an instant (a batch of events).
      const [after] =
        range.after === undefined
          ? []
          : await tx.query<{ id: string }>('SELECT id FROM webhook_events WHERE tenant_id = $1 AND uid = $2', [
              tenantId,
              range.after,
            ]);
      const events = await tx.query<{ id: string; uid: string; created_at: Date }>(
        `SELECT id, uid, created_at FROM webhook_events
         WHERE tenant_id = $1 AND (created_at, id) >= ($2::timestamptz, $6::bigint) AND created_at < $3
           AND ($4::text[] IS NULL OR type = ANY($4::text[]))
         ORDER BY created_at, id LIMIT $5`,
        [
          tenantId,
          range.since,
          range.until,
          endpoint.event_types,
          limit + 1,
          after === undefined ? 0 : Number(after.id) + 1,
        ],
      );
      const page = events.slice(0, limit);
      const queued = await requeue(
        tx,
        endpoint.id,
        page.map((e) => Number(e.id)),
        now,
      );
      const last = page.at(-1);
      return {
        queued,
        next: events.length > limit && last ? { since: new Date(last.created_at), after: last.uid } : null,
      };
    });
  }

  async claim(now: Date, limits: ClaimLimits): Promise<ClaimResult> {
    // Most wakes find nothing due: one indexed read says so, without a transaction.
    const [due] = await this.db.query<{ due: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE state = 'pending' AND next_attempt_at <= $1) AS due`,
      [now],
    );
    if (due?.due !== true) return { deliveries: [], due: false };
    return this.db.transaction(async (tx) => {
      // The endpoints that may take an attempt now, oldest due first: those of a tenant at
      // its share, or full themselves, are never candidates, and a tenant's candidates are
      // as many as its room at most, so that the list (as long as this claim's room) holds
      // every other tenant's due deliveries, however large the backlog of the full ones.
      // The attempts under way are the leased rows: few, all in one partial index.
      // Locking an endpoint's row makes its claims one at a time across instances, so that
      // the cap on its attempts under way holds; NO KEY UPDATE leaves the outbox's inserts
      // (which only share the key) free.
      // Order: endpoints of tenants with nothing under way in the claiming process first, then
      // those whose receiver answers (not failing) before those failing, then oldest due: a
      // tenant that holds no slot is never queued behind the backlog of tenants that hold
      // them, and a receiver that hangs yields to one that answers.
      const busy = [...(limits.busyTenants ?? [])];
      const endpoints = await tx.query<{
        id: number;
        uid: string;
        url: string;
        tenant_id: number;
        secrets: string[];
        busy: boolean;
      }>(
        `WITH leased AS (
           SELECT d.endpoint_id, count(*)::integer AS n FROM webhook_deliveries d
           WHERE d.leased_until IS NOT NULL AND d.leased_until > $1 GROUP BY d.endpoint_id),
         tenant_leased AS (
           SELECT o.tenant_id, sum(l.n)::integer AS n FROM leased l JOIN webhook_endpoints o ON o.id = l.endpoint_id GROUP BY o.tenant_id),
         candidates AS (
           SELECT e.id, q.due, $4 - coalesce(tl.n, 0) AS tenant_room,
             e.tenant_id = ANY($5::integer[]) AS busy, e.failing_since IS NOT NULL AS failing,
             row_number() OVER (PARTITION BY e.tenant_id ORDER BY q.due, e.id) AS tenant_rank
           FROM webhook_endpoints e
           JOIN tenants t ON t.id = e.tenant_id JOIN tiers tr ON tr.name = t.tier
           LEFT JOIN leased l ON l.endpoint_id = e.id
           LEFT JOIN tenant_leased tl ON tl.tenant_id = e.tenant_id
           CROSS JOIN LATERAL (SELECT min(d.next_attempt_at) AS due FROM webhook_deliveries d WHERE d.endpoint_id = e.id AND d.state = 'pending') q
           WHERE e.enabled AND ${ENTITLED} AND q.due <= $1 AND coalesce(l.n, 0) < $3 AND coalesce(tl.n, 0) < $4)
         SELECT e.id, e.uid, e.url, e.tenant_id, k.busy,
           (SELECT array_agg(c.secret ORDER BY c.id DESC) FROM tenant_credentials c
            WHERE c.endpoint_id = e.id AND (c.expires_at IS NULL OR c.expires_at > $1)) AS secrets
         FROM candidates k JOIN webhook_endpoints e ON e.id = k.id
         WHERE k.tenant_rank <= k.tenant_room
         ORDER BY k.busy, k.failing, k.due, k.id LIMIT greatest($2, 1) FOR NO KEY UPDATE OF e SKIP LOCKED`,
        [now, limits.batch, limits.perEndpoint, limits.perTenant, busy],
      );
      // Something was due: once room frees (an attempt ends), it is worth claiming again,
      // whether a cap held it back or another claim had its endpoint locked.
      const claimed: ClaimedDelivery[] = [];
      if (endpoints.length === 0) return { deliveries: claimed, due: true };
      if (limits.batch <= 0)
        return { deliveries: claimed, due: true, ...(endpoints[0]?.busy === false ? { waiting: true } : {}) };
      const leasedUntil = new Date(now.getTime() + limits.leaseMs);
      // Attempts under way to each endpoint taken and to its tenant's endpoints, counted
      // again now that the endpoints are locked (a claim that committed meanwhile counts).
      // The endpoint's count is exact; the tenant's spans instances but is not locked: two
      // claims at once may each fill what room they saw.
      const counts = await tx.query<{ id: number; endpoint: number; tenant: number }>(
        `SELECT e.id,
           (SELECT count(*) FROM webhook_deliveries d WHERE d.endpoint_id = e.id AND d.leased_until IS NOT NULL AND d.leased_until > $2)::integer AS endpoint,
           (SELECT count(*) FROM webhook_endpoints o JOIN webhook_deliveries d ON d.endpoint_id = o.id
            WHERE o.tenant_id = e.tenant_id AND d.leased_until IS NOT NULL AND d.leased_until > $2)::integer AS tenant
         FROM webhook_endpoints e WHERE e.id = ANY($1::integer[])`,
        [endpoints.map((e) => e.id), now],
      );
      const leased = new Map(counts.map((c) => [c.id, c]));
      /** Attempts under way per tenant, as counted, then kept up to date by this claim. */
      const tenantLeases = new Map<number, number>();
      const unreadable: NonNullable<ClaimResult['unreadable']> = [];
      /** Tenants holding attempts in the claiming process, this claim's included. */
      const holding = new Set(busy);
      const shared = Math.min(limits.shared ?? limits.batch, limits.batch);
      let waiting = false;
      for (const e of endpoints) {
        const fresh = !holding.has(e.tenant_id);
        // A tenant holding slots takes from the shared part; one holding none may take one
        // slot beyond it, from the reserve. Candidates of tenants holding none come first:
        // the first that finds no room says so (the process is full of others' attempts).
        const room = fresh
          ? Math.max(shared - claimed.length, Math.min(1, limits.batch - claimed.length))
          : shared - claimed.length;
        if (room <= 0) {
          if (fresh) waiting = true;
          if (limits.batch - claimed.length <= 0) break;
          continue;
        }
        // Opened before anything is taken: one endpoint whose secret does not open (altered,
        // or copied from another row) must not fail the claim of every other endpoint. Its
        // deliveries stay pending, unattempted, and are looked at again later.
        let opened: string[];
        try {
          opened = (e.secrets ?? []).map((secret) => this.secrets.open(secret, { tenantId: e.tenant_id, kind: KIND }));
        } catch (err) {
          await tx.query(
            `UPDATE webhook_deliveries SET next_attempt_at = $3 WHERE endpoint_id = $1 AND state = 'pending' AND next_attempt_at <= $2`,
            [e.id, now, new Date(now.getTime() + UNREADABLE_SECRET_RETRY_MS)],
          );
          unreadable.push({
            endpointId: e.uid,
            tenantId: e.tenant_id,
            reason: err instanceof Error ? err.message : 'unreadable',
          });
          continue;
        }
        const count = leased.get(e.id);
        const tenantLeased = tenantLeases.get(e.tenant_id) ?? Number(count?.tenant ?? 0);
        const take = Math.min(room, limits.perEndpoint - Number(count?.endpoint ?? 0), limits.perTenant - tenantLeased);
        if (take <= 0) continue;
        const leaseToken = randomUUID();
        const rows = await tx.query<{
          event_id: string;
          attempts: number;
          give_up_at: Date;
          uid: string;
          payload: string;
        }>(
          `WITH taken AS (
             SELECT endpoint_id, event_id FROM webhook_deliveries
             WHERE endpoint_id = $1 AND state = 'pending' AND next_attempt_at <= $2
             ORDER BY next_attempt_at LIMIT $4 FOR UPDATE SKIP LOCKED)
           UPDATE webhook_deliveries d SET attempts = d.attempts + 1, next_attempt_at = $3, leased_until = $3, lease_token = $5
           FROM taken, webhook_events ev
           WHERE d.endpoint_id = taken.endpoint_id AND d.event_id = taken.event_id AND ev.id = d.event_id
           RETURNING d.event_id, d.attempts, d.give_up_at, ev.uid, ev.payload`,
          [e.id, now, leasedUntil, take, leaseToken],
        );
        tenantLeases.set(e.tenant_id, tenantLeased + rows.length);
        if (rows.length === 0) continue;
        holding.add(e.tenant_id);
        for (const r of rows) {
          claimed.push({
            endpointKey: e.id,
            endpointId: e.uid,
            eventKey: Number(r.event_id),
            messageId: r.uid,
            url: e.url,
            payload: r.payload,
            secrets: opened,
            attempt: r.attempts,
            giveUpAt: new Date(r.give_up_at),
            leaseToken,
            tenantId: e.tenant_id,
          });
        }
      }
      return {
        deliveries: claimed,
        due: true,
        ...(unreadable.length > 0 ? { unreadable } : {}),
        ...(waiting ? { waiting } : {}),
      };
    });
  }

  async complete(claim: ClaimedDelivery, result: AttemptResult, now: Date): Promise<'recorded' | 'gave_up' | 'lost'> {
    return this.db.transaction(async (tx) => {
      // The endpoint first, as a delete does (then its deliveries): no lock cycle with one.
      const [endpoint] = await tx.query<{ url: string; failing: boolean }>(
        'SELECT url, failing_since IS NOT NULL AS failing FROM webhook_endpoints WHERE id = $1 FOR NO KEY UPDATE',
        [claim.endpointKey],
      );
      if (!endpoint) return 'lost';
      const delivered = result.outcome === 'delivered';
      // The delivery as the attempt left it, given up against its window as it is now (a
      // retry or replay meanwhile gave it a new one), and the attempt, in one statement.
      const [row] = await tx.query<{ state: string | null }>(
        `WITH done AS (
           UPDATE webhook_deliveries SET
             state = CASE WHEN $4 THEN 'delivered' WHEN $5::timestamptz >= give_up_at THEN 'failed' ELSE 'pending' END,
             next_attempt_at = CASE WHEN $4 THEN $6::timestamptz ELSE $5::timestamptz END,
             completed_at = CASE WHEN $4 OR $5::timestamptz >= give_up_at THEN $6::timestamptz END,
             leased_until = NULL, lease_token = NULL, last_attempt_at = $6, last_status = $7, last_error = $8
           WHERE endpoint_id = $1 AND event_id = $2 AND lease_token = $3 RETURNING state),
         attempt AS (
           INSERT INTO webhook_attempts (endpoint_id, event_id, attempted_at, status_code, latency_ms, outcome, error)
           SELECT $1::integer, $2::bigint, $6::timestamptz, $7::integer, $9::integer,
             CASE WHEN $10::text <> 'gone' AND (SELECT state FROM done) = 'failed' THEN 'gave_up' ELSE $10::text END, $8::text
           WHERE EXISTS (SELECT 1 FROM webhook_events WHERE id = $2))
         SELECT (SELECT state FROM done) AS state`,
        [
          claim.endpointKey,
          claim.eventKey,
          claim.leaseToken,
          delivered,
          result.retryAt,
          now,
          result.statusCode,
          result.error,
          Math.round(result.latencyMs),
          result.outcome,
        ],
      );
      const gaveUp = row?.state === 'failed';
      const kept = row?.state !== null && row?.state !== undefined;
      // What this attempt says of the endpoint holds only for the URL it went to: one
      // changed meanwhile is judged by its own attempts.
      if (endpoint.url !== claim.url) {
        await parkIfDisabled(tx, claim.endpointKey);
        return kept ? 'recorded' : 'lost';
      }
      if (delivered) {
        if (endpoint.failing)
          await tx.query('UPDATE webhook_endpoints SET failing_since = NULL WHERE id = $1', [claim.endpointKey]);
      } else if (result.outcome === 'gone') {
        await tx.query(
          `UPDATE webhook_endpoints SET enabled = false, disabled_reason = 'gone', disabled_at = $2, updated_at = $2,
             disabled_detail = 'the endpoint answered 410 Gone to message ' || $3
           WHERE id = $1 AND enabled`,
          [claim.endpointKey, now, claim.messageId],
        );
      } else {
        // The failing streak starts at the first failure after a success; one that has lasted
        // for days disables the endpoint, and its admin reads why. The row is written only
        // when one of the two happens.
        await tx.query(
          `UPDATE webhook_endpoints SET failing_since = coalesce(failing_since, $2),
             enabled = CASE WHEN failing_since < $3 THEN false ELSE enabled END,
             disabled_reason = CASE WHEN failing_since < $3 THEN 'failing' ELSE disabled_reason END,
             disabled_at = CASE WHEN failing_since < $3 THEN $2 ELSE disabled_at END,
             updated_at = CASE WHEN failing_since < $3 THEN $2 ELSE updated_at END,
             disabled_detail = CASE WHEN failing_since < $3
               THEN 'every attempt failed since ' || to_char(failing_since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') || '; the last: ' || $4
               ELSE disabled_detail END
           WHERE id = $1 AND enabled AND (failing_since IS NULL OR failing_since < $3)`,
          [
            claim.endpointKey,
            now,
            new Date(now.getTime() - DISABLE_FAILING_AFTER_MS),
            result.error ?? `HTTP ${result.statusCode ?? '?'}`,
          ],
        );
      }
      await parkIfDisabled(tx, claim.endpointKey);
      if (!kept) return 'lost';
      return gaveUp ? 'gave_up' : 'recorded';
    });
  }

  async oldestPendingAt(): Promise<Date | null> {
    // Oldest first along the index of pending rows: the first of a sendable endpoint ends it.
    const [row] = await this.db.query<{ at: Date }>(
      `SELECT d.created_at AS at FROM webhook_deliveries d
       JOIN webhook_endpoints e ON e.id = d.endpoint_id JOIN tenants t ON t.id = e.tenant_id JOIN tiers tr ON tr.name = t.tier
       WHERE d.state = 'pending' AND e.enabled AND ${ENTITLED} ORDER BY d.created_at LIMIT 1`,
    );
    return row ? new Date(row.at) : null;
  }
}
