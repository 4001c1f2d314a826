/**
 * The status feed's delay across two instances on one PostgreSQL database: a long poll
 * (`GET /v1/status-changes?wait=30`) held at instance B, a status changed through instance
 * A's admin API, and the time until B's long poll answers with that change. The delay runs
 * from the moment the PUT is sent to A (its commit is inside it) to B's answer: the change
 * log's NOTIFY, B's read model catching up, the wait woken, the feed read and answered. B is
 * a second service on the same database, asked with each tenant's secret key.
 */
import { Agent } from 'node:http';
import type { SubscriberStatus } from '../src/domain/types.js';
import type { BenchRequest } from './data.js';
import { call } from './http.js';
import { percentile } from './invalidation.js';

/** Time for B to park the long poll before A writes: the row measures the wake-up, not the first read. */
const PARK_MS = 50;
const ROTATION: readonly SubscriberStatus[] = ['active', 'lockout', 'warning'];

export interface FeedResult {
  trials: number;
  timeouts: number;
  /** Per trial that saw the change: from the PUT sent to A to B's long poll answering it, in ms. */
  delaysMs: number[];
  p50Ms: number | null;
  p99Ms: number | null;
  maxMs: number | null;
  /** The same, from A's answer to the PUT (after A's own read model applied it): may be negative. */
  afterAnswerMs: number[];
  errors: string[];
}

interface Page {
  data: { processor_customer_id: string; status: string }[];
  next: string;
}

export async function measureFeed(opts: {
  a: string;
  b: string;
  adminToken: string;
  subjects: readonly BenchRequest[];
  slugOf: (tenant: number) => string;
  trials: number;
  log: (line: string) => void;
}): Promise<FeedResult> {
  const a = new URL(opts.a);
  const b = new URL(opts.b);
  const agentA = new Agent({ keepAlive: true, maxSockets: 1 });
  const agentB = new Agent({ keepAlive: true, maxSockets: 1 });
  const admin = { authorization: `Bearer ${opts.adminToken}` };
  const cursors = new Map<string, string>();
  /** Each tenant's secret key (status:read), made through A's admin API when first needed: B checks it as a tenant's server sends it. */
  const keys = new Map<string, string>();
  const statuses = new Map<string, SubscriberStatus>();
  const restore: { slug: string; customerId: string; status: SubscriberStatus }[] = [];
  const delays: number[] = [];
  const afterAnswer: number[] = [];
  const errors: string[] = [];
  let timeouts = 0;
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  try {
    for (let i = 0; i < opts.trials; i += 1) {
      const subject = opts.subjects[i % opts.subjects.length];
      if (!subject) break;
      const slug = opts.slugOf(subject.tenant);
      let secret = keys.get(slug);
      if (secret === undefined) {
        const created = await call(
          agentA,
          a,
          'POST',
          `/admin/v1/tenants/${slug}/keys`,
          admin,
          JSON.stringify({ name: 'bench feed', scopes: ['status:read'] }),
        );
        if (created.status !== 201) {
          errors.push(`trial ${i}: POST keys on A answered ${created.status} ${created.body.slice(0, 200)}`);
          continue;
        }
        secret = (JSON.parse(created.body) as { secret_key: string }).secret_key;
        keys.set(slug, secret);
        // A new key reaches B with the change log, like any change: wait for it (at most 5 s)
        // before measuring, so that no trial is a 401 of a key B has not heard of yet.
        for (let waited = 0; waited < 5_000; waited += 20) {
          const seen = await call(agentB, b, 'GET', '/v1/statuses?limit=1', { authorization: `Bearer ${secret}` });
          if (seen.status !== 401) break;
          await sleep(20);
        }
      }
      const feed = { authorization: `Bearer ${secret}` };
      let cursor = cursors.get(slug);
      if (cursor === undefined) {
        const list = await call(agentB, b, 'GET', '/v1/statuses?limit=1', feed);
        if (list.status !== 200) {
          errors.push(`trial ${i}: GET /v1/statuses on B answered ${list.status} ${list.body.slice(0, 200)}`);
          continue;
        }
        cursor = (JSON.parse(list.body) as { feed_cursor: string }).feed_cursor;
      }
      const key = `${slug}/${subject.customerId}`;
      const before = statuses.get(key) ?? (JSON.parse(subject.expected) as { status: SubscriberStatus }).status;
      if (!statuses.has(key)) restore.push({ slug, customerId: subject.customerId, status: before });
      let next = ROTATION[i % ROTATION.length] ?? 'active';
      if (next === before) next = ROTATION[(i + 1) % ROTATION.length] ?? 'lockout';

      const poll = call(agentB, b, 'GET', `/v1/status-changes?after=${cursor}&wait=30`, feed).catch((err: unknown) => ({
        status: 0,
        body: (err as Error).message,
      }));
      await sleep(PARK_MS);
      const sent = performance.now();
      const put = await call(
        agentA,
        a,
        'PUT',
        `/admin/v1/tenants/${slug}/subscribers/${subject.customerId}`,
        admin,
        JSON.stringify({ status: next }),
      );
      const answered = performance.now();
      if (put.status !== 200) {
        errors.push(`trial ${i}: PUT on A answered ${put.status} ${put.body.slice(0, 200)}`);
        await poll;
        continue;
      }
      statuses.set(key, next);
      // The long poll answers the change; anything else of the tenant before it is read past.
      let seen: number | null = null;
      let answer = await poll;
      for (let tries = 0; tries < 5 && seen === null; tries += 1) {
        if (answer.status !== 200) {
          errors.push(`trial ${i}: the long poll on B answered ${answer.status} ${answer.body.slice(0, 200)}`);
          break;
        }
        const page = JSON.parse(answer.body) as Page;
        cursor = page.next;
        if (page.data.some((c) => c.processor_customer_id === subject.customerId && c.status === next))
          seen = performance.now();
        else
          answer = await call(agentB, b, 'GET', `/v1/status-changes?after=${cursor}&wait=30`, feed).catch(
            (err: unknown) => ({
              status: 0,
              body: (err as Error).message,
            }),
          );
      }
      cursors.set(slug, cursor);
      if (seen === null) {
        timeouts += 1;
        continue;
      }
      delays.push(seen - sent);
      afterAnswer.push(seen - answered);
      if ((i + 1) % 25 === 0) opts.log(`feed: ${i + 1}/${opts.trials} trials, ${timeouts} timeouts`);
    }
    // Put the statuses back, so that a kept database answers as seeded next time.
    for (const r of restore) {
      await call(
        agentA,
        a,
        'PUT',
        `/admin/v1/tenants/${r.slug}/subscribers/${r.customerId}`,
        admin,
        JSON.stringify({ status: r.status }),
      );
    }
  } finally {
    agentA.destroy();
    agentB.destroy();
  }
  const sorted = [...delays].sort((x, y) => x - y);
  return {
    trials: opts.trials,
    timeouts,
    delaysMs: delays,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    maxMs: sorted.at(-1) ?? null,
    afterAnswerMs: afterAnswer,
    errors,
  };
}
