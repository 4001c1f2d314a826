import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cardFactOf } from '../../src/domain/notices.js';
import type { StripeEventLike } from '../../src/domain/stripe/derive.js';
import { computeHmac } from '../../src/domain/hmac.js';
import { CARD_SAMPLE_SCENARIOS, SAMPLE_API_VERSIONS, sampleEvents, sampleIds } from '../../src/cli/stripe-samples.js';
import { run } from '../../src/cli/run.js';
import type { App } from '../../src/http/app.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { ADMIN_TOKEN, buildAppWithModel } from '../helpers/harness.js';
import { portOf } from '../helpers/socket.js';

/**
 * The notices from the command line: `tenant create|update --notices`, and the card samples
 * of `stripe send-sample` taken by a real service on loopback, whose signed lookup then
 * carries the notice.
 */

const NOW = 1_790_000_000;
const SECRET = 'whsec_noticesCli0123456789abcdefghij';

describe('stripe send-sample card events', () => {
  it('are test-mode Stripe events of the documented types, read as a card fact', () => {
    for (const shape of ['legacy', 'basil'] as const) {
      const ids = sampleIds('acme', 'cus_1');
      const [expiring, upcoming, updated] = CARD_SAMPLE_SCENARIOS.map((scenario) => {
        const events = sampleEvents({ scenario, shape, tenant: 'acme', customer: 'cus_1', ids, nowS: NOW });
        expect(events).toHaveLength(1);
        expect(events[0]).toMatchObject({
          object: 'event',
          api_version: SAMPLE_API_VERSIONS[shape],
          livemode: false,
          created: NOW,
        });
        return events[0] as unknown as StripeEventLike;
      });
      // NOW is 2026-09-21: a card of September 2026, valid to the end of the month.
      expect(expiring?.type).toBe('customer.source.expiring');
      expect(cardFactOf(expiring as StripeEventLike)).toEqual({
        kind: 'expiring',
        customerId: 'cus_1',
        expiry: { month: 9, year: 2026 },
        untilMs: Date.parse('2026-10-01T00:00:00Z'),
      });
      expect(upcoming?.type).toBe('invoice.upcoming');
      expect(cardFactOf(upcoming as StripeEventLike)).toEqual({
        kind: 'renewal',
        customerId: 'cus_1',
        renewalMs: (NOW + 7 * 86_400) * 1000,
      });
      expect(updated?.type).toBe('customer.updated');
      expect(cardFactOf(updated as StripeEventLike)).toEqual({
        kind: 'ended',
        customerId: 'cus_1',
        why: 'card_changed',
      });
    }
  });
});

describe('notices from the command line, against a real service', () => {
  let store: Store;
  let app: App;
  let base = '';
  let tenant: { test_publishable_key: string; hmac_secret: string };

  async function cli(args: string[], stdin?: string): Promise<{ code: number; stdout: string; stderr: string }> {
    let stdout = '';
    let stderr = '';
    const code = await run(args, {
      stdout: { write: (chunk: string) => (stdout += chunk) },
      stderr: { write: (chunk: string) => (stderr += chunk) },
      stdin: Readable.from(stdin === undefined ? [] : [stdin]),
      env: { DUNWALL_URL: base, DUNWALL_ADMIN_TOKEN: ADMIN_TOKEN },
    });
    return { code, stdout, stderr };
  }

  async function send(scenario: string, customer: string): Promise<{ http_status: number; outcome: string }> {
    const out = await cli(
      ['stripe', 'send-sample', scenario, '--tenant', 'acme', '--customer', customer, '--secret', '-', '--json'],
      SECRET,
    );
    expect(out.stderr).toBe('');
    expect(out.code).toBe(0);
    const [sent] = (JSON.parse(out.stdout) as { events: { http_status: number; outcome: string }[] }).events;
    if (sent === undefined) throw new Error('no event sent');
    return sent;
  }

  async function lookup(customer: string): Promise<Record<string, unknown>> {
    const hmac = computeHmac(tenant.hmac_secret, customer);
    const res = await fetch(`${base}/api/subscriber-status/acme?processor_customer_id=${customer}&hmac=${hmac}`, {
      headers: { authorization: `Bearer ${tenant.test_publishable_key}` },
      signal: AbortSignal.timeout(10_000),
    });
    expect(res.status).toBe(200);
    return (await res.json()) as Record<string, unknown>;
  }

  beforeAll(async () => {
    store = await openStore({ engine: 'embedded', dataDir: null });
    app = await buildAppWithModel({ store, adminToken: ADMIN_TOKEN });
    base = `http://127.0.0.1:${await portOf(app)}`;
    const created = await cli(['tenant', 'create', 'acme', '--json', '--notices', 'card_expiring']);
    expect(created.stderr).toBe('');
    tenant = JSON.parse(created.stdout) as typeof tenant;
    // The samples are test-mode events: the test mode's signing secret, and its key for the lookups.
    expect((await cli(['tenant', 'update', 'acme', '--stripe-webhook-secret', '-', '--test'], SECRET)).code).toBe(0);
  }, 120_000);

  afterAll(async () => {
    await app?.close();
    await store?.close();
  });

  it('tenant create and update set policy.notices, and the tenant shows them', async () => {
    const shown = await cli(['tenant', 'show', 'acme']);
    expect(shown.stdout).toMatch(/notices: card_expiring/);
    const off = await cli(['tenant', 'update', 'acme', '--notices', 'none', '--json']);
    expect(off.code).toBe(0);
    expect((JSON.parse(off.stdout) as { policy: { notices: string[] } }).policy.notices).toEqual([]);
    const on = await cli(['tenant', 'update', 'acme', '--notices', 'card_expiring', '--json']);
    expect((JSON.parse(on.stdout) as { policy: { notices: string[] } }).policy.notices).toEqual(['card_expiring']);
    const refused = await cli(['tenant', 'update', 'acme', '--notices', 'card_lost']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/--notices must be none or a comma-separated list of card_expiring/);
  });

  it('send-sample card_expiring, renewal_upcoming and card_updated are taken by the service, and the lookup follows', async () => {
    expect(await send('card_expiring', 'cus_sampleCard')).toEqual(
      expect.objectContaining({ http_status: 200, outcome: 'applied' }),
    );
    const now = new Date();
    const expires = `${now.getUTCFullYear()}-${String(now.getUTCMonth() + 1).padStart(2, '0')}`;
    expect(await lookup('cus_sampleCard')).toMatchObject({
      status: 'active',
      notice: { kind: 'card_expiring', expires },
    });
    // Without a Stripe API key the default card cannot be asked: accepted, nothing learned.
    expect(await send('renewal_upcoming', 'cus_sampleCard')).toEqual(
      expect.objectContaining({ http_status: 200, outcome: 'ignored' }),
    );
    expect(await send('card_updated', 'cus_sampleCard')).toEqual(
      expect.objectContaining({ http_status: 200, outcome: 'applied' }),
    );
    expect((await lookup('cus_sampleCard')).notice).toBeUndefined();
  });
});
