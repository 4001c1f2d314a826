import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Change } from '../../src/domain/stripe/fold.js';
import type { SubscriberStatus } from '../../src/domain/types.js';
import { ReadModel } from '../../src/readmodel/index.js';
import { openReadStore, openStore } from '../../src/store/index.js';
import type { ChangeCause, Store } from '../../src/store/index.js';
import { availableEngines, pgClients } from '../helpers/engines.js';
import { privatePostgres } from '../helpers/private-postgres.js';
import { newTenant, subscriberStatus } from '../helpers/store-fixtures.js';
import type { PrivatePostgres } from '../helpers/private-postgres.js';

/**
 * The read model across a restart of PostgreSQL and across a paused process. Both need a
 * server the test may restart: a private cluster, never the one other files share.
 */
const engines = await availableEngines();
const TOKEN = 'readmodel-restart-token-0123456789abcdefghij';
const T = new Date('2026-03-01T12:00:00Z');
const at = (s: number) => new Date(T.getTime() + s * 1000);
const admin = (d: Date): ChangeCause => ({
  source: 'admin',
  eventId: null,
  eventType: null,
  declineCode: null,
  occurredAt: d,
});
const STATUSES: SubscriberStatus[] = ['active', 'warning', 'lockout'];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A write retried until the server takes it: the writer is another instance riding out the restart. */
async function persist(write: () => Promise<unknown>): Promise<number> {
  for (let failures = 0; ; failures += 1) {
    try {
      await write();
      return failures;
    } catch (err) {
      if (failures > 200) throw err;
      await sleep(50);
    }
  }
}

describe.skipIf(!engines.some((e) => e.name === 'postgres'))(
  'read model across PostgreSQL restarts and paused processes',
  () => {
    let cluster: PrivatePostgres;
    let writer: Store;

    beforeAll(async () => {
      cluster = await privatePostgres();
      writer = await openStore({
        engine: 'postgres',
        url: cluster.url,
        queryTimeoutMs: 2_000,
        connectTimeoutMs: 1_000,
      });
    }, 120_000);
    afterAll(async () => {
      await writer?.close();
      await cluster?.destroy();
    });

    it(
      'holds every key the database holds after a restart in the middle of a stream of writes',
      { timeout: 120_000 },
      async () => {
        const created = await writer.tenants.createTenant(newTenant('restart'), T);
        if (!created.ok) throw new Error(created.error);
        const id = created.tenant.id;
        const modelStore = await openStore({
          engine: 'postgres',
          url: cluster.url,
          queryTimeoutMs: 2_000,
          connectTimeoutMs: 1_000,
        });
        const model = await ReadModel.open(modelStore.changes, { pollIntervalMs: 500 });
        try {
          const customers = Array.from({ length: 80 }, (_, i) => `cus_r${i}`);
          let failed = 0;
          let restarted: Promise<void> | null = null;
          for (let i = 0; i < 400; i += 1) {
            if (i === 150) restarted = cluster.restart();
            const change: Change =
              i % 13 === 0 ? { kind: 'delete' } : { kind: 'set', status: STATUSES[i % 3] ?? 'active', reason: 'test' };
            failed += await persist(() =>
              writer.subscribers.applyChange(
                id,
                customers[i % customers.length] ?? 'cus_r0',
                change,
                admin(at(i + 1)),
                at(i + 1),
              ),
            );
          }
          await restarted;
          // The restart cut the writer off at least once: the stream did run across it.
          expect(failed).toBeGreaterThan(0);
          await expect.poll(() => model.snapshotStats().listening, { timeout: 20_000 }).toBe(true);
          await model.catchUp();
          for (const customer of customers) {
            expect(model.status(id, customer), customer).toBe(await subscriberStatus(writer.subscribers, id, customer));
          }
          // Resumed from its position: the restart did not cost a reload.
          expect(model.snapshotStats().loads).toBe(1);
        } finally {
          await model.close();
          await modelStore.close();
        }
      },
    );

    it(
      'loads from a lagging replica (DATABASE_READ_URL) and still holds every committed change, even one past the log horizon',
      { timeout: 120_000 },
      async () => {
        const standby = await privatePostgres(cluster);
        const clients = pgClients();
        const client = clients.open;
        const replica = await openReadStore({
          engine: 'postgres',
          url: standby.url,
          queryTimeoutMs: 5_000,
          connectTimeoutMs: 2_000,
        });
        const models: ReadModel[] = [];
        try {
          const created = await writer.tenants.createTenant(newTenant('replicated'), T);
          if (!created.ok) throw new Error(created.error);
          const id = created.tenant.id;
          const primary = await client(cluster.url);
          const onStandby = await client(standby.url);
          const replayed = async () => {
            const [{ lsn }] = (await primary.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn'))
              .rows as [{ lsn: string }];
            await expect
              .poll(
                async () =>
                  (await onStandby.query<{ ok: boolean }>('SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok', [lsn]))
                    .rows[0]?.ok,
                {
                  timeout: 20_000,
                  interval: 50,
                },
              )
              .toBe(true);
          };
          const insert = `INSERT INTO subscribers (tenant_id, processor_customer_id, status, derived_status, reason, status_at, updated_at) VALUES ($1, $2, $3, $3, 'test', now(), now())`;

          // A writer in progress on the primary while the replica, which knows of it, stops replaying...
          const slow = await client(cluster.url);
          await slow.query('BEGIN');
          await slow.query(insert, [id, 'cus_inflight', 'lockout']);
          await writer.subscribers.applyChange(
            id,
            'cus_other',
            { kind: 'set', status: 'warning', reason: 'test' },
            admin(at(1)),
            at(1),
          );
          await replayed();
          await onStandby.query('SELECT pg_wal_replay_pause()');
          // ...commits: the replica's snapshot still has it running, and says nothing of it.
          await slow.query('COMMIT');
          const fromReplica = await ReadModel.open(writer.changes, { loadFrom: replica.changes });
          models.push(fromReplica);
          expect(fromReplica.status(id, 'cus_inflight')).toBe('lockout');
          expect(fromReplica.status(id, 'cus_other')).toBe('warning');

          // The replica further behind than the log keeps: the load falls past the horizon, and
          // the reload reads the primary, once.
          await writer.subscribers.applyChange(
            id,
            'cus_paid',
            { kind: 'set', status: 'lockout', reason: 'test' },
            admin(at(2)),
            at(2),
          );
          await expect
            .poll(() => writer.changes.pruneLookupChanges(0), { timeout: 20_000, interval: 200 })
            .toBeGreaterThan(0);
          const behind = await ReadModel.open(writer.changes, { loadFrom: replica.changes });
          models.push(behind);
          expect(behind.status(id, 'cus_paid')).toBe('lockout');
          for (let i = 0; i < 3; i += 1) await behind.catchUp();
          expect(behind.snapshotStats().loads).toBe(2);
          await onStandby.query('SELECT pg_wal_replay_resume()');
        } finally {
          for (const m of models) await m.close();
          await replica.close();
          await clients.endAll();
          await standby.destroy();
        }
      },
    );

    it(
      'a paused process answers what was written while it slept, reloading when the log was pruned past it',
      { timeout: 120_000 },
      async () => {
        const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'serve', '--workers', '1'], {
          env: {
            ...process.env,
            DATABASE_URL: cluster.url,
            DUNWALL_ADMIN_TOKEN: TOKEN,
            PORT: '0',
            LOG_LEVEL: 'info',
            DUNWALL_RATE_LIMIT_LOOKUP_PER_IP: '0',
            DUNWALL_RATE_LIMIT_LOOKUP_PER_TENANT: '0',
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let out = '';
        child.stdout.on('data', (d: Buffer) => (out += d.toString()));
        child.stderr.on('data', (d: Buffer) => (out += d.toString()));
        try {
          await expect
            .poll(() => /Server listening at (http:\/\/[^"]+)/.exec(out)?.[1], { timeout: 45_000, interval: 100 })
            .toBeTruthy();
          const base = /Server listening at (http:\/\/[^"]+)/.exec(out)?.[1] ?? '';
          const created = await fetch(`${base}/admin/v1/tenants`, {
            method: 'POST',
            headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
            body: JSON.stringify({ slug: 'paused' }),
          });
          expect(created.status).toBe(201);
          const key = ((await created.json()) as { publishable_key: string }).publishable_key;
          const id = (await writer.tenants.getTenant('paused'))?.id ?? 0;
          const lookup = async (customer: string) =>
            (
              (await (
                await fetch(`${base}/api/subscriber-status/paused?processor_customer_id=${customer}`, {
                  headers: { authorization: `Bearer ${key}` },
                })
              ).json()) as { status: string }
            ).status;

          await writer.subscribers.applyChange(
            id,
            'cus_p0',
            { kind: 'set', status: 'lockout', reason: 'test' },
            admin(at(1)),
            at(1),
          );
          await expect.poll(() => lookup('cus_p0'), { timeout: 5_000 }).toBe('lockout');

          child.kill('SIGSTOP');
          const expected = new Map<string, string>();
          for (let i = 0; i < 30; i += 1) {
            const status = STATUSES[i % 3] ?? 'active';
            await writer.subscribers.applyChange(
              id,
              `cus_p${i}`,
              { kind: 'set', status, reason: 'test' },
              admin(at(10 + i)),
              at(10 + i),
            );
            expected.set(`cus_p${i}`, status);
          }
          // As if the process had slept longer than the log is kept.
          expect(await writer.changes.pruneLookupChanges(0)).toBeGreaterThan(0);
          child.kill('SIGCONT');

          for (const [customer, status] of expected)
            await expect.poll(() => lookup(customer), { timeout: 10_000 }).toBe(status);
          const metrics = await (await fetch(`${base}/metrics`)).text();
          expect(metrics).toMatch(/^dunwall_readmodel_loads_total 2$/m);
          expect(out).toContain('the change log was pruned past this process');
        } finally {
          child.kill('SIGCONT');
          child.kill('SIGKILL');
        }
      },
    );
  },
);
