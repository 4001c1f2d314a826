// lib/dunwall.ts: server only (a layout or a page imports it, never a 'use client' file).
import { createDunwall } from '@dunwall/node';
import type { DunwallCopy } from '@dunwall/node';

// One copy per server process, following Dunwall's status feed. Kept on globalThis so that
// the development server's reloads of this file reuse it instead of opening another.
const kept = globalThis as typeof globalThis & { dunwall?: DunwallCopy };

export const dunwall = (kept.dunwall ??= createDunwall({
  baseUrl: process.env.DUNWALL_URL ?? '',
  // Secrets, from your secret store: a secret key with status:read, and the tenant's HMAC secret.
  secretKey: process.env.DUNWALL_SECRET_KEY ?? '',
  hmacSecret: process.env.DUNWALL_HMAC_SECRET,
}));
