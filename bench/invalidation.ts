/**
 * The invalidation delay across two instances on one PostgreSQL database: a status changed
 * through instance A's admin API, and instance B's lookup polled in a tight loop (one
 * keep-alive connection) until it answers the new status. The delay runs from A's PUT
 * answer (the change has committed) to B's first answer with the new status.
 */
import { Agent } from 'node:http';
import type { SubscriberStatus } from '../src/domain/types.js';
import type { BenchRequest } from './data.js';
import { call } from './http.js';
import type { Answer } from './http.js';

export const TRIAL_CAP_MS = 5_000;
const ROTATION: readonly SubscriberStatus[] = ['active', 'lockout', 'warning'];

function statusOf(answer: Answer): SubscriberStatus | null {
  if (answer.status !== 200) return null;
  try {
    return (JSON.parse(answer.body) as { status: SubscriberStatus }).status;
  } catch {
    return null;
  }
}

export interface InvalidationResult {
  trials: number;
  /** B's keep-alive connections polled: 2 per worker, so that every worker is asked. */
  connections: number;
  timeouts: number;
  /** Per trial that saw the change: until every connection of B answered it, in ms. */
  delaysMs: number[];
  p50Ms: number | null;
  p99Ms: number | null;
  maxMs: number | null;
  /** Per trial: until the first connection of B answered it, in ms. */
  firstDelaysMs: number[];
  /** Lookups B answered during the trials, polls included. */
  polls: number;
  errors: string[];
}

/** Nearest-rank percentile of sorted values. */
export function percentile(sorted: readonly number[], p: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? null;
}

export async function measureInvalidation(opts: {
  a: string;
  b: string;
  adminToken: string;
  subjects: readonly BenchRequest[];
  slugOf: (tenant: number) => string;
  trials: number;
  /** B's connections: 2 per worker of B (1 without workers). */
  connections: number;
  log: (line: string) => void;
}): Promise<InvalidationResult> {
  const a = new URL(opts.a);
  const b = new URL(opts.b);
  const agentA = new Agent({ keepAlive: true, maxSockets: 1 });
  // A keep-alive connection stays with the worker it was dealt to: one agent per connection.
  const agentsB = Array.from({ length: opts.connections }, () => new Agent({ keepAlive: true, maxSockets: 1 }));
  const admin = { authorization: `Bearer ${opts.adminToken}` };
  const delays: number[] = [];
  const firstDelays: number[] = [];
  const errors: string[] = [];
  const restore: { subject: BenchRequest; status: SubscriberStatus }[] = [];
  let timeouts = 0;
  let polls = 0;
  try {
    for (let i = 0; i < opts.trials; i += 1) {
      const subject = opts.subjects[i % opts.subjects.length];
      if (!subject) break;
      const lookup = { authorization: subject.authorization };
      // Every connection of B answers (and caches) the current status first: the trial is
      // about every worker of B letting go of it.
      const answers: (SubscriberStatus | null)[] = [];
      for (const agent of agentsB) answers.push(statusOf(await call(agent, b, 'GET', subject.path, lookup)));
      const before = answers[0] ?? null;
      if (before === null || answers.some((s) => s !== before)) {
        errors.push(`trial ${i}: B's answers before the change were ${answers.join(', ')}`);
        continue;
      }
      if (i < opts.subjects.length) restore.push({ subject, status: before });
      let next = ROTATION[i % ROTATION.length] ?? 'active';
      if (next === before) next = ROTATION[(i + 1) % ROTATION.length] ?? 'lockout';

      const adminPath = `/admin/v1/tenants/${opts.slugOf(subject.tenant)}/subscribers/${subject.customerId}`;
      const put = await call(agentA, a, 'PUT', adminPath, admin, JSON.stringify({ status: next }));
      const committed = performance.now();
      if (put.status !== 200) {
        errors.push(`trial ${i}: PUT on A answered ${put.status} ${put.body.slice(0, 200)}`);
        continue;
      }
      // Each connection is polled in turn until it answers the new status; the trial ends when all have.
      const pending = new Set(agentsB);
      let first: number | null = null;
      while (pending.size > 0 && performance.now() - committed < TRIAL_CAP_MS) {
        for (const agent of [...pending]) {
          const answer = await call(agent, b, 'GET', subject.path, lookup);
          polls += 1;
          if (statusOf(answer) === next) {
            first ??= performance.now() - committed;
            pending.delete(agent);
          }
        }
      }
      if (first !== null) firstDelays.push(first);
      if (pending.size === 0) delays.push(performance.now() - committed);
      else timeouts += 1;
      if ((i + 1) % 25 === 0) opts.log(`invalidation: ${i + 1}/${opts.trials} trials, ${timeouts} timeouts`);
    }
    // Put the statuses back, so that a kept database answers as seeded next time.
    for (const { subject, status } of restore) {
      await call(
        agentA,
        a,
        'PUT',
        `/admin/v1/tenants/${opts.slugOf(subject.tenant)}/subscribers/${subject.customerId}`,
        admin,
        JSON.stringify({ status }),
      );
    }
  } finally {
    agentA.destroy();
    for (const agent of agentsB) agent.destroy();
  }
  const sorted = [...delays].sort((x, y) => x - y);
  return {
    trials: opts.trials,
    connections: agentsB.length,
    timeouts,
    delaysMs: delays,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    maxMs: sorted.at(-1) ?? null,
    firstDelaysMs: firstDelays,
    polls,
    errors,
  };
}
