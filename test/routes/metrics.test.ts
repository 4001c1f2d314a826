import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/metrics/index.js';
import { availableEngines } from '../helpers/engines.js';
import { harness } from '../helpers/harness.js';
import type { CreatedTenant, Harness } from '../helpers/harness.js';
import { event, invoice } from '../helpers/stripe-fixtures.js';
import { deliver } from '../helpers/webhook.js';

const engines = await availableEngines();

describe.each(engines.slice(0, 1))('GET /metrics ($name)', (engine) => {
  let h: Harness;
  let acme: CreatedTenant;
  beforeAll(async () => {
    h = await harness(engine, { metrics: createMetrics() });
    acme = await h.createTenant('acme-metrics');
    await h.admin('PATCH', '/tenants/acme-metrics', { stripe_webhook_secret: 'whsec_metrics_0123456789abcdef' });
  });
  afterAll(() => h.close());

  const scrape = async () => {
    const res = await h.app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    return res.body;
  };
  const value = (text: string, series: string) =>
    Number(new RegExp(`^${series.replace(/[{}"()[\]]/g, '\\$&')} (\\S+)$`, 'm').exec(text)?.[1] ?? 'NaN');

  it('counts requests and latencies by route template and status, never by slug or customer', async () => {
    for (let i = 0; i < 3; i += 1) await h.lookup('acme-metrics', { key: acme.publishable_key, customerId: 'cus_m1' });
    await h.lookup('acme-metrics', { customerId: 'cus_m1' });
    const text = await scrape();
    expect(
      value(
        text,
        'dunwall_http_requests_total{route="/api/subscriber-status/:tenantSlug",method="GET",status_code="200"}',
      ),
    ).toBe(3);
    expect(
      value(
        text,
        'dunwall_http_requests_total{route="/api/subscriber-status/:tenantSlug",method="GET",status_code="401"}',
      ),
    ).toBe(1);
    expect(
      value(
        text,
        'dunwall_http_request_duration_seconds_count{route="/api/subscriber-status/:tenantSlug",method="GET",status_code="200"}',
      ),
    ).toBe(3);
    expect(text).not.toContain('acme-metrics');
    expect(text).not.toContain('cus_m1');
  });

  it('reports the read model: its size, its catch-ups and the changes they applied', async () => {
    const before = await scrape();
    await h.setSubscriber('acme-metrics', 'cus_m2', 'warning');
    await h.setSubscriber('acme-metrics', 'cus_m2b', 'lockout');
    const after = await scrape();
    const delta = (series: string) => (value(after, series) || 0) - (value(before, series) || 0);
    expect(delta('dunwall_readmodel_subscribers')).toBe(2);
    expect(delta('dunwall_readmodel_changes_applied_total')).toBeGreaterThanOrEqual(2);
    expect(delta('dunwall_readmodel_catchups_total')).toBeGreaterThanOrEqual(2);
    expect(value(after, 'dunwall_readmodel_catchup_failures_total')).toBe(0);
    expect(value(after, 'dunwall_readmodel_tenants')).toBe(1);
    expect(value(after, 'dunwall_readmodel_loads_total')).toBe(1);
    expect(value(after, 'dunwall_readmodel_index_bytes')).toBeGreaterThan(0);
    expect(value(after, 'dunwall_readmodel_listening')).toBe(1);
  });

  it('counts webhook events by type and outcome, and times the store', async () => {
    const e = event('invoice.payment_failed', invoice('cus_m3', { next_payment_attempt: null }), {
      created: Math.floor(h.clock.ms / 1000),
    });
    await deliver(h, 'acme-metrics', e, 'whsec_metrics_0123456789abcdef');
    await deliver(h, 'acme-metrics', e, 'whsec_metrics_0123456789abcdef');
    await deliver(
      h,
      'acme-metrics',
      event('product.created', { id: 'prod_1', object: 'product' }, { created: Math.floor(h.clock.ms / 1000) }),
      'whsec_metrics_0123456789abcdef',
    );
    const text = await scrape();
    expect(value(text, 'dunwall_webhook_events_total{type="invoice.payment_failed",outcome="applied"}')).toBe(1);
    expect(value(text, 'dunwall_webhook_events_total{type="invoice.payment_failed",outcome="duplicate"}')).toBe(1);
    expect(value(text, 'dunwall_webhook_events_total{type="other",outcome="irrelevant"}')).toBe(1);
    expect(value(text, 'dunwall_store_query_duration_seconds_count{operation="record_stripe_event"}')).toBe(3);
  });
});
