import { publicId } from '../../domain/downstream-endpoints.js';
import type { SecretBox } from '../../secrets/cipher.js';
import type { Db, Queryable } from '../db/db.js';
import { rotateIn } from '../keys/credentials.js';
import { RETRY_WINDOW_MS } from '../../domain/downstream-endpoints.js';
import type {
  CreateEndpointResult,
  DeliveryHealth,
  DownstreamAttemptRecord,
  DownstreamEndpointPatch,
  DownstreamEndpointRecord,
  DownstreamMessageRecord,
  EndpointStore,
  NewDownstreamEndpoint,
  ReplayPage,
  ReplayRange,
} from './types.js';

/**
 * The SQL of downstream webhooks (migration 010). A change's message is built by the domain
 * (domain/downstream.ts) and written by `writeOutboxMessage` inside the transaction of the
 * change (the outbox); the deliverer claims its deliveries, sends them and records each attempt.
 */

/** A tenant's tier includes downstream messages. */
export const ENTITLED = `(tr.entitlements->>'downstream_webhooks') = 'true'`;
/** The kind of an endpoint's signing secret among the credentials. */
export const KIND = 'webhook_signing_secret';

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
export async function parkIfDisabled(q: Queryable, endpoint: number): Promise<void> {
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

/** A tenant's downstream endpoints and their messages in SQL. */
export class SqlEndpoints implements EndpointStore {
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
}
