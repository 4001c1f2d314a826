// lib/dunwall.ts: server only (a layout or a page imports it, never a 'use client' file).
import type { BillingBootstrap } from '@dunwall/react';

/** What the layout gives <Billing>: who is signed in, their hmac, and Dunwall's answer. */
export interface BillingBootstrapProps {
  customer: string;
  hmac: string | null;
  bootstrap: BillingBootstrap | null;
}

// A page waits for this at most: past it, the page renders without a bootstrap.
const TIMEOUT_MS = 1_500;
const STATUSES = ['active', 'warning', 'lockout'];

/**
 * Asks Dunwall, server to server, for the signed-in customer's status (with the invoice's
 * pay link), and signs the customer id for the browser's own lookup. Fails open: on any
 * error the page renders without a bootstrap, and the browser asks Dunwall itself.
 */
export async function getBillingBootstrap(customerId: string): Promise<BillingBootstrapProps> {
  const [hmac, bootstrap] = await Promise.all([sign(customerId).catch(() => null), ask(customerId)]);
  return { customer: customerId, hmac, bootstrap };
}

async function ask(customerId: string): Promise<BillingBootstrap | null> {
  const url = process.env.DUNWALL_URL;
  const secretKey = process.env.DUNWALL_SECRET_KEY;
  if (!url || !secretKey) return null;
  try {
    const res = await fetch(`${url.replace(/\/+$/, '')}/v1/subscribers/${encodeURIComponent(customerId)}/status`, {
      headers: { authorization: `Bearer ${secretKey}` },
      // One customer's answer (with their invoice's link): never in a shared cache.
      cache: 'no-store',
      signal: AbortSignal.timeout(TIMEOUT_MS),
    });
    if (!res.ok) return null;
    const answer = (await res.json()) as BillingBootstrap;
    if (!STATUSES.includes(answer?.status)) return null;
    // `at`: an answer the browser got later from Dunwall, or kept from one, outranks this one.
    return { ...answer, at: Date.now() };
  } catch {
    return null;
  }
}

/** Hex HMAC-SHA256 of the customer id under the tenant's HMAC secret (Web Crypto: Node.js or the Edge). */
async function sign(customerId: string): Promise<string | null> {
  const secret = process.env.DUNWALL_HMAC_SECRET;
  if (!secret) return null;
  const encoder = new TextEncoder();
  const key = await crypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const mac = new Uint8Array(await crypto.subtle.sign('HMAC', key, encoder.encode(customerId)));
  return Array.from(mac, (b) => b.toString(16).padStart(2, '0')).join('');
}
