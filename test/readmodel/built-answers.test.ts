import { afterEach, describe, expect, it } from 'vitest';
import { answerBody, lookupBody, prepareTenant } from '../../src/domain/lookup.js';
import { sha256 } from '../../src/domain/keys.js';
import type { Enforcement, SubscriberStatus, TenantAuth, TenantAuthFields } from '../../src/domain/types.js';
import { ReadModel } from '../../src/readmodel/index.js';

/**
 * The read model builds a subscriber in dunning's answer once and keeps it until it could
 * change: the subscriber set again, its tenant prepared again (policy, branding, anything of
 * the tenant), or the clock crossing its scheduled lockout. Each answer must be the bytes
 * `answerBody` makes for the same subscriber at the same instant; a second lookup must reuse
 * them (the same buffer). The copy follows a change log written here, on a fake clock.
 */

type Feed = Parameters<typeof ReadModel.open>[0];
type Extra = { lockoutAtS: number | null; payUrl: string | null };
interface Row {
  tenantId: number;
  customerId: string;
  status: SubscriberStatus | null;
  extra: Extra | null;
}

const NOW = Date.parse('2026-05-01T00:00:00Z');
const HOUR_MS = 3_600_000;
const PAY = 'https://invoice.stripe.test/i/acct_1/test_YWNjdF8x?s=ap&q="quoted"';

function tenant(over: Partial<TenantAuthFields> = {}): TenantAuth {
  return prepareTenant({
    id: 1,
    slug: 'acme',
    suspended: false,
    hmacRequired: false,
    cardUpdateUrl: 'https://acme.test/card',
    allowedOrigins: null,
    lookupsPerMinute: null,
    branding: {},
    enforcement: 'gate',
    livemode: null,
    entitlements: { powered_by_watermark: true, custom_domain: false },
    publishableKeyHashes: [{ value: sha256('pk_acme_0000000000000000000000'), expiresAtMs: null }],
    hmacSecrets: [{ value: 'secret', expiresAtMs: null }],
    secretKeys: [],
    ...over,
  });
}

/** A change log in memory: a snapshot of tenants and subscribers, then the changes pushed since. */
class MemoryFeed {
  private seq = 0;
  private pending: { tenants: TenantAuth[]; subscribers: Row[] } = { tenants: [], subscribers: [] };
  constructor(
    private readonly tenants: TenantAuth[],
    private readonly rows: Row[],
  ) {}

  push(change: { tenants?: TenantAuth[]; subscribers?: Row[] }): void {
    this.pending.tenants.push(...(change.tenants ?? []));
    this.pending.subscribers.push(...(change.subscribers ?? []));
  }

  readonly feed: Feed = {
    loadLookupState: (sink) => {
      sink.begin(this.rows.length, this.tenants, []);
      for (const r of this.rows) {
        if (r.status === null) continue;
        const bytes = Buffer.from(`..${r.customerId}..`, 'latin1');
        sink.subscriber(r.tenantId, bytes, 2, bytes.length - 2, r.status, r.extra);
      }
      return Promise.resolve(String(this.seq));
    },
    lookupChangesSince: () => {
      const { tenants, subscribers } = this.pending;
      this.pending = { tenants: [], subscribers: [] };
      this.seq += 1;
      return Promise.resolve({
        position: String(this.seq),
        gap: false,
        tenants: tenants.map((t) => ({ id: t.id, tenant: t })),
        subscribers,
      });
    },
    pruneLookupChanges: () => Promise.resolve(0),
    onCommit: () => () => {},
    listenForChanges: (handlers) => {
      handlers.onReady();
      return Promise.resolve(() => Promise.resolve());
    },
  } as Feed;
}

let model: ReadModel | undefined;
afterEach(async () => {
  await model?.close();
  model = undefined;
});

async function open(tenants: TenantAuth[], rows: Row[]): Promise<{ model: ReadModel; log: MemoryFeed }> {
  const log = new MemoryFeed(tenants, rows);
  model = await ReadModel.open(log.feed, { now: () => NOW });
  return { model, log };
}

/** What `answerBody` says of a subscriber, as the lookup answered it before answers were kept. */
function expected(t: TenantAuth, status: SubscriberStatus | null, extra: Extra | null, signed: boolean, nowMs: number) {
  if (status === null || status === 'active') return lookupBody(t, status);
  const view = extra === null ? null : { lockoutAtS: extra.lockoutAtS ?? 0, payUrl: extra.payUrl };
  return answerBody(t, status, view, signed, nowMs);
}

describe('answers built by the read model', () => {
  it('are the bytes answerBody makes, for every status, enforcement, schedule, pay link and signature', async () => {
    const nowS = NOW / 1000;
    const schedules = [null, nowS - 60, nowS + 60];
    const links = [null, PAY];
    const statuses: SubscriberStatus[] = ['active', 'warning', 'lockout'];
    const enforcements: Enforcement[] = ['gate', 'banner_only', 'monitor'];
    const tenants = enforcements.map((enforcement, i) =>
      tenant({ id: i + 1, slug: `t-${enforcement}`, enforcement, cardUpdateUrl: i === 2 ? null : 'https://a.test/c' }),
    );
    const rows: Row[] = [];
    for (const t of tenants)
      for (const status of statuses)
        for (const lockoutAtS of schedules)
          for (const payUrl of links)
            rows.push({
              tenantId: t.id,
              customerId: `cus_${status}_${lockoutAtS ?? 'none'}_${payUrl === null ? 'nolink' : 'link'}`,
              status,
              extra: lockoutAtS === null && payUrl === null ? null : { lockoutAtS, payUrl },
            });
    const { model } = await open(tenants, rows);
    for (const t of tenants) {
      for (const r of rows.filter((row) => row.tenantId === t.id)) {
        for (const signed of [false, true]) {
          for (const at of [NOW, NOW + 120_000, NOW - 120_000]) {
            const answered = model.answer(t, r.customerId, signed, at);
            expect(answered.toString(), `${t.slug} ${r.customerId} signed=${signed} at=${at}`).toBe(
              expected(t, r.status, r.extra, signed, at).toString(),
            );
          }
        }
      }
      expect(model.answer(t, 'cus_nobody', true, NOW).toString()).toBe('{"status":"active"}');
      expect(model.answer(t, 'cus_\u00e9', true, NOW).toString()).toBe('{"status":"active"}');
    }
  });

  it('are built once and reused while nothing they depend on changes', async () => {
    const t = tenant();
    const extra = { lockoutAtS: NOW / 1000 + 3600, payUrl: PAY };
    const { model } = await open([t], [{ tenantId: 1, customerId: 'cus_dunning', status: 'warning', extra }]);
    const first = model.answer(t, 'cus_dunning', true, NOW);
    expect(model.answer(t, 'cus_dunning', true, NOW + 1000)).toBe(first);
    const unsigned = model.answer(t, 'cus_dunning', false, NOW);
    expect(unsigned).not.toBe(first);
    expect(JSON.parse(unsigned.toString())).not.toHaveProperty('pay_url');
    expect(model.answer(t, 'cus_dunning', false, NOW + 2000)).toBe(unsigned);
  });

  it("share the tenant's own bytes when the subscriber's answer is one of them", async () => {
    const t = tenant();
    const { model } = await open(
      [t],
      [{ tenantId: 1, customerId: 'cus_link', status: 'warning', extra: { lockoutAtS: null, payUrl: PAY } }],
    );
    // Unsigned, a pay link is not shown: the answer is the tenant's warning.
    expect(model.answer(t, 'cus_link', false, NOW)).toBe(t.knownBodies.warning);
    const signed = model.answer(t, 'cus_link', true, NOW);
    expect(JSON.parse(signed.toString())).toMatchObject({ status: 'warning', pay_url: PAY });
    expect(model.answer(t, 'cus_link', true, NOW)).toBe(signed);
    expect(model.answer(t, 'cus_link', false, NOW)).toBe(t.knownBodies.warning);
  });

  it('turn when the clock reaches a scheduled lockout, and back when it is set back before it', async () => {
    const t = tenant();
    const lockoutMs = NOW + HOUR_MS;
    const extra = { lockoutAtS: lockoutMs / 1000, payUrl: null };
    const { model } = await open([t], [{ tenantId: 1, customerId: 'cus_grace', status: 'warning', extra }]);
    const before = model.answer(t, 'cus_grace', false, NOW);
    expect(JSON.parse(before.toString())).toMatchObject({ status: 'warning', lockout_at: '2026-05-01T01:00:00Z' });
    expect(model.answer(t, 'cus_grace', false, lockoutMs - 1)).toBe(before);
    const after = model.answer(t, 'cus_grace', false, lockoutMs);
    expect(JSON.parse(after.toString())).toEqual(JSON.parse(t.knownBodies.lockout.toString()));
    expect(model.answer(t, 'cus_grace', false, lockoutMs + 86_400_000)).toBe(after);
    // A clock set back (a test's, or a corrected one) answers as answerBody would at that instant.
    expect(model.answer(t, 'cus_grace', false, lockoutMs - 1).toString()).toBe(before.toString());
  });

  it("are built again after a change of the tenant's policy, branding or card link", async () => {
    const t = tenant();
    const extra = { lockoutAtS: NOW / 1000 + 3600, payUrl: PAY };
    const { model, log } = await open([t], [{ tenantId: 1, customerId: 'cus_dunning', status: 'warning', extra }]);
    const gate = model.answer(t, 'cus_dunning', true, NOW);
    expect(JSON.parse(gate.toString())).toMatchObject({ status: 'warning', pay_url: PAY });

    const bannerOnly = tenant({ enforcement: 'banner_only' });
    log.push({ tenants: [bannerOnly] });
    await model.catchUp();
    const answeredTenant = model.tenant('acme');
    expect(answeredTenant).toBe(bannerOnly);
    // Past the lockout, banner_only answers a warning without its schedule.
    const past = NOW + 2 * HOUR_MS;
    expect(model.answer(bannerOnly, 'cus_dunning', true, past).toString()).toBe(
      expected(bannerOnly, 'warning', extra, true, past).toString(),
    );
    expect(JSON.parse(model.answer(bannerOnly, 'cus_dunning', true, past).toString())).not.toHaveProperty('lockout_at');

    const monitor = tenant({ enforcement: 'monitor' });
    log.push({ tenants: [monitor] });
    await model.catchUp();
    expect(model.answer(monitor, 'cus_dunning', true, NOW).toString()).toBe(
      '{"status":"active","card_update_url":null,"entitlements":{"powered_by_watermark":true,"custom_domain":false}}',
    );

    const branded = tenant({
      branding: { payment_url: 'https://pay.acme.test/' },
      cardUpdateUrl: 'https://acme.test/new',
    });
    log.push({ tenants: [branded] });
    await model.catchUp();
    const rebuilt = model.answer(branded, 'cus_dunning', true, NOW);
    expect(rebuilt).not.toBe(gate);
    expect(rebuilt.toString()).toBe(expected(branded, 'warning', extra, true, NOW).toString());
    expect(JSON.parse(rebuilt.toString())).toMatchObject({ card_update_url: 'https://acme.test/new', pay_url: PAY });
    expect(model.answer(branded, 'cus_dunning', true, NOW)).toBe(rebuilt);
  });

  it("are built again after the subscriber's status, schedule or pay link changes, and forgotten when it pays", async () => {
    const t = tenant();
    const extra = { lockoutAtS: NOW / 1000 + 3600, payUrl: PAY };
    const { model, log } = await open([t], [{ tenantId: 1, customerId: 'cus_dunning', status: 'warning', extra }]);
    const first = model.answer(t, 'cus_dunning', true, NOW);

    const moved = { lockoutAtS: NOW / 1000 + 7200, payUrl: 'https://invoice.stripe.test/i/other' };
    log.push({ subscribers: [{ tenantId: 1, customerId: 'cus_dunning', status: 'warning', extra: moved }] });
    await model.catchUp();
    const second = model.answer(t, 'cus_dunning', true, NOW);
    expect(second.toString()).toBe(expected(t, 'warning', moved, true, NOW).toString());
    expect(second.toString()).not.toBe(first.toString());

    log.push({
      subscribers: [
        { tenantId: 1, customerId: 'cus_dunning', status: 'lockout', extra: { lockoutAtS: null, payUrl: PAY } },
      ],
    });
    await model.catchUp();
    expect(JSON.parse(model.answer(t, 'cus_dunning', true, NOW).toString())).toMatchObject({
      status: 'lockout',
      pay_url: PAY,
    });

    log.push({ subscribers: [{ tenantId: 1, customerId: 'cus_dunning', status: 'active', extra: null }] });
    await model.catchUp();
    expect(model.answer(t, 'cus_dunning', true, NOW)).toBe(t.knownBodies.active);
    expect(model.snapshotStats().withExtras).toBe(0);
  });

  it('keep answering right while the table of extras grows past its first size', async () => {
    const t = tenant();
    const { model, log } = await open([t], []);
    const ids = Array.from({ length: 200 }, (_, i) => `cus_grow${i}`);
    const extraOf = (i: number) => ({ lockoutAtS: NOW / 1000 + 60 * (i + 1), payUrl: `${PAY}&n=${i}` });
    for (const [i, id] of ids.entries()) {
      log.push({ subscribers: [{ tenantId: 1, customerId: id, status: 'warning', extra: extraOf(i) }] });
      await model.catchUp();
      // Asked as it arrives: each answer is built before the next insertion may rebuild the table.
      expect(model.answer(t, id, true, NOW).toString()).toBe(expected(t, 'warning', extraOf(i), true, NOW).toString());
    }
    for (const [i, id] of ids.entries())
      expect(model.answer(t, id, true, NOW).toString()).toBe(expected(t, 'warning', extraOf(i), true, NOW).toString());
  });
});
