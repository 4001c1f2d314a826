import {
  createSecretKey,
  getSecretKey,
  listSecretKeys,
  markSecretKeysSeenInBrowser,
  revokeSecretKey,
  rotateSecretKey,
  touchSecretKeys,
} from './keys/secret-keys.js';
import type { NewSecretKey, SecretKeyRecord } from './keys/secret-keys.js';
import { createConsoleSession, deleteConsoleSession, findConsoleSession } from './sessions/console-sessions.js';
import type { ConsoleSessionRecord, NewConsoleSession } from './sessions/console-sessions.js';
import type { Change } from '../domain/stripe/fold.js';
import { zeroStatusCounts } from '../domain/types.js';
import type { Credential, Entitlements, SubscriberStatus, TenantAuth } from '../domain/types.js';
import { SecretBox } from '../secrets/cipher.js';
import { tryDeploymentLock, type Db, type ListenHandlers, type Queryable } from './db/db.js';
import { outsideRequestBounds } from './db/deadline.js';
import { policyImpact, recoveryAnalytics } from './analytics/analytics.js';
import type { AnalyticsQuery, PolicyImpact, RecoveryAnalytics } from './analytics/analytics.js';
import { PRUNE_STRIPE_INTAKE_SQL, addStripeIntake, readStripeIntake } from './stripe/intake.js';
import type { StripeIntakeCount } from '../domain/stripe/intake.js';
import {
  applyAdminChange,
  applyStripeEvent,
  lockCustomer,
  reanswerCustomer,
  recordDueLockout,
  storedStatus,
  tenantPolicy,
} from './stripe/episodes.js';
import { DEFAULT_POLICY } from '../domain/policy.js';
import type { Policy } from '../domain/policy.js';
import { loadLookupState, lookupChangesSince, pruneLookupChanges } from './changes/lookup-changes.js';
import { PRUNE_STATUS_CHANGES_SQL, listStatuses, statusChangesAfter } from './feed/status-feed.js';
import type { FeedCursor, ListCursor } from '../domain/feed-cursor.js';
import { credentialChanges, rotateIn } from './keys/credentials.js';
import { SqlDownstreamStore } from './downstream/endpoints.js';
import { TENANT_SELECT, credential, orderEntitlements, readTenantsAuth, toTenant } from './tenants/rows.js';
import type { TenantRow } from './tenants/rows.js';
import type {
  ApplyOutcome,
  ChangePosition,
  ChangeCause,
  CreateTenantResult,
  CredentialChange,
  CredentialKind,
  CredentialRotation,
  CredentialSummary,
  DeleteTierResult,
  RetainedTable,
  EpisodeRecord,
  StatusChanges,
  StatusListPage,
  HistoryEntry,
  LookupChanges,
  LookupStateSink,
  NewTenant,
  Store,
  StripeEventInput,
  StripeEventResult,
  StripeIntakeSummary,
  SubscriberListQuery,
  SubscriberListRow,
  SubscriberRecord,
  TenantRecord,
  TenantSettings,
  TierRecord,
  UpdateTenantResult,
} from './store.js';

/** Advisory lock keys (arbitrary, fixed) that let one instance of a deployment prune a table at a time. */
export const RETENTION_LOCK_KEYS: Record<RetainedTable, number> = {
  stripe_events: 0x64770001,
  subscriber_history: 0x64770002,
  webhook_events: 0x64770003,
  webhook_attempts: 0x64770004,
  status_changes: 0x64770005,
  stripe_intake: 0x64770006,
};

/** Each table's oldest rows, at most $2 of them recorded before $1, deleted. */
const PRUNE_SQL: Record<RetainedTable, string> = {
  stripe_events: `WITH doomed AS (SELECT tenant_id, event_id FROM stripe_events WHERE received_at < $1 ORDER BY received_at LIMIT $2)
    DELETE FROM stripe_events e USING doomed d WHERE e.tenant_id = d.tenant_id AND e.event_id = d.event_id RETURNING 1 AS n`,
  // A subscriber's newest entry stays whatever its age: it says why the status is what it is.
  subscriber_history: `WITH doomed AS (
      SELECT h.id FROM subscriber_history h WHERE h.recorded_at < $1
        AND EXISTS (SELECT 1 FROM subscriber_history n WHERE n.tenant_id = h.tenant_id AND n.processor_customer_id = h.processor_customer_id AND n.id > h.id)
      ORDER BY h.recorded_at LIMIT $2)
    DELETE FROM subscriber_history h USING doomed d WHERE h.id = d.id RETURNING 1 AS n`,
  // A message still waiting for a delivery stays (one whose retry window ended before the
  // cut-off does not: its endpoint stayed disabled); its deliveries and attempts go with it.
  webhook_events: `WITH doomed AS (
      SELECT ev.id FROM webhook_events ev WHERE ev.created_at < $1
        AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = ev.id AND d.state = 'pending' AND d.give_up_at >= $1)
      ORDER BY ev.created_at LIMIT $2)
    DELETE FROM webhook_events ev USING doomed d WHERE ev.id = d.id RETURNING 1 AS n`,
  webhook_attempts: `WITH doomed AS (SELECT id FROM webhook_attempts WHERE attempted_at < $1 ORDER BY attempted_at LIMIT $2)
    DELETE FROM webhook_attempts a USING doomed d WHERE a.id = d.id RETURNING 1 AS n`,
  status_changes: PRUNE_STATUS_CHANGES_SQL,
  stripe_intake: PRUNE_STRIPE_INTAKE_SQL,
};

/** The change notifications' channel in the `public` schema; elsewhere it names the schema too (migration 007). */
export const CHANGES_CHANNEL = 'dunwall_invalidate';
const HISTORY_LIMIT = 100;
const UNIQUE_VIOLATION = '23505';

interface HistoryRow {
  status: SubscriberStatus | null;
  derived_status: SubscriberStatus | null;
  lockout_at: Date | null;
  policy_rule: HistoryEntry['policyRule'];
  secret_key_id: string | null;
  admin_action: HistoryEntry['adminAction'];
  reason: string | null;
  effect: HistoryEntry['effect'];
  episode: string | null;
  source: HistoryEntry['source'];
  event_id: string | null;
  event_type: string | null;
  decline_code: string | null;
  occurred_at: Date;
  recorded_at: Date;
}

/** A tenant re-read inside the transaction that wrote it. */
async function tenantById(tx: Queryable, id: number): Promise<TenantRecord> {
  const [row] = await tx.query<TenantRow>(`${TENANT_SELECT} WHERE t.id = $1`, [id]);
  if (!row) throw new Error('tenant vanished inside its own transaction');
  return toTenant(row);
}

interface TierRow {
  name: string;
  entitlements: Entitlements;
  created_at: Date;
  updated_at: Date;
}

function toTier(row: TierRow): TierRecord {
  return {
    name: row.name,
    entitlements: orderEntitlements(row.entitlements),
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}

function toHistory(row: HistoryRow): HistoryEntry {
  return {
    status: row.status,
    derivedStatus: row.derived_status,
    lockoutAt: row.lockout_at === null ? null : new Date(row.lockout_at),
    policyRule: row.policy_rule,
    secretKeyId: row.secret_key_id,
    adminAction: row.admin_action,
    reason: row.reason,
    effect: row.effect,
    episode: row.episode,
    source: row.source,
    eventId: row.event_id,
    eventType: row.event_type,
    declineCode: row.decline_code,
    occurredAt: new Date(row.occurred_at),
    recordedAt: new Date(row.recorded_at),
  };
}

function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === UNIQUE_VIOLATION;
}

interface EpisodeRow {
  episode: string;
  state: EpisodeRecord['state'];
  reason: string;
  decline_code: string | null;
  at: Date;
  event_id: string;
  dunning_started_at: Date | null;
  resolved_at: Date | null;
  invoice_id: string | null;
  invoice_status: string | null;
  amount_due: string | null;
  amount_remaining: string | null;
  currency: string | null;
  hosted_invoice_url: string | null;
}

const dateOrNull = (v: Date | null): Date | null => (v === null ? null : new Date(v));
const numberOrNull = (v: string | number | null): number | null => (v === null ? null : Number(v));

function toEpisodeRecord(row: EpisodeRow): EpisodeRecord {
  return {
    episode: row.episode,
    state: row.state,
    reason: row.reason,
    declineCode: row.decline_code,
    at: new Date(row.at),
    eventId: row.event_id,
    dunningStartedAt: dateOrNull(row.dunning_started_at),
    resolvedAt: dateOrNull(row.resolved_at),
    invoice:
      row.invoice_id === null
        ? null
        : {
            id: row.invoice_id,
            status: row.invoice_status,
            amountDue: numberOrNull(row.amount_due),
            amountRemaining: numberOrNull(row.amount_remaining),
            currency: row.currency,
            hostedInvoiceUrl: row.hosted_invoice_url,
          },
  };
}

function sameStatus(a: StripeEventResult['before'], b: StripeEventResult['after']): boolean {
  return a?.status === b?.status && a?.reason === b?.reason;
}

/**
 * Keeps the event and applies it, in the caller's transaction: a redelivery finds the
 * row and changes nothing, so the event and its effect commit together or not at all.
 */
async function recordIn(
  tx: Queryable,
  tenantId: number,
  { event, derivation }: StripeEventInput,
  now: Date,
): Promise<StripeEventResult> {
  const inserted = await tx.query(
    `INSERT INTO stripe_events (tenant_id, event_id, event_type, processor_customer_id, created, facts, outcome, received_at)
     VALUES ($1, $2, $3, $4, $5, $6, 'ignored', $7) ON CONFLICT (tenant_id, event_id) DO NOTHING RETURNING 1`,
    [tenantId, event.eventId, event.eventType, event.customerId, event.created, JSON.stringify(event.facts), now],
  );
  const customerId = derivation.customerId;
  if (inserted.length === 0) {
    // A redelivery changes nothing: before and after are what the store holds now.
    const current = customerId === null ? null : await storedStatus(tx, tenantId, customerId);
    return { outcome: 'duplicate', customerId, before: current, after: current };
  }
  if (customerId === null) return { outcome: 'ignored', customerId, before: null, after: null };
  const facts = {
    eventId: event.eventId,
    eventType: event.eventType,
    created: event.created,
    declineCode: event.declineCode,
  };
  const result = await applyStripeEvent(tx, tenantId, customerId, facts, derivation, now);
  if (result.outcome !== 'ignored') {
    await tx.query('UPDATE stripe_events SET outcome = $3 WHERE tenant_id = $1 AND event_id = $2', [
      tenantId,
      event.eventId,
      result.outcome,
    ]);
  }
  return { ...result, customerId };
}

/** Rolls a dry run's transaction back, carrying what it would have done. */
/**
 * The time a time-driven write is made at: the database's `now()`, or `notAfter` when that
 * is earlier (a test's clock). Never later than the database's: an instance whose clock runs
 * ahead cannot bring a scheduled lockout forward.
 */
async function databaseNow(tx: Queryable, notAfter: Date | null): Promise<Date> {
  const [row] = await tx.query<{ now: Date }>('SELECT LEAST($1::timestamptz, now()) AS now', [notAfter]);
  if (!row) throw new Error('the database did not tell its time');
  return new Date(row.now);
}

class DryRun extends Error {
  constructor(readonly results: StripeEventResult[]) {
    super('dry run');
  }
}

/** The one `Store`: plain PostgreSQL SQL, the same on a server and on PGlite. */
export class SqlStore implements Store {
  readonly engine: 'postgres' | 'embedded';
  readonly downstream: SqlDownstreamStore;
  private readonly listeners = new Set<() => void>();

  /** Seals HMAC and Stripe signing secrets on write, opens them on read; default: clear text. */
  private readonly secrets: SecretBox;

  constructor(
    private readonly db: Db,
    options: { secrets?: SecretBox } = {},
  ) {
    this.engine = db.engine;
    this.secrets = options.secrets ?? SecretBox.clear();
    this.downstream = new SqlDownstreamStore(db, this.secrets);
  }

  onCommit(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Listens on the channel of the schema the tables live in (migration 007). */
  async listenForChanges(handlers: ListenHandlers): Promise<() => Promise<void>> {
    const [row] = await this.db.query<{ channel: string }>('SELECT dunwall_changes_channel() AS channel');
    return this.db.listen(row?.channel ?? CHANGES_CHANNEL, handlers);
  }

  loadLookupState(sink: LookupStateSink): Promise<ChangePosition> {
    return loadLookupState(this.db, this.secrets, sink);
  }

  lookupChangesSince(since: ChangePosition): Promise<LookupChanges> {
    return lookupChangesSince(this.db, this.secrets, since);
  }

  pruneLookupChanges(olderThanMs: number): Promise<number> {
    return pruneLookupChanges(this.db, olderThanMs);
  }

  listStatuses(tenantId: number, cursor: ListCursor | null, limit: number): Promise<StatusListPage> {
    return listStatuses(this.db, tenantId, cursor, limit);
  }

  statusChangesAfter(tenantId: number, cursor: FeedCursor, limit: number): Promise<StatusChanges> {
    return statusChangesAfter(this.db, tenantId, cursor, limit);
  }

  /**
   * After a commit: this instance learns of its own writes at once, others through NOTIFY.
   * What the listeners set off (a catch-up, a delivery) is not the request's: it runs
   * outside the bound of the request that committed.
   */
  private emit(): void {
    outsideRequestBounds(() => {
      for (const listener of this.listeners) listener();
    });
  }

  async getTenantAuth(slug: string): Promise<TenantAuth | null> {
    const [tenant] = await readTenantsAuth(this.db, this.secrets, { slug });
    return tenant ?? null;
  }

  async getSubscriberStatus(tenantId: number, customerId: string): Promise<SubscriberStatus | null> {
    const [row] = await this.db.query<{ status: SubscriberStatus }>(
      'SELECT status FROM subscribers WHERE tenant_id = $1 AND processor_customer_id = $2',
      [tenantId, customerId],
    );
    return row?.status ?? null;
  }

  async getStripeSigningSecrets(
    slug: string,
  ): Promise<{ tenantId: number; livemode: boolean | null; secrets: Credential<string>[] } | null> {
    const rows = await this.db.query<{
      id: number;
      livemode: boolean | null;
      secret: string | null;
      expires_at: Date | null;
    }>(
      `SELECT t.id, t.livemode, c.secret, c.expires_at FROM tenants t
       LEFT JOIN tenant_credentials c ON c.tenant_id = t.id AND c.kind = 'stripe_webhook_secret'
       WHERE t.slug = $1 ORDER BY c.id`,
      [slug],
    );
    const first = rows[0];
    if (!first) return null;
    return {
      tenantId: first.id,
      livemode: first.livemode,
      secrets: rows
        .filter((r) => r.secret !== null)
        .map((r) =>
          credential(
            this.secrets.open(r.secret ?? '', { tenantId: first.id, kind: 'stripe_webhook_secret' }),
            r.expires_at,
          ),
        ),
    };
  }

  async countTenants(): Promise<number> {
    const [row] = await this.db.query<{ n: number }>('SELECT count(*)::int AS n FROM tenants');
    return row?.n ?? 0;
  }

  async createTenant(t: NewTenant, now: Date): Promise<CreateTenantResult> {
    try {
      const result = await this.db.transaction(async (tx) => {
        const [tier] = await tx.query('SELECT 1 FROM tiers WHERE name = $1', [t.tier]);
        if (!tier) return { ok: false, error: 'unknown_tier' } as const;
        const [row] = await tx.query<{ id: number }>(
          `INSERT INTO tenants (slug, tier, card_update_url, hmac_required, allowed_origins, lookups_per_minute, branding, created_at, updated_at,
             policy_enforcement, policy_grace_days, policy_escalate_after_days, livemode)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8, $9, $10, $11, $12) ON CONFLICT (slug) DO NOTHING RETURNING id`,
          [
            t.slug,
            t.tier,
            t.cardUpdateUrl,
            t.hmacRequired,
            JSON.stringify(t.allowedOrigins),
            t.lookupsPerMinute ?? null,
            JSON.stringify(t.branding ?? {}),
            now,
            (t.policy ?? DEFAULT_POLICY).enforcement,
            (t.policy ?? DEFAULT_POLICY).grace_days,
            (t.policy ?? DEFAULT_POLICY).escalate_after_days,
            t.livemode ?? null,
          ],
        );
        if (!row) return { ok: false, error: 'exists' } as const;
        await tx.query(
          `INSERT INTO tenant_credentials (tenant_id, kind, key_hash, secret, created_at) VALUES
           ($1, 'publishable_key', $2, NULL, $4), ($1, 'hmac_secret', NULL, $3, $4)`,
          [
            row.id,
            t.publishableKeyHash,
            this.secrets.seal(t.hmacSecret, { tenantId: row.id, kind: 'hmac_secret' }),
            now,
          ],
        );
        return { ok: true, tenant: await tenantById(tx, row.id) } as const;
      });
      if (result.ok) this.emit();
      return result;
    } catch (err) {
      // Two creations of one slug racing: the loser's insert waits, then violates the key.
      if (isUniqueViolation(err)) return { ok: false, error: 'exists' };
      throw err;
    }
  }

  async listTenants(): Promise<TenantRecord[]> {
    const rows = await this.db.query<TenantRow>(`${TENANT_SELECT} ORDER BY t.slug`);
    return rows.map(toTenant);
  }

  async getTenant(slug: string): Promise<TenantRecord | null> {
    const [row] = await this.db.query<TenantRow>(`${TENANT_SELECT} WHERE t.slug = $1`, [slug]);
    return row ? toTenant(row) : null;
  }

  async updateTenant(
    slug: string,
    patch: Partial<TenantSettings>,
    now: Date,
    rotation?: CredentialRotation,
  ): Promise<UpdateTenantResult> {
    const result = await this.db.transaction(async (tx) => {
      if (patch.tier !== undefined) {
        const [tier] = await tx.query('SELECT 1 FROM tiers WHERE name = $1', [patch.tier]);
        if (!tier) return { ok: false, error: 'unknown_tier' } as const;
      }
      // Each column is set only when its field is in the patch; $7 says which are.
      const [row] = await tx.query<{ id: number }>(
        `UPDATE tenants SET
           tier = CASE WHEN 'tier' = ANY($7::text[]) THEN $2 ELSE tier END,
           card_update_url = CASE WHEN 'card_update_url' = ANY($7::text[]) THEN $3 ELSE card_update_url END,
           hmac_required = CASE WHEN 'hmac_required' = ANY($7::text[]) THEN $4 ELSE hmac_required END,
           suspended = CASE WHEN 'suspended' = ANY($7::text[]) THEN $5 ELSE suspended END,
           allowed_origins = CASE WHEN 'allowed_origins' = ANY($7::text[]) THEN $6::jsonb ELSE allowed_origins END,
           lookups_per_minute = CASE WHEN 'lookups_per_minute' = ANY($7::text[]) THEN $9::integer ELSE lookups_per_minute END,
           branding = CASE WHEN 'branding' = ANY($7::text[]) THEN $10::jsonb ELSE branding END,
           livemode = CASE WHEN 'livemode' = ANY($7::text[]) THEN $11::boolean ELSE livemode END,
           updated_at = $8
         WHERE slug = $1 RETURNING id`,
        [
          slug,
          patch.tier ?? null,
          patch.cardUpdateUrl ?? null,
          patch.hmacRequired ?? null,
          patch.suspended ?? null,
          patch.allowedOrigins === undefined ? null : JSON.stringify(patch.allowedOrigins),
          [
            ...(patch.tier !== undefined ? ['tier'] : []),
            ...(patch.cardUpdateUrl !== undefined ? ['card_update_url'] : []),
            ...(patch.hmacRequired !== undefined ? ['hmac_required'] : []),
            ...(patch.suspended !== undefined ? ['suspended'] : []),
            ...(patch.allowedOrigins !== undefined ? ['allowed_origins'] : []),
            ...(patch.lookupsPerMinute !== undefined ? ['lookups_per_minute'] : []),
            ...(patch.branding !== undefined ? ['branding'] : []),
            ...(patch.livemode !== undefined ? ['livemode'] : []),
          ],
          now,
          patch.lookupsPerMinute ?? null,
          patch.branding === undefined ? null : JSON.stringify(patch.branding),
          patch.livemode ?? null,
        ],
      );
      if (!row) return { ok: false, error: 'not_found' } as const;
      if (patch.policy !== undefined) await this.changePolicy(tx, row.id, patch.policy, now);
      if (rotation) await rotateIn(tx, row.id, rotation, now, this.secrets);
      return { ok: true, tenant: await tenantById(tx, row.id) } as const;
    });
    if (result.ok) this.emit();
    return result;
  }

  /**
   * A new policy, and when it differs, a sweep that answers each of the tenant's subscribers
   * again under it (`sweepPolicy`): batched, so that no transaction holds the tenant while a
   * million subscribers are seen. A change during a sweep starts it over.
   */
  private async changePolicy(tx: Queryable, tenantId: number, patch: Partial<Policy>, now: Date): Promise<void> {
    // The tenant's row is locked by the update before this: two changes at once merge in turn.
    const current = await tenantPolicy(tx, tenantId);
    const policy: Policy = { ...current, ...patch };
    if (
      current.enforcement === policy.enforcement &&
      current.grace_days === policy.grace_days &&
      current.escalate_after_days === policy.escalate_after_days
    )
      return;
    await tx.query(
      'UPDATE tenants SET policy_enforcement = $2, policy_grace_days = $3, policy_escalate_after_days = $4 WHERE id = $1',
      [tenantId, policy.enforcement, policy.grace_days, policy.escalate_after_days],
    );
    await tx.query(
      `INSERT INTO policy_sweeps (tenant_id, after, started_at) VALUES ($1, '', $2)
       ON CONFLICT (tenant_id) DO UPDATE SET after = '', started_at = EXCLUDED.started_at`,
      [tenantId, now],
    );
  }

  async recordDueLockouts(notAfter: Date | null, limit: number): Promise<number> {
    // Due by the database's clock, never by this instance's alone: a given time only holds
    // the record back (LEAST ignores a null), it can never bring it forward.
    const due = await this.db.query<{ tenant_id: number; processor_customer_id: string }>(
      'SELECT tenant_id, processor_customer_id FROM subscribers WHERE lockout_at <= LEAST($1::timestamptz, now()) ORDER BY lockout_at LIMIT $2',
      [notAfter, limit],
    );
    let recorded = 0;
    // One short transaction per customer, under its lock: a racing instance that took the
    // same customer finds the lockout written and records nothing more.
    for (const row of due) {
      const done = await this.db.transaction(async (tx) =>
        recordDueLockout(tx, row.tenant_id, row.processor_customer_id, await databaseNow(tx, notAfter)),
      );
      if (done) recorded += 1;
    }
    if (recorded > 0) this.emit();
    return recorded;
  }

  async sweepPolicy(notAfter: Date | null, batch: number): Promise<{ seen: number; pending: boolean }> {
    const result = await this.db.transaction(async (tx) => {
      // Answered again as of the database's time: a fast instance cannot record a lockout early.
      const now = await databaseNow(tx, notAfter);
      // The sweep's row is held for this batch only: another instance takes the next one.
      const [sweep] = await tx.query<{ tenant_id: number; after: string; started_at: Date }>(
        'SELECT tenant_id, after, started_at FROM policy_sweeps ORDER BY started_at, tenant_id LIMIT 1 FOR UPDATE SKIP LOCKED',
      );
      // None, or each held by another instance for its batch: nothing for this one to do now.
      if (!sweep) return { seen: 0, pending: false };
      const policy = await tenantPolicy(tx, sweep.tenant_id);
      // Only a subscriber derived or answered other than active can be answered differently.
      const customers = await tx.query<{ processor_customer_id: string }>(
        `SELECT processor_customer_id FROM subscribers
         WHERE tenant_id = $1 AND processor_customer_id > $2 AND (derived_status <> 'active' OR status <> 'active')
         ORDER BY processor_customer_id LIMIT $3`,
        [sweep.tenant_id, sweep.after, batch],
      );
      const cause: ChangeCause = {
        source: 'policy',
        eventId: null,
        eventType: null,
        declineCode: null,
        occurredAt: new Date(sweep.started_at),
        policyRule: 'policy_changed',
      };
      // Locked in code-unit order, the order every other taker of several customers' locks uses
      // (a dry run): the database's collation may order them otherwise.
      const ids = customers.map((c) => c.processor_customer_id).sort();
      for (const id of ids) await reanswerCustomer(tx, sweep.tenant_id, id, cause, now, policy);
      const last = customers.at(-1);
      const done = customers.length < batch || last === undefined;
      if (done) await tx.query('DELETE FROM policy_sweeps WHERE tenant_id = $1', [sweep.tenant_id]);
      else
        await tx.query('UPDATE policy_sweeps SET after = $2 WHERE tenant_id = $1', [
          sweep.tenant_id,
          last.processor_customer_id,
        ]);
      // Another tenant's sweep may wait: the caller asks again, and finds none when all are done.
      return { seen: customers.length, pending: true };
    });
    if (result.seen > 0) this.emit();
    return result;
  }

  async rotateCredential(
    tenantId: number,
    kind: CredentialKind,
    material: string,
    overlapS: number,
    now: Date,
  ): Promise<void> {
    await this.db.transaction((tx) => rotateIn(tx, tenantId, { kind, material, overlapS }, now, this.secrets));
    this.emit();
  }

  async applyChange(
    tenantId: number,
    customerId: string,
    change: Change,
    cause: ChangeCause,
    now: Date,
  ): Promise<ApplyOutcome> {
    const outcome = await this.db.transaction((tx) => applyAdminChange(tx, tenantId, customerId, change, cause, now));
    if (outcome === 'applied') this.emit();
    return outcome;
  }

  async recordStripeEvent(tenantId: number, input: StripeEventInput, now: Date): Promise<StripeEventResult> {
    const result = await this.db.transaction((tx) => recordIn(tx, tenantId, input, now));
    if (result.customerId !== null && !sameStatus(result.before, result.after)) this.emit();
    return result;
  }

  async recordStripeEvents(
    tenantId: number,
    inputs: readonly StripeEventInput[],
    now: Date,
    options: { dryRun?: boolean } = {},
  ): Promise<StripeEventResult[]> {
    if (options.dryRun !== true) {
      const results: StripeEventResult[] = [];
      for (const input of inputs) results.push(await this.recordStripeEvent(tenantId, input, now));
      return results;
    }
    try {
      await this.db.transaction(async (tx) => {
        // One transaction holds every customer of the batch: their locks are taken up front,
        // in one order, so that two dry runs naming the same customers cannot deadlock.
        const customers = [
          ...new Set(inputs.flatMap((i) => (i.derivation.customerId === null ? [] : [i.derivation.customerId]))),
        ].sort();
        for (const customerId of customers) await lockCustomer(tx, tenantId, customerId);
        const results: StripeEventResult[] = [];
        for (const input of inputs) results.push(await recordIn(tx, tenantId, input, now));
        throw new DryRun(results);
      });
    } catch (err) {
      if (err instanceof DryRun) return err.results;
      throw err;
    }
    throw new Error('a dry run must roll back');
  }

  async getSubscriber(tenantId: number, customerId: string): Promise<SubscriberRecord | null> {
    const [row] = await this.db.query<{
      status: SubscriberStatus;
      derived_status: SubscriberStatus;
      lockout_at: Date | null;
      pay_url: string | null;
      reason: string;
      overridden_at: Date | null;
      updated_at: Date;
    }>(
      `SELECT status, derived_status, lockout_at, pay_url, reason, overridden_at, updated_at FROM subscribers
       WHERE tenant_id = $1 AND processor_customer_id = $2`,
      [tenantId, customerId],
    );
    const history = await this.db.query<HistoryRow>(
      `SELECT * FROM (
         SELECT id, status, derived_status, lockout_at, policy_rule, secret_key_id, admin_action, reason, effect, episode, source, event_id, event_type, decline_code,
           occurred_at, recorded_at
         FROM subscriber_history WHERE tenant_id = $1 AND processor_customer_id = $2
         ORDER BY id DESC LIMIT ${HISTORY_LIMIT}
       ) newest ORDER BY id`,
      [tenantId, customerId],
    );
    // The history outlives the record: a cleared or deleted customer is still shown.
    if (!row && history.length === 0) return null;
    const episodes = await this.db.query<EpisodeRow>(
      `SELECT e.episode, e.state, e.reason, e.decline_code, e.at, e.event_id, e.dunning_started_at, e.resolved_at, e.invoice_id,
         i.status AS invoice_status, i.amount_due, i.amount_remaining, i.currency, i.hosted_invoice_url
       FROM subscriber_episodes e LEFT JOIN stripe_invoices i ON i.tenant_id = e.tenant_id AND i.invoice_id = e.invoice_id
       WHERE e.tenant_id = $1 AND e.processor_customer_id = $2 ORDER BY e.at DESC, e.episode`,
      [tenantId, customerId],
    );
    return {
      processorCustomerId: customerId,
      status: row?.status ?? null,
      derivedStatus: row?.derived_status ?? null,
      lockoutAt: row?.lockout_at ? new Date(row.lockout_at) : null,
      payUrl: row?.pay_url ?? null,
      reason: row?.reason ?? null,
      overriddenAt: row?.overridden_at ? new Date(row.overridden_at) : null,
      updatedAt: row ? new Date(row.updated_at) : null,
      episodes: episodes.map(toEpisodeRecord),
      history: history.map(toHistory),
    };
  }

  async listSubscribers(
    tenantId: number,
    query: SubscriberListQuery,
  ): Promise<{ rows: SubscriberListRow[]; more: boolean }> {
    const where = ['tenant_id = $1'];
    const params: unknown[] = [tenantId];
    const add = (clause: (n: string) => string, value: unknown) => {
      params.push(value);
      where.push(clause(`$${params.length}`));
    };
    if (query.status !== undefined) add((n) => `status = ANY(${n}::text[])`, query.status);
    if (query.derivedStatus !== undefined) add((n) => `derived_status = ANY(${n}::text[])`, query.derivedStatus);
    if (query.reason !== undefined) add((n) => `reason = ${n}`, query.reason);
    if (query.updatedSince !== undefined) add((n) => `updated_at >= ${n}`, query.updatedSince);
    if (query.after !== undefined) add((n) => `processor_customer_id > ${n}`, query.after);
    params.push(query.limit + 1);
    // The primary key (tenant_id, processor_customer_id) serves the order and the cursor.
    const rows = await this.db.query<{
      processor_customer_id: string;
      status: SubscriberStatus;
      derived_status: SubscriberStatus;
      reason: string;
      updated_at: Date;
    }>(
      `SELECT processor_customer_id, status, derived_status, reason, updated_at FROM subscribers WHERE ${where.join(' AND ')}
       ORDER BY processor_customer_id LIMIT $${params.length}`,
      params,
    );
    const page = rows.slice(0, query.limit).map((r) => ({
      processorCustomerId: r.processor_customer_id,
      status: r.status,
      derivedStatus: r.derived_status,
      reason: r.reason,
      updatedAt: new Date(r.updated_at),
    }));
    return { rows: page, more: rows.length > query.limit };
  }

  async countSubscribers(
    tenantId: number,
  ): Promise<{ answered: Record<SubscriberStatus, number>; derived: Record<SubscriberStatus, number> }> {
    const rows = await this.db.query<{ status: SubscriberStatus; derived_status: SubscriberStatus; n: number }>(
      'SELECT status, derived_status, count(*)::integer AS n FROM subscribers WHERE tenant_id = $1 GROUP BY status, derived_status',
      [tenantId],
    );
    const answered = zeroStatusCounts();
    const derived = zeroStatusCounts();
    for (const r of rows) {
      answered[r.status] += Number(r.n);
      derived[r.derived_status] += Number(r.n);
    }
    return { answered, derived };
  }

  async listCredentials(tenantId: number, now: Date): Promise<CredentialSummary[]> {
    const rows = await this.db.query<{ kind: CredentialKind; created_at: Date; expires_at: Date | null }>(
      `SELECT kind, created_at, expires_at FROM tenant_credentials
       WHERE tenant_id = $1 AND kind <> 'webhook_signing_secret' AND (expires_at IS NULL OR expires_at > $2) ORDER BY kind, created_at`,
      [tenantId, now],
    );
    return rows.map((r) => ({
      kind: r.kind,
      createdAt: new Date(r.created_at),
      expiresAt: r.expires_at === null ? null : new Date(r.expires_at),
    }));
  }

  credentialChanges(tenantId: number, kind: CredentialKind, limit: number): Promise<CredentialChange[]> {
    return credentialChanges(this.db, tenantId, kind, limit);
  }

  async createSecretKey(tenantId: number, key: NewSecretKey, now: Date): Promise<SecretKeyRecord | 'limit'> {
    const created = await createSecretKey(this.db, tenantId, key, now);
    if (created !== 'limit') this.emit();
    return created;
  }

  listSecretKeys(tenantId: number): Promise<SecretKeyRecord[]> {
    return listSecretKeys(this.db, tenantId);
  }

  getSecretKey(tenantId: number, id: string): Promise<SecretKeyRecord | null> {
    return getSecretKey(this.db, tenantId, id);
  }

  async revokeSecretKey(tenantId: number, id: string): Promise<boolean> {
    const gone = await revokeSecretKey(this.db, tenantId, id);
    if (gone) this.emit();
    return gone;
  }

  async rotateSecretKey(
    tenantId: number,
    id: string,
    next: { digest: Buffer; prefix: string },
    overlapS: number,
    now: Date,
  ): Promise<SecretKeyRecord | null> {
    const rotated = await rotateSecretKey(this.db, tenantId, id, next, overlapS, now);
    if (rotated !== null) this.emit();
    return rotated;
  }

  touchSecretKeys(uses: ReadonlyMap<string, Date>): Promise<void> {
    return touchSecretKeys(this.db, uses);
  }

  markSecretKeysSeenInBrowser(seen: ReadonlyMap<string, Date>): Promise<void> {
    return markSecretKeysSeenInBrowser(this.db, seen);
  }

  async deleteTenant(tenantId: number): Promise<boolean> {
    const rows = await this.db.query<{ id: number }>('DELETE FROM tenants WHERE id = $1 RETURNING id', [tenantId]);
    if (rows.length > 0) this.emit();
    return rows.length > 0;
  }

  async deleteTier(name: string): Promise<DeleteTierResult> {
    return this.db.transaction(async (tx) => {
      const [tier] = await tx.query<{ name: string }>('SELECT name FROM tiers WHERE name = $1 FOR UPDATE', [name]);
      if (!tier) return 'not_found';
      const [used] = await tx.query<{ n: number }>('SELECT count(*)::integer AS n FROM tenants WHERE tier = $1', [
        name,
      ]);
      if (Number(used?.n ?? 0) > 0) return 'in_use';
      await tx.query('DELETE FROM tiers WHERE name = $1', [name]);
      return 'deleted';
    });
  }

  async pruneOld(table: RetainedTable, before: Date, batch: number): Promise<number> {
    return this.db.transaction(async (tx) => {
      // One instance prunes a table at a time; the others find the lock taken and stop.
      if (!(await tryDeploymentLock(tx, RETENTION_LOCK_KEYS[table]))) return 0;
      const deleted = await tx.query<{ n: number }>(PRUNE_SQL[table], [before, batch]);
      return deleted.length;
    });
  }

  async listTiers(): Promise<TierRecord[]> {
    const rows = await this.db.query<TierRow>(
      'SELECT name, entitlements, created_at, updated_at FROM tiers ORDER BY name',
    );
    return rows.map(toTier);
  }

  async putTier(name: string, entitlements: Entitlements, now: Date): Promise<TierRecord> {
    const [row] = await this.db.query<TierRow>(
      `INSERT INTO tiers (name, entitlements, created_at, updated_at) VALUES ($1, $2, $3, $3)
       ON CONFLICT (name) DO UPDATE SET entitlements = EXCLUDED.entitlements, updated_at = EXCLUDED.updated_at
       RETURNING name, entitlements, created_at, updated_at`,
      [name, JSON.stringify(entitlements), now],
    );
    if (!row) throw new Error('tier upsert returned no row');
    this.emit();
    return toTier(row);
  }

  createConsoleSession(session: NewConsoleSession): Promise<void> {
    return createConsoleSession(this.db, session);
  }

  findConsoleSession(digest: Buffer, now: Date): Promise<ConsoleSessionRecord | null> {
    return findConsoleSession(this.db, digest, now);
  }

  deleteConsoleSession(digest: Buffer): Promise<boolean> {
    return deleteConsoleSession(this.db, digest);
  }

  async recoveryAnalytics(tenantId: number, query: AnalyticsQuery): Promise<RecoveryAnalytics> {
    return recoveryAnalytics(this.db, tenantId, query);
  }

  async policyImpact(tenantId: number, proposed: Partial<Policy>, now: Date): Promise<PolicyImpact> {
    return policyImpact(this.db, tenantId, await tenantPolicy(this.db, tenantId), proposed, now);
  }

  async addStripeIntake(counts: readonly StripeIntakeCount[]): Promise<void> {
    await addStripeIntake(this.db, counts);
  }

  async stripeIntake(tenantId: number, since: Date): Promise<StripeIntakeSummary> {
    return readStripeIntake(this.db, tenantId, since);
  }

  async ping(): Promise<void> {
    await this.db.query('SELECT 1');
  }

  async databaseTime(): Promise<Date> {
    const [row] = await this.db.query<{ now: Date }>('SELECT clock_timestamp() AS now');
    if (!row) throw new Error('the database did not tell its time');
    return new Date(row.now);
  }

  async close(): Promise<void> {
    await this.db.close();
  }
}
