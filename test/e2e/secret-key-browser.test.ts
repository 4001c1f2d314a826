import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readAdminTokenFile } from '../../src/runtime/admin-token.js';
import { loadConfig } from '../../src/runtime/config.js';
import { createLogger } from '../../src/runtime/logger.js';
import { start } from '../../src/runtime/server.js';
import type { Running } from '../../src/runtime/server.js';
import { Capture } from '../helpers/log-capture.js';

/**
 * A tenant's secret key sent from a browser (a request carrying `Origin`), to the service as
 * it runs, on a socket: refused 401 `secret_key_in_browser` as before, and now logged at warn
 * with the key's prefix and the origin (never the key), once a minute per key however many
 * come; counted in `/metrics`; marked on the key (`seen_in_browser_at`, `last_used_at`) and
 * named in the tenant's health, until the key is rotated. A key that is no tenant's is
 * refused the same and records nothing.
 */

const MESSAGE =
  'a secret key was sent from a browser and refused: treat it as leaked, rotate it and keep it on servers';
const ORIGIN = 'https://shop.example';
const FLOOD = 20;

interface Key {
  id: string;
  name: string;
  prefix: string;
  last_used_at: string | null;
  seen_in_browser_at: string | null;
}

describe('a secret key sent from a browser', () => {
  const logs = new Capture();
  let dataDir = '';
  let running: Running;
  let admin = '';
  let leaked = { id: '', secret: '' };
  let reader = '';

  async function call(
    path: string,
    init: { method?: string; token: string; origin?: string; body?: unknown },
  ): Promise<{ status: number; body: unknown }> {
    const res = await fetch(`${running.url}${path}`, {
      method: init.method ?? 'GET',
      headers: {
        authorization: `Bearer ${init.token}`,
        ...(init.origin === undefined ? {} : { origin: init.origin }),
        ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await res.text();
    return { status: res.status, body: text === '' ? null : (JSON.parse(text) as unknown) };
  }

  const sightings = () => logs.entries().filter((e) => e.msg === MESSAGE);
  const refusals = async () => {
    const res = await fetch(`${running.url}/metrics`, { signal: AbortSignal.timeout(10_000) });
    const line = (await res.text()).split('\n').find((l) => l.startsWith('dunwall_secret_key_browser_refusals_total '));
    return Number(line?.split(' ')[1]);
  };
  const keyOf = async (id: string) =>
    ((await call('/admin/v1/tenants/acme/keys', { token: admin })).body as { data: Key[] }).data.find(
      (k) => k.id === id,
    );
  const seenInHealth = async () =>
    (
      (await call('/v1/health', { token: reader })).body as {
        secret_keys: { seen_in_browser: { id: string; prefix: string; name: string }[] };
      }
    ).secret_keys.seen_in_browser;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'dunwall-browser-key-'));
    // Every refusal is a failed lookup of the address: no quota here, the flood is the point.
    const env = { DUNWALL_DATA_DIR: dataDir, PORT: '0', DUNWALL_DEMO: '0', DUNWALL_RATE_LIMIT_FAILURES_PER_IP: '0' };
    running = await start(loadConfig(env), createLogger('info', logs));
    admin = readAdminTokenFile(dataDir) ?? '';
    expect((await call('/admin/v1/tenants', { method: 'POST', token: admin, body: { slug: 'acme' } })).status).toBe(
      201,
    );
    const made = (
      await call('/admin/v1/tenants/acme/keys', {
        method: 'POST',
        token: admin,
        body: { name: 'checkout server', scopes: ['status:read'] },
      })
    ).body as { id: string; secret_key: string };
    leaked = { id: made.id, secret: made.secret_key };
    reader = (
      (
        await call('/admin/v1/tenants/acme/keys', {
          method: 'POST',
          token: admin,
          body: { name: 'ops', scopes: ['subscribers:read'] },
        })
      ).body as {
        secret_key: string;
      }
    ).secret_key;
  });
  afterAll(async () => {
    await running?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('is refused, logged once with its prefix and origin, counted each time, and marked on the key and in health', async () => {
    const before = await refusals();
    expect(await keyOf(leaked.id)).toMatchObject({ last_used_at: null, seen_in_browser_at: null });
    expect(await seenInHealth()).toEqual([]);

    const lookup = `/api/subscriber-status/acme?processor_customer_id=cus_1`;
    for (let i = 0; i < FLOOD; i += 1) {
      const res = await call(lookup, { token: leaked.secret, origin: ORIGIN });
      expect(res.status).toBe(401);
      expect((res.body as { code: string }).code).toBe('secret_key_in_browser');
    }
    // The tenant API refuses it from a browser too, and records it the same way.
    const v1 = await call('/v1/subscribers/cus_1/status', { token: leaked.secret, origin: ORIGIN });
    expect((v1.body as { code: string }).code).toBe('secret_key_in_browser');

    expect(await refusals()).toBe(before + FLOOD + 1);
    const lines = sightings();
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 40,
      tenant: 'acme',
      keyId: leaked.id,
      keyPrefix: leaked.secret.slice(0, 12),
      origin: ORIGIN,
    });
    // The prefix is what the key list shows; nothing past it is ever written.
    expect(logs.text).not.toContain(leaked.secret.slice(0, 13));

    // The mark is written after the refusals were answered: the flush waits for it.
    await running.flushCounters();
    const key = await keyOf(leaked.id);
    expect(key?.seen_in_browser_at).not.toBeNull();
    expect(key?.last_used_at).not.toBeNull();
    expect(await seenInHealth()).toEqual([
      {
        id: leaked.id,
        name: 'checkout server',
        prefix: leaked.secret.slice(0, 12),
        seen_in_browser_at: key?.seen_in_browser_at,
      },
    ]);

    // From a server (no Origin) the same key answers.
    expect((await call(lookup, { token: leaked.secret })).status).toBe(200);

    // Rotated, the leaked secret is replaced: the mark and the flag go.
    expect(
      (
        await call(`/admin/v1/tenants/acme/keys/${leaked.id}/rotate`, {
          method: 'POST',
          token: admin,
          body: { overlap_seconds: 0 },
        })
      ).status,
    ).toBe(200);
    expect((await keyOf(leaked.id))?.seen_in_browser_at).toBeNull();
    expect(await seenInHealth()).toEqual([]);
  });

  it('records nothing for a key that is no tenant’s', async () => {
    const before = await refusals();
    const logged = sightings().length;
    const res = await call('/api/subscriber-status/acme?processor_customer_id=cus_1', {
      token: `sk_test_${'x'.repeat(40)}`,
      origin: ORIGIN,
    });
    expect((res.body as { code: string }).code).toBe('secret_key_in_browser');
    expect(await refusals()).toBe(before);
    expect(sightings()).toHaveLength(logged);
  });
});
