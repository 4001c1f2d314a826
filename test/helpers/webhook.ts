import type { LightMyRequestResponse } from 'fastify';
import { Webhook } from 'standardwebhooks';
import { vi } from 'vitest';
import type { Harness } from './harness.js';
import { signed } from './stripe-fixtures.js';
import type { StripeEventFixture } from './stripe-fixtures.js';

/** Sends a fixture to the webhook route as Stripe does: raw JSON, signed now (the fake clock) or at `timestampS`. */
export function deliver(
  h: Harness,
  slug: string,
  fixture: StripeEventFixture,
  secret: string,
  opts: { timestampS?: number; signature?: string; remoteAddress?: string } = {},
): Promise<LightMyRequestResponse> {
  const { payload, signature } = signed(fixture, secret, opts.timestampS ?? Math.floor(h.clock.ms / 1000));
  return h.app.inject({
    method: 'POST',
    url: `/webhooks/stripe/${slug}`,
    headers: { 'content-type': 'application/json; charset=utf-8', 'stripe-signature': opts.signature ?? signature },
    payload,
    ...(opts.remoteAddress ? { remoteAddress: opts.remoteAddress } : {}),
  });
}

/**
 * Verifies a received downstream webhook as a tenant would, with the Standard Webhooks
 * library, at the time the message was signed (the library refuses an old timestamp).
 */
export function verifyDelivery<T>(secret: string, r: { headers: Record<string, unknown>; body: string }): T {
  const headers = {
    'webhook-id': String(r.headers['webhook-id']),
    'webhook-timestamp': String(r.headers['webhook-timestamp']),
    'webhook-signature': String(r.headers['webhook-signature']),
  };
  vi.useFakeTimers({ toFake: ['Date'] });
  try {
    vi.setSystemTime(Number(headers['webhook-timestamp']) * 1000);
    return new Webhook(secret).verify(r.body, headers) as T;
  } finally {
    vi.useRealTimers();
  }
}
