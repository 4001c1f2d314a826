import { randomUUID } from 'node:crypto';
import { DISABLE_FAILING_AFTER_MS } from '../../domain/downstream-endpoints.js';
import type { SecretBox } from '../../secrets/cipher.js';
import type { Db } from '../db/db.js';
import { ENTITLED, KIND, parkIfDisabled } from './endpoints.js';
import type { AttemptResult, ClaimLimits, ClaimResult, ClaimedDelivery, DeliveryQueue } from './types.js';

/**
 * The deliveries of an endpoint whose signing secret does not open wait this long before a
 * claim looks at them again: they keep their attempts and their place, and do not take a
 * claim's room from other endpoints at every poll.
 */
export const UNREADABLE_SECRET_RETRY_MS = 60_000;

/** The delivery queue in SQL: deliveries claimed under a lease, each attempt recorded. */
export class SqlDeliveryQueue implements DeliveryQueue {
  constructor(
    private readonly db: Db,
    private readonly secrets: SecretBox,
  ) {}

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
