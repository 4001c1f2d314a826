import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deriveChange } from '../../src/domain/stripe/derive.js';
import type { StripeEventLike } from '../../src/domain/stripe/derive.js';
import {
  CARD_SAMPLE_SCENARIOS,
  SAMPLE_API_VERSIONS,
  SAMPLE_SCENARIOS,
  sampleEvents,
  sampleIds,
} from '../../src/cli/stripe-samples.js';
import { run } from '../../src/cli/run.js';
import type { App } from '../../src/http/app.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { ADMIN_TOKEN, buildAppWithModel } from '../helpers/harness.js';
import { portOf } from '../helpers/socket.js';

const NOW = 1_790_000_000;
type Obj = Record<string, unknown>;

describe('stripe send-sample events', () => {
  it('gives one customer the same subscription, invoice and payment intent at every run, and another customer others', () => {
    expect(sampleIds('acme', 'cus_1')).toEqual(sampleIds('acme', 'cus_1'));
    expect(sampleIds('acme', 'cus_2').subscription).not.toBe(sampleIds('acme', 'cus_1').subscription);
    expect(sampleIds('acme', 'cus_1')).toMatchObject({
      subscription: expect.stringMatching(/^sub_[A-Za-z0-9]{24}$/),
      invoice: expect.stringMatching(/^in_[A-Za-z0-9]{24}$/),
      paymentIntent: expect.stringMatching(/^pi_/),
    });
    const given = sampleIds('acme', 'cus_1', { subscription: 'sub_given', invoice: 'in_given' });
    expect(given).toMatchObject({ subscription: 'sub_given', invoice: 'in_given' });
  });

  it('are test-mode Stripe events in the shape of their API version, with the fields Stripe documents', () => {
    for (const shape of ['legacy', 'basil'] as const) {
      // The card scenarios are tried in test/cli/notices.test.ts.
      for (const scenario of SAMPLE_SCENARIOS.filter((s) => !CARD_SAMPLE_SCENARIOS.includes(s))) {
        const ids = sampleIds('acme', 'cus_1');
        const events = sampleEvents({ scenario, shape, tenant: 'acme', customer: 'cus_1', ids, nowS: NOW });
        const label = `${shape} ${scenario}`;
        expect(events.length, label).toBeGreaterThan(0);
        expect(events.at(-1)?.created, label).toBe(NOW);
        for (const e of events) {
          expect(e, label).toMatchObject({
            object: 'event',
            api_version: SAMPLE_API_VERSIONS[shape],
            livemode: false,
            id: expect.stringMatching(/^evt_/),
          });
          const object = (e.data as { object: Obj }).object;
          expect(object.livemode, label).toBe(false);
          if (object.object === 'invoice') {
            expect(object, label).toMatchObject({
              id: ids.invoice,
              customer: 'cus_1',
              currency: 'usd',
              amount_due: 2900,
              collection_method: 'charge_automatically',
            });
            expect(object.hosted_invoice_url, label).toMatch(
              /^https:\/\/invoice\.stripe\.com\/i\/acct_[A-Za-z0-9]+\/test_[A-Za-z0-9]+\?s=ap$/,
            );
            expect(typeof object.amount_remaining, label).toBe('number');
            expect(typeof object.attempt_count, label).toBe('number');
            expect(object, label).toHaveProperty('next_payment_attempt');
            if (shape === 'legacy') {
              expect(object, label).toMatchObject({
                subscription: ids.subscription,
                payment_intent: ids.paymentIntent,
              });
              expect(object, label).not.toHaveProperty('parent');
            } else {
              expect(object, label).toMatchObject({
                parent: { subscription_details: { subscription: ids.subscription } },
                payments: { data: [{ payment: { payment_intent: ids.paymentIntent } }] },
              });
              expect(object, label).not.toHaveProperty('subscription');
            }
          }
          if (object.object === 'payment_intent') expect('invoice' in object, label).toBe(shape === 'legacy');
        }
      }
    }
  });

  it("are what Dunwall's derivation reads as the scenario says", () => {
    const ids = sampleIds('acme', 'cus_1');
    const last = (scenario: (typeof SAMPLE_SCENARIOS)[number]) => {
      const events = sampleEvents({ scenario, shape: 'basil', tenant: 'acme', customer: 'cus_1', ids, nowS: NOW });
      return deriveChange(events.at(-1) as unknown as StripeEventLike);
    };
    expect(last('payment_failed')).toMatchObject({
      change: { episode: ids.subscription, outcome: { state: 'warning', reason: 'soft_decline' } },
    });
    expect(last('retries_exhausted')).toMatchObject({
      change: { outcome: { state: 'lockout', reason: 'retries_exhausted' } },
    });
    expect(last('action_required')).toMatchObject({
      change: { outcome: { state: 'warning', reason: 'payment_action_required' } },
    });
    expect(last('paid')).toMatchObject({
      change: { episode: ids.subscription, outcome: { state: 'resolved', reason: 'paid' } },
    });
    expect(last('subscription_deleted')).toMatchObject({
      change: { episode: ids.subscription, outcome: { state: 'resolved', reason: 'subscription_ended' } },
    });
    // The hard decline is the payment intent's, linked to the invoice: the store weighs them together.
    const [decline] = sampleEvents({
      scenario: 'hard_decline',
      shape: 'legacy',
      tenant: 'acme',
      customer: 'cus_1',
      ids,
      nowS: NOW,
    });
    expect(deriveChange(decline as unknown as StripeEventLike)).toMatchObject({
      change: { kind: 'decline', decline: { hard: true, code: 'lost_card', invoiceId: ids.invoice } },
    });
  });
});

/**
 * `send-sample --at` / `--days-ago` against a real Dunwall on loopback, through the command
 * as its users run it: the events are dated in the past (a grace period or an escalation
 * due within the hour), the service takes them, and the command prints what the tenant's
 * policy answers, which the lookup then answers too. No clock is faked: the service and the
 * command share this machine's, and every boundary tried is hours away from a flake.
 */
describe('stripe send-sample in time, against a real service', () => {
  const SECRET = 'whsec_samplesInTime0123456789abcdef';
  const HOUR_MS = 3_600_000;
  const DAY_MS = 24 * HOUR_MS;
  let store: Store;
  let app: App;
  let base = '';
  const keys = new Map<string, string>();

  interface Out {
    code: number;
    stdout: string;
    stderr: string;
  }
  interface Sent {
    dated: string;
    events: { type: string; created: number; http_status: number; outcome: string }[];
    derived: { status: string; reason: string };
    answered: {
      status: string;
      lockout_at: string | null;
      rule: string | null;
      policy: Record<string, unknown>;
    } | null;
    answered_unknown: string | null;
  }

  async function cli(args: string[], options: { stdin?: string; env?: Record<string, string> } = {}): Promise<Out> {
    let stdout = '';
    let stderr = '';
    const code = await run(args, {
      stdout: { write: (chunk: string) => (stdout += chunk) },
      stderr: { write: (chunk: string) => (stderr += chunk) },
      stdin: Readable.from(options.stdin === undefined ? [] : [options.stdin]),
      env: options.env ?? { DUNWALL_URL: base, DUNWALL_ADMIN_TOKEN: ADMIN_TOKEN },
    });
    return { code, stdout, stderr };
  }

  async function tenant(slug: string, ...policy: string[]): Promise<void> {
    const created = await cli(['tenant', 'create', slug, '--json', ...policy]);
    expect(created.stderr).toBe('');
    // The samples are test-mode events: the test mode's key reads what they did.
    keys.set(slug, (JSON.parse(created.stdout) as { test_publishable_key: string }).test_publishable_key);
    // The samples are test-mode events: the test mode's signing secret verifies them.
    expect(
      (await cli(['tenant', 'update', slug, '--stripe-webhook-secret', '-', '--test'], { stdin: SECRET })).code,
    ).toBe(0);
  }

  async function send(
    slug: string,
    scenario: string,
    customer: string,
    extra: string[],
    options: { env?: Record<string, string> } = {},
  ): Promise<Out> {
    return cli(
      [
        'stripe',
        'send-sample',
        scenario,
        '--tenant',
        slug,
        '--customer',
        customer,
        '--secret',
        '-',
        '--test',
        ...extra,
      ],
      { stdin: SECRET, ...options },
    );
  }

  async function sent(slug: string, scenario: string, customer: string, extra: string[]): Promise<Sent> {
    const out = await send(slug, scenario, customer, [...extra, '--json']);
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    return JSON.parse(out.stdout) as Sent;
  }

  async function lookup(slug: string, customer: string): Promise<{ status: string; lockout_at?: string }> {
    const res = await fetch(`${base}/api/subscriber-status/${slug}?processor_customer_id=${customer}`, {
      headers: { authorization: `Bearer ${keys.get(slug) ?? ''}` },
      signal: AbortSignal.timeout(10_000),
    });
    expect(res.status).toBe(200);
    return (await res.json()) as { status: string; lockout_at?: string };
  }

  beforeAll(async () => {
    store = await openStore({ engine: 'embedded', dataDir: null });
    app = await buildAppWithModel({ store, adminToken: ADMIN_TOKEN });
    base = `http://127.0.0.1:${await portOf(app)}`;
    await tenant('graceful', '--grace-days', '7');
    await tenant('escalating', '--escalate-after-days', '3');
  });

  afterAll(async () => {
    await app?.close();
    await store?.close();
  });

  it('dates the events in the past, and prints the warning a grace period answers, with its end, where the events derive a lockout', async () => {
    const before = Date.now();
    const result = await sent('graceful', 'retries_exhausted', 'cus_in_grace', ['--days-ago', '2']);
    const datedMs = Date.parse(result.dated);
    expect(datedMs).toBeGreaterThanOrEqual(Math.floor((before - 2 * DAY_MS) / 1000) * 1000);
    expect(datedMs).toBeLessThanOrEqual(Date.now() - 2 * DAY_MS);
    // Every event is dated then (the decline a second before its invoice event), and taken.
    expect(result.events.map((e) => [e.created, e.http_status])).toEqual([
      [datedMs / 1000 - 1, 200],
      [datedMs / 1000, 200],
    ]);
    expect(result.derived).toEqual({ status: 'lockout', reason: 'retries_exhausted' });
    expect(result.answered).toMatchObject({
      status: 'warning',
      rule: 'grace_ended',
      policy: { enforcement: 'gate', grace_days: 7, escalate_after_days: null, notices: [] },
    });
    // The grace runs from the start of the dunning, two days ago: it ends in five days.
    const endsMs = Date.parse(result.answered?.lockout_at ?? '');
    expect(endsMs - datedMs).toBeGreaterThanOrEqual(7 * DAY_MS - 1000);
    expect(endsMs - datedMs).toBeLessThanOrEqual(7 * DAY_MS);
    // What the lookup answers is what the command printed.
    expect(await lookup('graceful', 'cus_in_grace')).toMatchObject({
      status: 'warning',
      lockout_at: result.answered?.lockout_at,
    });

    const text = await send('graceful', 'retries_exhausted', 'cus_in_grace_text', ['--days-ago', '2']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^derived: +lockout \(retries_exhausted\)$/m);
    expect(text.stdout).toMatch(
      /^answered: +warning, lockout at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(the grace ends\); policy: gate, grace 7 days, no escalation$/m,
    );
    expect(text.stdout).toMatch(/^dated: +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/m);
    expect(text.stdout + text.stderr).not.toContain(SECRET);
  });

  it('shows a grace period ending within the hour (--at), and a grace already over as the lockout', async () => {
    // A dunning that began 7 days less 30 minutes ago: the grace ends in half an hour.
    const at = new Date(Date.now() - 7 * DAY_MS + 30 * 60_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
    const soon = await sent('graceful', 'hard_decline', 'cus_grace_ends_soon', ['--at', at]);
    expect(soon.dated).toBe(at);
    expect(soon.answered).toMatchObject({ status: 'warning', rule: 'grace_ended' });
    const inMs = Date.parse(soon.answered?.lockout_at ?? '') - Date.now();
    expect(inMs).toBeGreaterThan(0);
    expect(inMs).toBeLessThanOrEqual(30 * 60_000);
    expect(await lookup('graceful', 'cus_grace_ends_soon')).toMatchObject({
      status: 'warning',
      lockout_at: soon.answered?.lockout_at,
    });

    // Eight days ago: past the grace, the policy answers the lockout itself.
    const over = await sent('graceful', 'retries_exhausted', 'cus_grace_over', ['--days-ago', '8']);
    expect(over.answered).toEqual({
      status: 'lockout',
      lockout_at: null,
      rule: null,
      policy: { enforcement: 'gate', grace_days: 7, escalate_after_days: null, notices: [] },
    });
    expect((await lookup('graceful', 'cus_grace_over')).status).toBe('lockout');
  });

  it('shows a warning escalating: due in two days, or already a lockout', async () => {
    const due = await sent('escalating', 'payment_failed', 'cus_escalates_later', ['--days-ago', '1']);
    expect(due.derived).toEqual({ status: 'warning', reason: 'soft_decline' });
    expect(due.answered).toMatchObject({ status: 'warning', rule: 'escalated' });
    const dueIn = Date.parse(due.answered?.lockout_at ?? '') - Date.parse(due.dated);
    expect(dueIn).toBeGreaterThanOrEqual(3 * DAY_MS - 1000);
    expect(dueIn).toBeLessThanOrEqual(3 * DAY_MS);
    expect(await lookup('escalating', 'cus_escalates_later')).toMatchObject({
      status: 'warning',
      lockout_at: due.answered?.lockout_at,
    });

    const escalated = await sent('escalating', 'payment_failed', 'cus_escalated', ['--days-ago', '3.5']);
    expect(escalated.derived.status).toBe('warning');
    expect(escalated.answered).toMatchObject({ status: 'lockout', lockout_at: null });
    expect((await lookup('escalating', 'cus_escalated')).status).toBe('lockout');

    // Paid now: the policy answers active again.
    const paid = await sent('escalating', 'paid', 'cus_escalated', []);
    expect(paid.answered?.status).toBe('active');
    expect((await lookup('escalating', 'cus_escalated')).status).toBe('active');
  });

  it('still sends without the admin token, and says why it cannot tell the answer', async () => {
    const out = await send('graceful', 'payment_failed', 'cus_no_token', ['--url', base, '--json'], {
      env: { DUNWALL_DATA_DIR: '/nonexistent-dunwall-data' },
    });
    expect(out.code).toBe(0);
    const result = JSON.parse(out.stdout) as Sent;
    expect(result.events.every((e) => e.http_status === 200)).toBe(true);
    expect(result.answered).toBeNull();
    expect(result.answered_unknown).toMatch(/admin API: no admin token/);
    expect((await lookup('graceful', 'cus_no_token')).status).toBe('warning');
  });

  it('refuses a time it cannot send, before sending anything', async () => {
    const future = new Date(Date.now() + HOUR_MS).toISOString();
    const cases: [string[], RegExp][] = [
      [['--at', '2026-11-20'], /--at must be an RFC 3339 date and time/],
      [['--at', 'yesterday'], /--at must be an RFC 3339 date and time/],
      [['--at', future], /--at must not be in the future/],
      [['--at', '2001-01-01T00:00:00Z'], /--at must be within the last 365 days/],
      [['--days-ago=-1'], /--days-ago must be a number of days from 0 to 365/],
      [['--days-ago', '400'], /--days-ago must be a number of days from 0 to 365/],
      [['--days-ago', '1e3'], /--days-ago must be a number of days/],
      [['--days-ago', '1', '--at', '2026-11-20T00:00:00Z'], /give --at or --days-ago, not both/],
    ];
    for (const [extra, message] of cases) {
      const out = await send('graceful', 'payment_failed', 'cus_refused_time', extra);
      expect([out.code, out.stdout], extra.join(' ')).toEqual([2, '']);
      expect(out.stderr, extra.join(' ')).toMatch(message);
    }
    expect(await lookup('graceful', 'cus_refused_time')).toEqual({ status: 'active' });
  });
});
