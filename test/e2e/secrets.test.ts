import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { readAdminTokenFile } from '../../src/runtime/admin-token.js';
import { run } from '../../src/cli/run.js';
import { loadConfig } from '../../src/runtime/config.js';
import { computeHmac } from '../../src/domain/hmac.js';
import { createLogger } from '../../src/runtime/logger.js';
import { encryptionKeyId, parseEncryptionKey } from '../../src/secrets/cipher.js';
import { start } from '../../src/runtime/server.js';
import { Capture } from '../helpers/log-capture.js';
import { availableEngines, schemaScopedUrl } from '../helpers/engines.js';
import type { Engine } from '../helpers/engines.js';
import { event, invoice, signed } from '../helpers/stripe-fixtures.js';

const engines = await availableEngines();

class TextCapture {
  text = '';
  write(chunk: string): boolean {
    this.text += chunk;
    return true;
  }
}

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'dunwall-secrets-e2e-'));
  dirs.push(dir);
  return dir;
}
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function keyId(raw: Buffer): string {
  const key = parseEncryptionKey(raw.toString('hex'));
  if (key === null) throw new Error('test key refused');
  return encryptionKeyId(key);
}

/** The service's environment on this engine: an embedded folder, or a schema of its own on the server. */
async function placeFor(
  engine: Engine,
): Promise<{ env: Record<string, string>; dataDir: string; adminToken: string | null; drop(): Promise<void> }> {
  const dataDir = tempDir();
  if (engine.name === 'embedded')
    return { env: { DUNWALL_DATA_DIR: dataDir }, dataDir, adminToken: null, drop: async () => {} };
  const scoped = await schemaScopedUrl('dunwall_secrets_e2e');
  const adminToken = `dwa_${randomBytes(30).toString('base64url')}`;
  return {
    env: { DUNWALL_DATA_DIR: dataDir, DATABASE_URL: scoped.url, DUNWALL_ADMIN_TOKEN: adminToken },
    dataDir,
    adminToken,
    drop: () => scoped.drop(),
  };
}

describe.each(engines)(
  'a full run leaves no secret in the logs, the admin API or error bodies ($name)',
  (engine: Engine) => {
    it('exercises every surface, then searches everything it captured for every secret it used', async () => {
      const place = await placeFor(engine);
      const key = randomBytes(32);
      const oldKey = randomBytes(32);
      const env = {
        ...place.env,
        PORT: '0',
        LOG_LEVEL: 'trace',
        DUNWALL_LOG_LOOKUPS: '1',
        DUNWALL_DEMO: '0',
        DUNWALL_ENCRYPTION_KEY: key.toString('hex'),
        DUNWALL_ENCRYPTION_KEYS_OLD: oldKey.toString('base64'),
        // This run makes many failing calls from one address on purpose.
        DUNWALL_RATE_LIMIT_FAILURES_PER_IP: '0',
      };
      /** label -> value: every secret this run uses. */
      const secrets = new Map<string, string>([
        ['encryption key (hex)', key.toString('hex')],
        ['encryption key (HEX)', key.toString('hex').toUpperCase()],
        ['encryption key (base64)', key.toString('base64')],
        ['encryption key (base64url)', key.toString('base64url')],
        ['old encryption key (hex)', oldKey.toString('hex')],
        ['old encryption key (base64)', oldKey.toString('base64')],
        ['old encryption key (base64url)', oldKey.toString('base64url')],
      ]);
      /** What the admin API's GETs and every error answered. */
      const answers: { what: string; status: number; body: string }[] = [];

      let sentHmacs = 0;

      const logs = new Capture();
      const running = await start(loadConfig(env), createLogger('trace', logs));
      try {
        const adminToken = place.adminToken ?? readAdminTokenFile(place.dataDir) ?? '';
        expect(adminToken.length).toBeGreaterThanOrEqual(32);
        secrets.set('admin token', adminToken);

        const call = async (
          what: string,
          path: string,
          init: {
            method?: string;
            token?: string;
            json?: unknown;
            raw?: string;
            headers?: Record<string, string>;
          } = {},
        ) => {
          const res = await fetch(`${running.url}${path}`, {
            method: init.method ?? 'GET',
            headers: {
              ...(init.token === undefined ? {} : { authorization: `Bearer ${init.token}` }),
              ...(init.json === undefined && init.raw === undefined ? {} : { 'content-type': 'application/json' }),
              ...init.headers,
            },
            ...(init.json !== undefined
              ? { body: JSON.stringify(init.json) }
              : init.raw !== undefined
                ? { body: init.raw }
                : {}),
          });
          const body = await res.text();
          if (res.status >= 400 || (path.startsWith('/admin/') && (init.method ?? 'GET') === 'GET'))
            answers.push({ what, status: res.status, body });
          return { status: res.status, body, json: () => JSON.parse(body) as Record<string, unknown> };
        };
        const admin = (what: string, method: string, path: string, json?: unknown) =>
          call(what, `/admin/v1${path}`, { method, token: adminToken, ...(json === undefined ? {} : { json }) });

        // Tenants, keys and secrets: created, rotated, set.
        const acme = (await admin('create acme', 'POST', '/tenants', { slug: 'acme', hmac_required: true })).json();
        const beta = (await admin('create beta', 'POST', '/tenants', { slug: 'beta' })).json();
        const pk1 = String(acme.publishable_key);
        const hmac1 = String(acme.hmac_secret);
        secrets.set('acme publishable key 1', pk1).set('acme hmac secret 1', hmac1);
        secrets
          .set('beta publishable key', String(beta.publishable_key))
          .set('beta hmac secret', String(beta.hmac_secret));
        const pk2 = String(
          (await admin('rotate pk', 'POST', '/tenants/acme/rotate', { key: 'publishable' })).json().publishable_key,
        );
        const hmac2 = String(
          (await admin('rotate hmac', 'POST', '/tenants/acme/rotate', { key: 'hmac' })).json().hmac_secret,
        );
        secrets.set('acme publishable key 2', pk2).set('acme hmac secret 2', hmac2);
        const whsec1 = `whsec_${randomBytes(24).toString('base64url')}`;
        const whsec2 = `whsec_${randomBytes(24).toString('base64url')}`;
        const whsecWrong = `whsec_${randomBytes(24).toString('base64url')}`;
        secrets.set('whsec 1', whsec1).set('whsec 2', whsec2).set('whsec (wrong)', whsecWrong);
        expect((await admin('patch whsec 1', 'PATCH', '/tenants/acme', { stripe_webhook_secret: whsec1 })).status).toBe(
          200,
        );
        expect((await admin('patch whsec 2', 'PATCH', '/tenants/acme', { stripe_webhook_secret: whsec2 })).status).toBe(
          200,
        );

        // Signed webhooks: both current secrets verify, a wrong one and a forged header do not.
        const nowS = Math.floor(Date.now() / 1000);
        const webhook = async (what: string, secret: string, slug = 'acme') => {
          const { payload, signature } = signed(
            event('invoice.payment_failed', invoice('cus_paying', { next_payment_attempt: nowS + 3600 }), {
              created: nowS,
            }),
            secret,
            nowS,
          );
          secrets.set(`${what} signature`, /v1=([0-9a-f]{64})/.exec(signature)?.[1] ?? signature);
          return call(what, `/webhooks/stripe/${slug}`, {
            method: 'POST',
            raw: payload,
            headers: { 'stripe-signature': signature },
          });
        };
        expect((await webhook('webhook whsec 2', whsec2)).status).toBe(200);
        expect((await webhook('webhook whsec 1', whsec1)).status).toBe(200);
        expect((await webhook('webhook wrong whsec', whsecWrong)).status).toBe(400);
        expect((await webhook('webhook unknown tenant', whsec2, 'nobody')).status).toBe(404);
        expect(
          (
            await call('webhook garbage signature', '/webhooks/stripe/acme', {
              method: 'POST',
              raw: '{}',
              headers: { 'stripe-signature': `t=1,v1=${whsec2}` },
            })
          ).status,
        ).toBe(400);

        // Lookups: every key with every HMAC secret, wrong and missing HMACs, wrong bearers.
        const lookup = (what: string, token: string, hmac?: string, slug = 'acme') => {
          if (hmac !== undefined) {
            secrets.set(`hmac sent (${what})`, hmac);
            sentHmacs += 1;
          }
          return call(
            what,
            `/api/subscriber-status/${slug}?processor_customer_id=cus_paying${hmac === undefined ? '' : `&hmac=${hmac}`}`,
            { token },
          );
        };
        for (const [i, pk] of [pk1, pk2].entries()) {
          for (const [j, secret] of [hmac1, hmac2].entries()) {
            const res = await lookup(`pk${i + 1} hmac${j + 1}`, pk, computeHmac(secret, 'cus_paying'));
            expect(res.status).toBe(200);
            expect(res.json().status).toBe('warning');
          }
        }
        expect((await lookup('uppercase hmac', pk2, computeHmac(hmac2, 'cus_paying').toUpperCase())).status).toBe(200);
        expect((await lookup('wrong hmac', pk2, computeHmac(whsecWrong, 'cus_paying'))).json().code).toBe(
          'hmac_mismatch',
        );
        expect((await lookup('missing hmac', pk2)).json().code).toBe('hmac_required');
        expect(
          (await lookup('other tenant key', String(beta.publishable_key), computeHmac(hmac2, 'cus_paying'))).status,
        ).toBe(401);
        expect((await lookup('hmac secret as bearer', hmac2, computeHmac(hmac1, 'cus_other'))).status).toBe(401);
        expect((await lookup('admin token as bearer', adminToken)).status).toBe(401);

        // Admin reads: nothing secret comes back after creation.
        for (const path of [
          '/tenants',
          '/tenants/acme',
          '/tenants/beta',
          '/tenants/acme/subscribers/cus_paying',
          '/tiers',
        ]) {
          expect((await admin(`GET ${path}`, 'GET', path)).status).toBe(200);
        }
        // Admin errors: wrong tokens, bad bodies.
        for (const [what, token] of [
          ['publishable key as admin token', pk1],
          ['hmac secret as admin token', hmac1],
          ['whsec as admin token', whsec1],
          ['admin token with a suffix', `${adminToken}x`],
        ] as const) {
          const res = await call(what, '/admin/v1/tenants', { token });
          expect(res.status).toBe(401);
        }
        expect((await call('no admin token', '/admin/v1/tenants')).status).toBe(401);
        const whsecMalformed = `whsec_${randomBytes(12).toString('base64url')} !`;
        secrets.set('whsec (malformed)', whsecMalformed);
        expect(
          (await admin('bad whsec', 'PATCH', '/tenants/acme', { stripe_webhook_secret: whsecMalformed })).status,
        ).toBe(400);
        expect(
          (
            await call('broken json', '/admin/v1/tenants/acme', {
              method: 'PATCH',
              token: adminToken,
              raw: `{"stripe_webhook_secret": "${whsecWrong}"`,
            })
          ).status,
        ).toBe(400);
        expect((await admin('unknown field', 'PATCH', '/tenants/acme', { hmac_secret: hmac2 })).status).toBe(400);
        expect((await admin('bad rotate', 'POST', '/tenants/acme/rotate', { key: whsec1 })).status).toBe(400);
        expect((await admin('existing slug', 'POST', '/tenants', { slug: 'acme' })).status).toBe(409);
        expect(
          (await admin('unknown tenant', 'PATCH', '/tenants/nobody', { stripe_webhook_secret: whsecWrong })).status,
        ).toBe(404);
      } finally {
        await running.close();
      }

      // The re-encryption command, run as an operator would once the service is stopped.
      const stdout = new TextCapture();
      const stderr = new TextCapture();
      expect(await run(['secrets', 'reencrypt'], { stdout, stderr, stdin: Readable.from([]), env })).toBe(0);
      expect(stdout.text).toContain(`all stored secrets are encrypted under key ${keyId(key)}`);

      // A key that opens none of them: the service refuses to start, naming the key id only.
      let refusal = '';
      await start(
        loadConfig({ ...env, DUNWALL_ENCRYPTION_KEY: oldKey.toString('hex'), DUNWALL_ENCRYPTION_KEYS_OLD: '' }),
        createLogger('silent'),
      ).then(
        async (unexpected) => unexpected.close(),
        (err: unknown) => {
          refusal = (err as Error).message;
        },
      );
      expect(refusal).toContain(`stored secrets are encrypted under key id ${keyId(key)}, which is not configured`);
      if (engine.name === 'embedded') expect(existsSync(join(place.dataDir, 'pgdata.lock'))).toBe(false);
      await place.drop();

      // The search itself. The log must hold the run (or an empty log would pass).
      const entries = logs.entries();
      expect(entries.filter((e) => e.msg === 'tenant created')).toHaveLength(2);
      expect(entries.some((e) => e.msg === 'secrets encrypted at rest' && e.keyId === keyId(key))).toBe(true);
      expect(entries.some((e) => e.level === 40 && String(e.msg).includes('stored in clear'))).toBe(false);
      const loggedLookups = entries.filter(
        (e) =>
          e.msg === 'incoming request' &&
          String((e.req as { url?: string } | undefined)?.url).includes('hmac=[redacted]'),
      );
      expect(loggedLookups).toHaveLength(sentHmacs);
      expect(answers.filter((a) => a.status >= 400).length).toBeGreaterThanOrEqual(15);

      const searched: [string, string][] = [
        ['logs', logs.text],
        ['cli stdout', stdout.text],
        ['cli stderr', stderr.text],
        ['refusal', refusal],
        ...answers.map((a): [string, string] => [`${a.what} (${a.status})`, a.body]),
      ];
      const leaks = [...secrets].flatMap(([label, value]) =>
        searched.filter(([, text]) => text.includes(value)).map(([where]) => `${label} in ${where}`),
      );
      console.log(
        `secrets search (${engine.name}): ${secrets.size} secrets searched for in ${entries.length} log lines ` +
          `(${logs.text.length} bytes) and ${answers.length} answers, ${leaks.length} found`,
      );
      expect(leaks).toEqual([]);
    });
  },
);

describe('without DUNWALL_ENCRYPTION_KEY', () => {
  it('stores secrets in clear as before, and says so once at boot', async () => {
    const logs = new Capture();
    const running = await start(
      loadConfig({ DUNWALL_DATA_DIR: tempDir(), PORT: '0', DUNWALL_DEMO: '0' }),
      createLogger('info', logs),
    );
    await running.close();
    const warnings = logs.entries().filter((e) => e.level === 40 && String(e.msg).includes('DUNWALL_ENCRYPTION_KEY'));
    expect(warnings.map((e) => e.msg)).toEqual([
      'DUNWALL_ENCRYPTION_KEY is not set: HMAC, Stripe and webhook signing secrets are stored in clear; set it in production',
    ]);
  });
});
