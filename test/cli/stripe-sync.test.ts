import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../../src/cli/run.js';
import { availableEngines } from '../helpers/engines.js';
import { ADMIN_TOKEN, T0, harness } from '../helpers/harness.js';
import type { CreatedTenant, Harness } from '../helpers/harness.js';
import { event, invoice as webhookInvoice } from '../helpers/stripe-fixtures.js';
import {
  buildCharge,
  buildCustomerId,
  buildInvoice,
  buildInvoicePayment,
  buildPaymentIntent,
  buildSubscription,
  startStripeStandin,
  stripeId,
} from '../helpers/stripe-standin.js';
import type { StripeStandin, StripeStandinData } from '../helpers/stripe-standin.js';
import { deliver } from '../helpers/webhook.js';

/**
 * `dunwall stripe sync` against a local stand-in of Stripe's list endpoints: no Stripe
 * account is reachable from the test machine, so the official `stripe` client is pointed
 * (DUNWALL_STRIPE_API_URL -> its host/port/protocol options) at a loopback server that
 * answers as Stripe documents, with objects shaped like Stripe's own OpenAPI fixtures.
 */
const engines = await availableEngines();
const KEY = 'rk_test_51StandinRestrictedKey0123456789';
const SECRET = 'whsec_sync_tests_0123456789abcdef';
const DAY_S = 86_400;
const NOW_S = Math.floor(T0 / 1000);

class Capture {
  text = '';
  constructor(readonly isTTY = false) {}
  write(chunk: string): boolean {
    this.text += chunk;
    return true;
  }
}

interface Account {
  data: StripeStandinData;
  /** The status each customer must end with, null: unknown. */
  expected: Map<string, [string, string] | null>;
  /** A customer whose later webhook supersedes what the import finds. */
  paidLater: { customer: string; subscription: string };
}

/** One failed payment attempt on an invoice, as Stripe records it. */
function attempt(data: StripeStandinData, customer: string, invoiceId: string, declineCode: string, atS: number): void {
  const pi = buildPaymentIntent({ customer, declineCode, createdS: atS - 60, chargeCreatedS: atS });
  data.paymentIntents.push(pi);
  data.charges.push(buildCharge({ paymentIntent: pi }));
  data.invoicePayments.push(buildInvoicePayment({ invoice: invoiceId, paymentIntent: pi.id as string, createdS: atS }));
}

function account(): Account {
  const data: StripeStandinData = {
    subscriptions: [],
    invoices: [],
    invoicePayments: [],
    paymentIntents: [],
    charges: [],
  };
  const expected = new Map<string, [string, string] | null>();
  const t = NOW_S - 10 * DAY_S;

  const subscribed = (
    status: string,
    inv: { billingReason?: string; next: number | null; decline: string; attempts: number },
    expect: [string, string] | null,
    at = t,
  ) => {
    const customer = buildCustomerId();
    const sub = stripeId('sub');
    const invoice = buildInvoice({
      customer,
      subscription: sub,
      billingReason: inv.billingReason ?? 'subscription_cycle',
      attemptCount: inv.attempts,
      nextPaymentAttempt: inv.next,
      createdS: at,
      finalizedS: at + 60,
    });
    data.invoices.push(invoice);
    data.subscriptions.push(
      buildSubscription({ id: sub, customer, status, latestInvoice: invoice.id as string, createdS: at - 30 * DAY_S }),
    );
    for (let i = 0; i < inv.attempts; i += 1)
      attempt(data, customer, invoice.id as string, inv.decline, at + 3600 + i * DAY_S);
    expected.set(customer, expect);
    return { customer, subscription: sub };
  };

  // Enough past_due subscriptions for three pages of 100.
  for (let i = 0; i < 230; i += 1)
    subscribed(
      'past_due',
      { next: NOW_S + DAY_S, decline: 'insufficient_funds', attempts: 2 },
      ['warning', 'soft_decline'],
      t + i,
    );
  subscribed('unpaid', { next: null, decline: 'expired_card', attempts: 4 }, ['lockout', 'hard_decline']);
  subscribed('unpaid', { next: null, decline: 'generic_decline', attempts: 4 }, ['lockout', 'retries_exhausted']);
  subscribed('incomplete', { billingReason: 'subscription_create', next: null, decline: 'stolen_card', attempts: 1 }, [
    'warning',
    'first_payment_failed',
  ]);
  const paidLater = subscribed('past_due', { next: NOW_S + DAY_S, decline: 'insufficient_funds', attempts: 1 }, [
    'active',
    'paid',
  ]);

  // An invoice of no subscription, collected automatically and retrying.
  const oneOff = buildCustomerId();
  const standalone = buildInvoice({
    customer: oneOff,
    subscription: null,
    billingReason: 'manual',
    attemptCount: 1,
    nextPaymentAttempt: NOW_S + DAY_S,
    createdS: t,
    finalizedS: t,
  });
  data.invoices.push(standalone);
  attempt(data, oneOff, standalone.id as string, 'insufficient_funds', t + 600);
  expected.set(oneOff, ['warning', 'soft_decline']);

  // Neither gates: an emailed invoice, and one Stripe has not attempted yet.
  const emailed = buildCustomerId();
  data.invoices.push(
    buildInvoice({
      customer: emailed,
      subscription: null,
      collectionMethod: 'send_invoice',
      attemptCount: 0,
      createdS: t,
    }),
  );
  expected.set(emailed, null);
  const untried = buildCustomerId();
  data.invoices.push(
    buildInvoice({
      customer: untried,
      subscription: stripeId('sub'),
      attemptCount: 0,
      nextPaymentAttempt: NOW_S + 3600,
      createdS: t,
    }),
  );
  expected.set(untried, null);
  return { data, expected, paidLater };
}

describe.each(engines)('dunwall stripe sync ($name)', (engine) => {
  let h: Harness;
  let acme: CreatedTenant;
  let url: string;
  let standin: StripeStandin;
  let acct: Account;
  let dir: string;
  const sleeps: number[] = [];

  beforeAll(async () => {
    h = await harness(engine);
    acme = await h.createTenant('acme');
    // The stand-in's account is in test mode: its events reach the tenant's test mode.
    await h.admin('PATCH', '/tenants/acme?mode=test', { stripe_webhook_secret: SECRET });
    url = await h.app.listen({ port: 0, host: '127.0.0.1' });
    acct = account();
    standin = await startStripeStandin(acct.data, { apiKey: KEY });
    dir = mkdtempSync(join(tmpdir(), 'dunwall-sync-'));
  });
  afterAll(async () => {
    await standin?.close();
    await h?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** The stand-in's account is in test mode (its rk_test_ key): synced into the tenant's test mode unless `live`. */
  async function sync(
    args: string[],
    opts: { env?: Record<string, string>; tty?: boolean; tenant?: string; live?: boolean } = {},
  ) {
    const stdout = new Capture();
    const stderr = new Capture(opts.tty === true);
    const code = await run(
      [
        'stripe',
        'sync',
        '--tenant',
        opts.tenant ?? 'acme',
        '--state-file',
        join(dir, 'state.json'),
        ...(opts.live === true ? [] : ['--test']),
        ...args,
      ],
      {
        stdout,
        stderr,
        stdin: Readable.from([]),
        env: {
          DUNWALL_URL: url,
          DUNWALL_ADMIN_TOKEN: ADMIN_TOKEN,
          STRIPE_API_KEY: KEY,
          DUNWALL_STRIPE_API_URL: standin.url,
          ...opts.env,
        },
        // Time is faked: a Retry-After is recorded, not slept.
        sleep: async (ms) => {
          sleeps.push(ms);
        },
        // The CLI's 10 s bound on a call of the service is not what these tests examine: on a
        // loaded machine a dry run of 235 customers took longer, and failed. The bound of the
        // test holds instead (vitest.config.ts).
        fetch: (input, init) => fetch(input, { ...init, signal: null }),
      },
    );
    expect(stdout.text + stderr.text).not.toContain(KEY);
    return { code, stdout: stdout.text, stderr: stderr.text };
  }

  async function statusOf(customer: string): Promise<[string, string] | null> {
    const res = await h.admin('GET', `/tenants/acme/subscribers/${customer}?mode=test`);
    if (res.statusCode === 404) return null;
    const body = res.json() as { status: string | null; reason: string | null };
    const lookup = await h.lookup('acme', { key: acme.test_publishable_key as string, customerId: customer });
    expect(lookup.json().status).toBe(body.status ?? 'active');
    return body.status === null ? null : [body.status, body.reason ?? ''];
  }

  it('refuses to run without a key, and never takes one as an argument', async () => {
    const none = await sync([], { env: { STRIPE_API_KEY: '' } });
    expect(none.code).toBe(2);
    expect(none.stderr).toBe('dunwall: stripe sync needs a Stripe API key: --api-key-file PATH, or STRIPE_API_KEY\n');
    const bad = await sync([], { env: { STRIPE_API_KEY: 'not-a-key' } });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/restricted key/);
    const asArg = await sync(['--api-key', KEY]);
    expect(asArg.code).toBe(2);
    expect(standin.requests).toHaveLength(0);
  });

  it('--dry-run prints what would change and writes nothing', async () => {
    const res = await sync(['--dry-run', '--json']);
    expect(res.stderr).not.toMatch(/^dunwall:/m);
    expect(res.code).toBe(0);
    const summary = JSON.parse(res.stdout) as {
      dry_run: boolean;
      customers_seen: number;
      statuses: Record<string, number>;
      changes: { processor_customer_id: string; from: string | null; to: string | null }[];
    };
    expect(summary.dry_run).toBe(true);
    expect(summary.customers_seen).toBe(235);
    expect(summary.statuses).toEqual({ active: 0, warning: 233, lockout: 2, unknown: 0 });
    expect(summary.changes).toHaveLength(235);
    expect(summary.changes.find((c) => c.processor_customer_id === acct.paidLater.customer)).toMatchObject({
      from: null,
      to: 'warning',
    });
    for (const customer of acct.expected.keys()) expect(await statusOf(customer)).toBeNull();
    expect(existsSync(join(dir, 'state.json'))).toBe(false);
  });

  it('imports with auto-pagination, waits out a 429 as Retry-After asks, resumes after an interruption, and ends as Stripe sees it', async () => {
    // A webhook dated after what the import will find: the import must not undo it.
    await deliver(
      h,
      'acme',
      event(
        'invoice.paid',
        webhookInvoice(acct.paidLater.customer, {
          ids: {
            subscription: acct.paidLater.subscription,
            invoice: stripeId('in'),
            paymentIntent: stripeId('pi'),
            charge: stripeId('ch'),
          },
          status: 'paid',
        }),
        { created: NOW_S - 3600, livemode: false },
      ),
      SECRET,
    );
    standin.requests.length = 0;
    sleeps.length = 0;
    standin.rateLimitNext(1, 7);
    // Stripe fails for good in the middle of the second page of past_due subscriptions.
    standin.failFrom(150);
    const first = await sync([]);
    expect(first.code).toBe(1);
    expect(first.stderr).toMatch(
      /^dunwall: stripe sync stopped at past_due subscriptions: Stripe answered 500 .*; progress is saved in .*state\.json: run the same command again to resume$/m,
    );
    expect(sleeps).toEqual([7000]);
    // Plain progress lines, one a batch, since stderr is not a terminal.
    expect(first.stderr).toMatch(
      /^stripe sync: 1\/4 past_due subscriptions · 100 objects · \d+ events · 100 customers$/m,
    );
    const saved = JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8')) as { phase: number; startingAfter: string };
    expect(saved.phase).toBe(0);
    const imported = [...acct.expected.entries()].filter(([, e]) => e !== null && e[1] === 'soft_decline');
    const done = await Promise.all(imported.map(async ([c]) => ((await statusOf(c)) === null ? 0 : 1)));
    expect(done.reduce<number>((a, b) => a + b, 0)).toBeGreaterThanOrEqual(100);

    standin.recover();
    standin.requests.length = 0;
    const second = await sync(['--json']);
    expect(second.stderr).toMatch(
      /^dunwall: resuming the import of acme at past_due subscriptions \(\d+ objects done before\)$/m,
    );
    expect(second.code).toBe(0);
    // It picked up after the last object it had sent, not from the start.
    const firstList = standin.requests.find((r) => r.path === '/v1/subscriptions');
    expect(firstList?.query.get('starting_after')).toBe(saved.startingAfter);
    const result = JSON.parse(second.stdout) as {
      resumed: boolean;
      statuses: Record<string, number>;
      customers_seen: number;
      episodes_created: number;
    };
    expect(result.resumed).toBe(true);
    expect(result.customers_seen).toBe(235);
    expect(result.statuses).toEqual({ active: 1, warning: 232, lockout: 2, unknown: 0 });
    for (const [customer, want] of acct.expected) expect(await statusOf(customer), customer).toEqual(want);
    expect(existsSync(join(dir, 'state.json'))).toBe(false);
  });

  it('a second run changes nothing, and a later webhook supersedes what was imported', async () => {
    const again = await sync(['--json'], { tty: true });
    expect(again.code).toBe(0);
    const result = JSON.parse(again.stdout) as {
      episodes_created: number;
      changes: unknown[];
      outcomes: { applied: number; duplicate: number };
    };
    expect(result.episodes_created).toBe(0);
    expect(result.changes).toEqual([]);
    expect(result.outcomes.applied).toBe(0);
    expect(result.outcomes.duplicate).toBeGreaterThan(234);
    // On a terminal the bar is redrawn in place.
    expect(again.stderr).toContain('\r\x1b[K');
    expect(again.stderr).toMatch(/stripe sync \[#+-*\] +\d+% 4\/4 open invoices/);

    const [customer] = [...acct.expected.entries()].find(([, e]) => e?.[0] === 'lockout') ?? [];
    if (customer === undefined) throw new Error('no locked-out customer');
    const sub = acct.data.subscriptions.find((s) => s.customer === customer);
    await deliver(
      h,
      'acme',
      event(
        'customer.subscription.updated',
        { ...sub, status: 'active' },
        { created: NOW_S, previous: { status: 'unpaid' }, livemode: false },
      ),
      SECRET,
    );
    expect(await statusOf(customer)).toEqual(['active', 'paid']);
  });

  it('reads the key from --api-key-file', async () => {
    const keyFile = join(dir, 'stripe-key');
    writeFileSync(keyFile, `${KEY}\n`, { mode: 0o600 });
    const res = await sync(['--api-key-file', keyFile, '--dry-run'], { env: { STRIPE_API_KEY: '' } });
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/^customers seen:\s+235$/m);
  });

  it('skips every object of the other mode than the one synced into, counts them, and says why', async () => {
    // The stand-in's account is in test mode, as its rk_test_ key says: into the live mode, nothing.
    await h.createTenant('acme-live');
    const live = await sync(['--json'], { tenant: 'acme-live', live: true });
    expect(live.code).toBe(0);
    const result = JSON.parse(live.stdout) as {
      events_sent: number;
      customers_seen: number;
      outcomes: Record<string, number>;
      statuses: Record<string, number>;
    };
    expect(result.events_sent).toBeGreaterThan(235);
    expect(result.outcomes).toMatchObject({ applied: 0, livemode_mismatch: result.events_sent });
    expect(result.customers_seen).toBe(0);
    expect(result.statuses).toEqual({ active: 0, warning: 0, lockout: 0, unknown: 0 });
    expect(live.stderr).toMatch(
      /^dunwall: \d+ events were skipped as livemode_mismatch: their Stripe mode is not the one synced into/m,
    );
    const [customer] = acct.expected.keys();
    expect((await h.admin('GET', `/tenants/acme-live/subscribers/${customer ?? ''}`)).statusCode).toBe(404);

    // The same tenant's test mode (--test) takes the same account's objects.
    const test = await sync(['--dry-run'], { tenant: 'acme-live' });
    expect(test.code).toBe(0);
    expect(test.stdout).toMatch(/^customers seen:\s+235$/m);
    expect(test.stdout).toMatch(/^events: .*, livemode_mismatch 0$/m);
    expect(test.stderr).not.toMatch(/livemode_mismatch/);
  });
});
