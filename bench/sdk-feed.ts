/**
 * `@dunwall/node` across two instances on one PostgreSQL database (the `sdkfeed` row): a copy
 * in the bench's process follows instance B with a tenant's secret key, a status is changed
 * through instance A's admin API, and the delay runs from the moment the PUT is sent to A to
 * the copy's `status()` answering the new status: the change log's NOTIFY, B's read model,
 * B's long poll woken and answered, the copy applying the page.
 *
 * The copy's requests go through a wrapper that, once an answer of B is in, looks at the copy
 * again right after the copy has applied it (setImmediate): the delay is read without polling
 * the copy in a loop.
 */
import { Agent } from 'node:http';
import type { SubscriberStatus } from '../src/domain/types.js';
import { createDunwallWith } from '../packages/node/src/follower.js';
import type { Dunwall } from '../packages/node/src/types.js';
import type { FeedResult } from './feed.js';
import { call } from './http.js';
import { percentile } from './invalidation.js';

const ROTATION: readonly SubscriberStatus[] = ['active', 'lockout', 'warning'];
const TRIAL_TIMEOUT_MS = 5_000;
const KEY_READY_MS = 10_000;

export async function measureSdkFeed(opts: {
  a: string;
  b: string;
  adminToken: string;
  slug: string;
  /** The tenant's customers to change, with the status each has now. */
  subjects: readonly { customerId: string; status: SubscriberStatus }[];
  trials: number;
  log: (line: string) => void;
}): Promise<FeedResult> {
  const a = new URL(opts.a);
  const agentA = new Agent({ keepAlive: true, maxSockets: 1 });
  const admin = { authorization: `Bearer ${opts.adminToken}` };
  const delays: number[] = [];
  const afterAnswer: number[] = [];
  const errors: string[] = [];
  const statuses = new Map<string, SubscriberStatus>();
  let timeouts = 0;
  let dunwall: Dunwall | null = null;
  /** Looks at the copy after each answer of B: the trial in progress's check. */
  const watch: { onAnswer: (() => void) | null } = { onAnswer: null };
  try {
    dunwall = await copyFollowing({
      a,
      agentA,
      admin,
      b: opts.b,
      slug: opts.slug,
      keyName: 'bench sdk',
      errors,
      watch,
    });
    await dunwall.ready(30_000);
    const copy = dunwall;

    for (let i = 0; i < opts.trials; i += 1) {
      const subject = opts.subjects[i % opts.subjects.length];
      if (!subject) break;
      const before = statuses.get(subject.customerId) ?? subject.status;
      let next = ROTATION[i % ROTATION.length] ?? 'active';
      if (next === before) next = ROTATION[(i + 1) % ROTATION.length] ?? 'lockout';
      if (copy.status(subject.customerId).status !== before) {
        errors.push(
          `trial ${i}: the copy answered ${copy.status(subject.customerId).status} for ${subject.customerId} before the change, not ${before}`,
        );
      }
      const seen: { at: number | null } = { at: null };
      const applied = new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, TRIAL_TIMEOUT_MS);
        watch.onAnswer = () => {
          if (copy.status(subject.customerId).status !== next) return;
          seen.at = performance.now();
          clearTimeout(timer);
          resolve();
        };
      });
      const sent = performance.now();
      const put = await call(
        agentA,
        a,
        'PUT',
        `/admin/v1/tenants/${opts.slug}/subscribers/${subject.customerId}`,
        admin,
        JSON.stringify({ status: next }),
      );
      const answered = performance.now();
      if (put.status !== 200) {
        errors.push(`trial ${i}: PUT on A answered ${put.status} ${put.body.slice(0, 200)}`);
        watch.onAnswer = null;
        continue;
      }
      statuses.set(subject.customerId, next);
      // The copy may have applied it already, while the PUT's answer was on its way.
      watch.onAnswer?.();
      await applied;
      watch.onAnswer = null;
      if (seen.at === null) {
        timeouts += 1;
        continue;
      }
      delays.push(seen.at - sent);
      afterAnswer.push(seen.at - answered);
      if ((i + 1) % 25 === 0) opts.log(`sdkfeed: ${i + 1}/${opts.trials} trials, ${timeouts} timeouts`);
    }
    // Put the statuses back, so that a kept database answers as seeded next time.
    for (const s of opts.subjects) {
      if (statuses.has(s.customerId))
        await call(
          agentA,
          a,
          'PUT',
          `/admin/v1/tenants/${opts.slug}/subscribers/${s.customerId}`,
          admin,
          JSON.stringify({ status: s.status }),
        );
    }
  } finally {
    watch.onAnswer = null;
    await dunwall?.close();
    agentA.destroy();
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

/**
 * A copy in the bench's process following instance B: a `status:read` key made through A's
 * admin API, waited for until B's read model takes it (from the change log), and a copy whose
 * every answer of B calls `watch.onAnswer` once the copy has applied it (setImmediate).
 */
export async function copyFollowing(opts: {
  a: URL;
  agentA: Agent;
  admin: Record<string, string>;
  b: string;
  slug: string;
  keyName: string;
  errors: string[];
  watch: { onAnswer: (() => void) | null };
}): Promise<Dunwall> {
  const created = await call(
    opts.agentA,
    opts.a,
    'POST',
    `/admin/v1/tenants/${opts.slug}/keys`,
    opts.admin,
    JSON.stringify({ name: opts.keyName, scopes: ['status:read'] }),
  );
  if (created.status !== 201)
    throw new Error(`secret key for ${opts.slug}: ${created.status} ${created.body.slice(0, 200)}`);
  const secretKey = (JSON.parse(created.body) as { secret_key: string }).secret_key;
  const deadline = performance.now() + KEY_READY_MS;
  for (;;) {
    const res = await fetch(`${opts.b}/v1/subscribers/cus_bench_probe/status`, {
      headers: { authorization: `Bearer ${secretKey}` },
      signal: AbortSignal.timeout(5_000),
    });
    await res.arrayBuffer();
    if (res.status === 200) break;
    if (performance.now() > deadline)
      throw new Error(`B did not take the new key within ${KEY_READY_MS} ms (${res.status})`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return createDunwallWith(
    { baseUrl: opts.b, secretKey, onError: (err) => opts.errors.push(err.message) },
    {
      fetch: async (input, init) => {
        const res = await fetch(input, init);
        // The copy reads the body and applies the page within this turn's microtasks.
        setImmediate(() => opts.watch.onAnswer?.());
        return res;
      },
    },
  );
}
