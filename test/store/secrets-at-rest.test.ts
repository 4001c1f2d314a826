import { createSecretKey, randomBytes } from 'node:crypto';
import { tenantAuth } from '../helpers/store-fixtures.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computeHmac } from '../../src/domain/hmac.js';
import { buildAppWithModel } from '../helpers/harness.js';
import type { App } from '../../src/http/app.js';
import { run } from '../../src/cli/run.js';
import { sha256 } from '../../src/domain/keys.js';
import { SecretBox, SecretDecryptionError, encryptionKeyId } from '../../src/secrets/cipher.js';
import { openDb, openStore, storeOver } from '../../src/store/index.js';
import type { Db, Store, StoreTarget } from '../../src/store/index.js';
import { assertSecretKeysKnown } from '../../src/store/maintenance/secrets-at-rest.js';
import { availableEngines, schemaScopedUrl } from '../helpers/engines.js';
import type { Engine } from '../helpers/engines.js';
import { event, invoice, signed } from '../helpers/stripe-fixtures.js';

const engines = await availableEngines();

const RAW_A = randomBytes(32);
const RAW_B = randomBytes(32);
const RAW_C = randomBytes(32);
const KEY_A = createSecretKey(RAW_A);
const KEY_B = createSecretKey(RAW_B);
const ID_A = encryptionKeyId(KEY_A);
const ID_B = encryptionKeyId(KEY_B);
const ADMIN_TOKEN = 'secrets-test-admin-token-0123456789abcdefgh';
const T0_MS = Date.parse('2026-01-01T00:00:00Z');
const WHSEC_1 = `whsec_${randomBytes(24).toString('base64url')}`;
const WHSEC_2 = `whsec_${randomBytes(24).toString('base64url')}`;

/** Every spelling of a raw key that must never show up anywhere. */
function spellings(raw: Buffer): string[] {
  return [raw.toString('hex'), raw.toString('base64'), raw.toString('base64url')];
}

interface CredentialRow {
  tenant_id: number;
  kind: string;
  key_hash: string | null;
  secret: string | null;
}

function credentials(db: Db): Promise<CredentialRow[]> {
  return db.query<CredentialRow>('SELECT tenant_id, kind, key_hash, secret FROM tenant_credentials ORDER BY id');
}

/** The app as in production, over a store that seals its secrets under key A. */
describe.each(engines)('secrets at rest, through the API ($name)', (engine: Engine) => {
  let opened: Awaited<ReturnType<Engine['open']>>;
  let store: Store;
  let app: App;
  const nowMs = T0_MS;

  const admin = (method: string, url: string, body?: unknown) =>
    app.inject({
      method: method as 'GET',
      url: `/admin/v1${url}`,
      headers: {
        authorization: `Bearer ${ADMIN_TOKEN}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
    });
  const lookup = (slug: string, key: string, customer: string, hmac?: string) =>
    app.inject({
      method: 'GET',
      url: `/api/subscriber-status/${slug}?processor_customer_id=${customer}${hmac === undefined ? '' : `&hmac=${hmac}`}`,
      headers: { authorization: `Bearer ${key}` },
    });
  const deliver = (slug: string, secret: string) => {
    const { payload, signature } = signed(
      event(
        'invoice.payment_failed',
        invoice('cus_paying', { next_payment_attempt: Math.floor(nowMs / 1000) + 3600 }),
        { created: Math.floor(nowMs / 1000) },
      ),
      secret,
      Math.floor(nowMs / 1000),
    );
    return app.inject({
      method: 'POST',
      url: `/webhooks/stripe/${slug}`,
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      payload,
    });
  };

  beforeAll(async () => {
    opened = await engine.open();
    store = storeOver(opened.db, { secrets: new SecretBox({ current: KEY_A }) });
    app = await buildAppWithModel({ store, adminTokenSha256: sha256(ADMIN_TOKEN), now: () => nowMs });
    await app.ready();
  });
  afterAll(async () => {
    await app.close();
    await opened.cleanup();
  });

  it('keeps no HMAC or Stripe signing secret in clear; lookups and webhooks verify as before', async () => {
    const created = await admin('POST', '/tenants', { slug: 'acme', hmac_required: true });
    expect(created.statusCode).toBe(201);
    const { publishable_key: key, hmac_secret: firstSecret } = created.json<{
      publishable_key: string;
      hmac_secret: string;
    }>();
    expect((await admin('PATCH', '/tenants/acme', { stripe_webhook_secret: WHSEC_1 })).statusCode).toBe(200);
    expect((await admin('PATCH', '/tenants/acme', { stripe_webhook_secret: WHSEC_2 })).statusCode).toBe(200);
    const rotated = await admin('POST', '/tenants/acme/rotate', { key: 'hmac' });
    const secondSecret = rotated.json<{ hmac_secret: string }>().hmac_secret;

    const rows = await credentials(opened.db);
    expect(rows.map((r) => r.kind).sort()).toEqual([
      'hmac_secret',
      'hmac_secret',
      // The live and the test mode's.
      'publishable_key',
      'publishable_key',
      'stripe_webhook_secret',
      'stripe_webhook_secret',
    ]);
    const raw = JSON.stringify(rows);
    for (const secret of [key, firstSecret, secondSecret, WHSEC_1, WHSEC_2, ...spellings(RAW_A)])
      expect(raw).not.toContain(secret);
    for (const row of rows) {
      if (row.kind === 'publishable_key') expect(row.key_hash).toMatch(/^[0-9a-f]{64}$/);
      else expect(row.secret).toMatch(new RegExp(`^enc:v1:${ID_A}:[A-Za-z0-9_-]+$`));
    }

    // Both HMAC secrets verify during the overlap; a wrong digest does not.
    for (const secret of [firstSecret, secondSecret]) {
      const res = await lookup('acme', key, 'cus_paying', computeHmac(secret, 'cus_paying'));
      expect(res.statusCode).toBe(200);
    }
    expect((await lookup('acme', key, 'cus_paying', computeHmac('not-the-secret', 'cus_paying'))).json().code).toBe(
      'hmac_mismatch',
    );

    // Both signing secrets verify during the overlap; another one does not.
    expect((await deliver('acme', WHSEC_2)).statusCode).toBe(200);
    expect((await deliver('acme', WHSEC_1)).statusCode).toBe(200);
    const forged = await deliver('acme', `whsec_${randomBytes(24).toString('base64url')}`);
    expect(forged.statusCode).toBe(400);
    expect(forged.json().code).toBe('invalid_signature');
    const status = await lookup('acme', key, 'cus_paying', computeHmac(secondSecret, 'cus_paying'));
    expect(status.json()).toMatchObject({ status: 'warning' });
  });

  it('a sealed secret copied to another tenant or another kind does not open', async () => {
    const beta = await admin('POST', '/tenants', { slug: 'beta' });
    expect(beta.statusCode).toBe(201);
    const [acme] = await opened.db.query<{ id: number }>("SELECT id FROM tenants WHERE slug = 'acme'");
    const [betaRow] = await opened.db.query<{ id: number }>("SELECT id FROM tenants WHERE slug = 'beta'");
    const acmeId = acme?.id ?? -1;
    const betaId = betaRow?.id ?? -1;
    await opened.db.query(
      `UPDATE tenant_credentials SET secret = (SELECT secret FROM tenant_credentials WHERE tenant_id = $1 AND kind = 'hmac_secret' ORDER BY id LIMIT 1)
       WHERE tenant_id = $2 AND kind = 'hmac_secret'`,
      [acmeId, betaId],
    );
    await expect(tenantAuth(store.changes, 'beta')).rejects.toThrow(`hmac_secret of tenant ${betaId}`);
    // An HMAC secret's ciphertext set as a signing secret of its own tenant: the kind is bound too.
    await opened.db.query(
      `INSERT INTO tenant_credentials (tenant_id, kind, secret, created_at)
       SELECT tenant_id, 'stripe_webhook_secret', secret, now() FROM tenant_credentials WHERE tenant_id = $1 AND kind = 'hmac_secret' ORDER BY id LIMIT 1`,
      [acmeId],
    );
    await expect(store.stripe.getStripeSigningSecrets('acme')).rejects.toThrow(SecretDecryptionError);
    // A format this version does not know stops the boot check too, rather than passing as clear text.
    await opened.db.query(
      `UPDATE tenant_credentials SET secret = 'enc:v2:0123abcd:AAAA' WHERE tenant_id = $1 AND kind = 'stripe_webhook_secret'`,
      [acmeId],
    );
    await expect(assertSecretKeysKnown(opened.db, new SecretBox({ current: KEY_A }))).rejects.toThrow(
      'in an unknown format',
    );
  });
});

/** A store target that can be closed and opened again (an embedded one on disk). */
async function reopenableTarget(
  engine: Engine,
): Promise<{ target: StoreTarget; env: Record<string, string>; drop(): Promise<void> }> {
  if (engine.name === 'embedded') {
    const dir = mkdtempSync(join(tmpdir(), 'dunwall-secrets-'));
    return {
      target: { engine: 'embedded', dataDir: join(dir, 'pgdata') },
      env: { DUNWALL_DATA_DIR: dir },
      async drop() {
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }
  const scoped = await schemaScopedUrl('dunwall_secrets');
  return {
    target: { engine: 'postgres', url: scoped.url },
    env: { DATABASE_URL: scoped.url },
    drop: () => scoped.drop(),
  };
}

class Capture {
  text = '';
  write(chunk: string): boolean {
    this.text += chunk;
    return true;
  }
}

async function dunwall(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout = new Capture();
  const stderr = new Capture();
  const code = await run(args, { stdout, stderr, stdin: Readable.from([]), env });
  return { code, stdout: stdout.text, stderr: stderr.text };
}

async function withStore<T>(target: StoreTarget, secrets: SecretBox, fn: (store: Store) => Promise<T>): Promise<T> {
  const store = await openStore(target, { secrets });
  try {
    return await fn(store);
  } finally {
    await store.close();
  }
}

const newTenant = (slug: string, hmacSecret: string) => ({
  slug,
  tier: 'starter',
  cardUpdateUrl: null,
  hmacRequired: false,
  allowedOrigins: null,
  lookupsPerMinute: null,
  publishableKeyHash: sha256(`pk_${slug}_0000000000000000000000000`).toString('hex'),
  hmacSecret,
});

describe.each(engines)('turning encryption on, and rotating the key ($name)', (engine: Engine) => {
  let place: Awaited<ReturnType<typeof reopenableTarget>>;
  const clearHmac = randomBytes(32).toString('base64url');
  const clearWhsec = `whsec_${randomBytes(24).toString('base64url')}`;
  const sealedHmac = randomBytes(32).toString('base64url');
  const sealedWhsec = `whsec_${randomBytes(24).toString('base64url')}`;
  const T = new Date(T0_MS);
  const boxA = new SecretBox({ current: KEY_A });
  const boxB = new SecretBox({ current: KEY_B });

  beforeAll(async () => {
    place = await reopenableTarget(engine);
  });
  afterAll(() => place.drop());

  const hmacsOf = async (store: Store, slug: string) =>
    (await tenantAuth(store.changes, slug))?.hmacKeys.map((k) => k.value.sign('cus_probe').toString('hex'));
  const whsecsOf = async (store: Store, slug: string) =>
    (await store.stripe.getStripeSigningSecrets(slug))?.spaces.live.secrets.map((s) => s.value);

  it('reads secrets written in clear before the key was set; writes new ones sealed', async () => {
    await withStore(place.target, SecretBox.clear(), async (store) => {
      expect((await store.tenants.createTenant(newTenant('legacy', clearHmac), T)).ok).toBe(true);
      expect(
        (
          await store.tenants.updateTenant('legacy', {}, T, {
            kind: 'stripe_webhook_secret',
            material: clearWhsec,
            overlapS: 60,
          })
        ).ok,
      ).toBe(true);
    });
    await withStore(place.target, boxA, async (store) => {
      expect(await hmacsOf(store, 'legacy')).toEqual([computeHmac(clearHmac, 'cus_probe')]);
      expect(await whsecsOf(store, 'legacy')).toEqual([clearWhsec]);
      expect((await store.tenants.createTenant(newTenant('fresh', sealedHmac), T)).ok).toBe(true);
      expect(
        (
          await store.tenants.updateTenant('fresh', {}, T, {
            kind: 'stripe_webhook_secret',
            material: sealedWhsec,
            overlapS: 60,
          })
        ).ok,
      ).toBe(true);
      expect(await hmacsOf(store, 'fresh')).toEqual([computeHmac(sealedHmac, 'cus_probe')]);
    });
    const db = await openDb(place.target);
    try {
      const rows = await db.query<{ slug: string; secret: string }>(
        'SELECT t.slug, c.secret FROM tenant_credentials c JOIN tenants t ON t.id = c.tenant_id WHERE c.secret IS NOT NULL ORDER BY c.id',
      );
      expect(rows.map((r) => [r.slug, r.secret.startsWith(`enc:v1:${ID_A}:`)])).toEqual([
        ['legacy', false],
        ['legacy', false],
        ['fresh', true],
        ['fresh', true],
      ]);
      expect(await assertSecretKeysKnown(db, boxA)).toEqual({ clear: 2, byKeyId: new Map([[ID_A, 2]]), unreadable: 0 });
    } finally {
      await db.close();
    }
  });

  it('refuses to open a store whose secrets are under a key it was not given, naming the key id only', async () => {
    const attempt = openStore(place.target, { secrets: boxB });
    await expect(attempt).rejects.toThrow(`stored secrets are encrypted under key id ${ID_A}, which is not configured`);
    const message = await attempt.then(
      () => '',
      (err: unknown) => (err as Error).message,
    );
    for (const text of [...spellings(RAW_A), ...spellings(RAW_B)]) expect(message).not.toContain(text);
    // The folder (or the connection) is released after the refusal: it opens again at once.
    await withStore(place.target, new SecretBox({ current: KEY_B, previous: [KEY_A] }), async (store) => {
      expect(await hmacsOf(store, 'fresh')).toEqual([computeHmac(sealedHmac, 'cus_probe')]);
    });
  });

  it('dunwall secrets reencrypt moves every secret to the new key in one go, printing counts only', async () => {
    const env = {
      ...place.env,
      DUNWALL_ENCRYPTION_KEY: RAW_B.toString('hex'),
      DUNWALL_ENCRYPTION_KEYS_OLD: RAW_A.toString('base64'),
    };
    const first = await dunwall(['secrets', 'reencrypt', '--json'], env);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    expect(JSON.parse(first.stdout)).toEqual({ key_id: ID_B, encrypted: 2, reencrypted: 2, unchanged: 0 });
    const again = await dunwall(['secrets', 'reencrypt'], env);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain(`all stored secrets are encrypted under key ${ID_B}`);
    expect(again.stdout).toContain('4 already under this key');
    for (const out of [first.stdout, again.stdout]) {
      for (const secret of [clearHmac, clearWhsec, sealedHmac, sealedWhsec, ...spellings(RAW_A), ...spellings(RAW_B)])
        expect(out).not.toContain(secret);
    }

    // Old key alone: refused at boot, naming the new key's id.
    await expect(openStore(place.target, { secrets: boxA })).rejects.toThrow(`key id ${ID_B}, which is not configured`);
    await withStore(place.target, boxB, async (store) => {
      expect(await hmacsOf(store, 'legacy')).toEqual([computeHmac(clearHmac, 'cus_probe')]);
      expect(await whsecsOf(store, 'legacy')).toEqual([clearWhsec]);
      expect(await hmacsOf(store, 'fresh')).toEqual([computeHmac(sealedHmac, 'cus_probe')]);
      expect(await whsecsOf(store, 'fresh')).toEqual([sealedWhsec]);
    });
  });

  it('reencrypt refuses without a key, or when a stored secret is under a key it does not have, changing nothing', async () => {
    const noKey = await dunwall(['secrets', 'reencrypt'], { ...place.env });
    expect(noKey.code).toBe(2);
    expect(noKey.stderr).toMatch(/^dunwall: secrets reencrypt needs DUNWALL_ENCRYPTION_KEY/);

    const badKey = await dunwall(['secrets', 'reencrypt'], {
      ...place.env,
      DUNWALL_ENCRYPTION_KEY: 'not-a-key-at-all',
    });
    expect(badKey.code).toBe(2);
    expect(badKey.stderr).not.toContain('not-a-key-at-all');

    const wrong = await dunwall(['secrets', 'reencrypt'], {
      ...place.env,
      DUNWALL_ENCRYPTION_KEY: RAW_C.toString('hex'),
    });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toBe(
      `dunwall: secrets reencrypt failed, nothing was changed: stored secrets are encrypted under key id ${ID_B}, which is not configured: set that key in DUNWALL_ENCRYPTION_KEY or DUNWALL_ENCRYPTION_KEYS_OLD\n`,
    );
    for (const text of [...spellings(RAW_B), ...spellings(RAW_C)]) expect(wrong.stderr).not.toContain(text);

    const db = await openDb(place.target);
    try {
      const census = await assertSecretKeysKnown(db, boxB);
      expect(census).toEqual({ clear: 0, byKeyId: new Map([[ID_B, 4]]), unreadable: 0 });
      const rows = await credentials(db);
      for (const row of rows.filter((r) => r.kind !== 'publishable_key'))
        expect(row.secret).toMatch(new RegExp(`^enc:v1:${ID_B}:`));
    } finally {
      await db.close();
    }
  });
});
