import type { LightMyRequestResponse } from 'fastify';
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
