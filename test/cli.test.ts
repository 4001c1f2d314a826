import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildAppWithModel } from './helpers/harness.js';
import type { App } from '../src/http/app.js';
import { KeyUsage } from '../src/http/key-usage.js';
import { SCOPES } from '../src/domain/keys.js';
import { run } from '../src/cli/run.js';
import { openStore } from '../src/store/index.js';
import type { Store } from '../src/store/index.js';
import { charge, event, invoice } from './helpers/stripe-fixtures.js';
import { DownstreamDeliverer } from '../src/downstream/index.js';
import { escapeControls } from '../src/domain/validation.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TOKEN = 'cli-test-admin-token-0123456789abcdefghijkl';
const WEBHOOK_SECRET = 'whsec_cliTestSecret0123456789';

let store: Store;
let app: App;
let url: string;
const keyUsage = new KeyUsage();

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

class Capture {
  text = '';
  write(chunk: string): boolean {
    this.text += chunk;
    return true;
  }
}

type Env = Record<string, string | undefined>;

function defaultEnv(): Env {
  return { DUNWALL_URL: url, DUNWALL_ADMIN_TOKEN: TOKEN };
}

/** The CLI in-process, as `dunwall <args>` would run it. */
async function cli(args: string[], options: { env?: Env; stdin?: string } = {}): Promise<Result> {
  const stdout = new Capture();
  const stderr = new Capture();
  const code = await run(args, {
    stdout,
    stderr,
    stdin: Readable.from(options.stdin === undefined ? [] : [options.stdin]),
    env: options.env ?? defaultEnv(),
  });
  return { code, stdout: stdout.text, stderr: stderr.text };
}

/**
 * The real CLI in a child process. Asynchronous on purpose: spawnSync would block this
 * process's event loop, and with it the in-process server the child talks to.
 */
function spawnCli(args: string[], options: { env?: Env; stdin?: string } = {}): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
      cwd: ROOT,
      env: { ...process.env, ...(options.env ?? defaultEnv()) },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(options.stdin ?? '');
  });
}

function lines(text: string): string[] {
  return text.split('\n').filter((line) => line !== '');
}

/** A port nothing listens on: bound, then released. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

function parseJson<T>(text: string): T {
  return JSON.parse(text) as T;
}

interface TenantJson {
  slug: string;
  tier: string;
  suspended: boolean;
  hmac_required: boolean;
  card_update_url: string | null;
  allowed_origins: string[] | null;
  livemode?: boolean | null;
  publishable_key?: string;
  hmac_secret?: string;
  previous_expires_at?: string;
}

async function createTenant(slug: string, extra: string[] = []): Promise<TenantJson> {
  const created = await cli(['tenant', 'create', slug, '--json', ...extra]);
  expect(created.stderr).toBe('');
  expect(created.code).toBe(0);
  return parseJson<TenantJson>(created.stdout);
}

async function lookup(
  slug: string,
  key: string,
  customer: string,
): Promise<{ status: number; body: { status?: string; code?: string } }> {
  const res = await fetch(`${url}/api/subscriber-status/${slug}?processor_customer_id=${customer}`, {
    headers: { authorization: `Bearer ${key}` },
  });
  return { status: res.status, body: (await res.json()) as { status?: string; code?: string } };
}

beforeAll(async () => {
  store = await openStore({ engine: 'embedded', dataDir: null });
  app = await buildAppWithModel({ store, adminToken: TOKEN, keyUsage });
  const address = await app.listen({ port: 0, host: '127.0.0.1' });
  url = address;
  // A tenant every test may read; the child-process tests create their own (acme).
  await createTenant('base');
});

afterAll(async () => {
  await app?.close();
  await store?.close();
});

describe('dunwall as a child process', () => {
  it('creates a tenant, sets a subscriber, and the lookup answers with that status', async () => {
    const created = await spawnCli(['tenant', 'create', 'acme', '--json']);
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    const tenant = parseJson<TenantJson>(created.stdout);
    expect(tenant.slug).toBe('acme');
    expect(tenant.publishable_key).toMatch(/^pk_live_[A-Za-z0-9]{24,}$/);
    expect(tenant.hmac_secret).toBeTruthy();

    const set = await spawnCli(['subscriber', 'set', '--tenant', 'acme', 'cus_123', 'lockout']);
    expect(set.stderr).toBe('');
    expect(set.code).toBe(0);
    expect(set.stdout).toMatch(/^status:\s+lockout$/m);

    const res = await fetch(`${url}/api/subscriber-status/acme?processor_customer_id=cus_123`, {
      headers: { Authorization: `Bearer ${tenant.publishable_key ?? ''}` },
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { status: string }).status).toBe('lockout');
  });

  it('reads --stripe-webhook-secret - from the process stdin, and reports errors on one line', async () => {
    const spy = vi.spyOn(store.tenants, 'updateTenant');
    try {
      const updated = await spawnCli(['tenant', 'update', 'acme', '--stripe-webhook-secret', '-'], {
        stdin: `${WEBHOOK_SECRET}\n`,
      });
      expect(updated.stderr).toBe('');
      expect(updated.code).toBe(0);
      expect(
        spy.mock.calls.some((call) => call[3]?.kind === 'stripe_webhook_secret' && call[3].material === WEBHOOK_SECRET),
      ).toBe(true);
    } finally {
      spy.mockRestore();
    }

    const missing = await spawnCli(['tenant', 'show', 'nope']);
    expect(missing.code).toBe(1);
    expect(missing.stdout).toBe('');
    expect(missing.stderr).toBe('dunwall: tenant_not_found: No tenant has this slug.\n');
  });
});

describe('dunwall tenant', () => {
  it('creates a tenant and flags its keys as shown once', async () => {
    const created = await cli([
      'tenant',
      'create',
      'globex',
      '--tier',
      'growth',
      '--card-update-url',
      'https://billing.globex.example/card',
      '--hmac-required',
      'true',
      '--allowed-origins',
      'https://app.globex.example,https://www.globex.example',
    ]);
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    const out = created.stdout;
    expect(out).toMatch(/^slug:\s+globex$/m);
    expect(out).toMatch(/^tier:\s+growth$/m);
    expect(out).toMatch(/^entitlements:\s+powered_by_watermark=false custom_domain=true downstream_webhooks=false$/m);
    expect(out).toMatch(/^card_update_url:\s+https:\/\/billing\.globex\.example\/card$/m);
    expect(out).toMatch(/^hmac_required:\s+true$/m);
    expect(out).toMatch(/^allowed_origins:\s+https:\/\/app\.globex\.example, https:\/\/www\.globex\.example$/m);
    expect(out).toMatch(/shown only once/i);
    expect(out).toMatch(/^publishable_key:\s+pk_live_[A-Za-z0-9]{24,}$/m);
    expect(out).toMatch(/^test_publishable_key:\s+pk_test_[A-Za-z0-9]{24,}$/m);
    expect(out).toMatch(/^hmac_secret:\s+\S{32,}$/m);
    expect(out).not.toContain(TOKEN);
  });

  it('lists and shows tenants, as tables and key: value lines, or as JSON', async () => {
    await createTenant('initech');

    const list = await cli(['tenant', 'list']);
    expect(list.code).toBe(0);
    const [header, ...rows] = lines(list.stdout);
    expect(header).toMatch(/^SLUG\s+TIER\s+SUSPENDED\s+HMAC_REQUIRED\s+CARD_UPDATE_URL\s+CREATED_AT$/);
    expect(rows.some((row) => /^initech\s+starter\s+false\s+false\s+-\s+\d{4}-/.test(row))).toBe(true);

    const listJson = await cli(['--json', 'tenant', 'list']);
    expect(listJson.code).toBe(0);
    const data = parseJson<{ data: TenantJson[] }>(listJson.stdout).data;
    expect(data.map((t) => t.slug)).toContain('initech');
    expect(listJson.stdout).toBe(`${JSON.stringify({ data }, null, 2)}\n`);

    const show = await cli(['tenant', 'show', 'initech']);
    expect(show.code).toBe(0);
    expect(show.stdout).toMatch(/^slug:\s+initech$/m);
    expect(show.stdout).toMatch(/^card_update_url:\s+\(none\)$/m);
    expect(show.stdout).toMatch(/^allowed_origins:\s+\(any\)$/m);
    expect(show.stdout).not.toMatch(/publishable_key|hmac_secret/);
    // Values are aligned in one column.
    const columns = new Set(lines(show.stdout).map((line) => line.search(/(?<=:\s+)\S/)));
    expect(columns.size).toBe(1);

    const showJson = await cli(['tenant', 'show', 'initech', '--json']);
    expect(parseJson<TenantJson>(showJson.stdout)).toMatchObject({
      slug: 'initech',
      tier: 'starter',
      suspended: false,
    });
  });

  it('shows a tenant with its subscribers by status and its credentials in force, never their values', async () => {
    const t = (await createTenant('shown-co')) as TenantJson & { publishable_key: string; hmac_secret: string };
    for (const [id, status] of [
      ['cus_s1', 'lockout'],
      ['cus_s2', 'lockout'],
      ['cus_s3', 'warning'],
    ] as const)
      expect((await cli(['subscriber', 'set', '--tenant', 'shown-co', id, status])).code).toBe(0);
    await cli(['tenant', 'rotate', 'shown-co', '--key', 'publishable']);
    const show = await cli(['tenant', 'show', 'shown-co']);
    expect(show.code).toBe(0);
    expect(show.stdout).toMatch(/^subscribers:\s+3 \(active 0, warning 1, lockout 2\)$/m);
    expect(show.stdout).toMatch(/^stripe_webhook:\s+no signing secret/m);
    expect(show.stdout).toMatch(
      /^credentials:\s+HMAC secret \(current\), publishable key \(replaced, works until \d{4}-[^)]+\), publishable key \(current\)$/m,
    );
    expect(show.stdout).not.toContain(t.publishable_key);
    expect(show.stdout).not.toContain(t.hmac_secret);
  });

  it('sets the branding from a JSON file or stdin, and shows what is set', async () => {
    await createTenant('branded-co');
    const dir = mkdtempSync(join(tmpdir(), 'dunwall-branding-'));
    try {
      const file = join(dir, 'branding.json');
      writeFileSync(
        file,
        JSON.stringify({
          payment_url: 'https://pay.branded.test/',
          texts: { default: { gate_action: 'Pay' }, fr: { gate_action: 'Payer' } },
        }),
      );
      const set = await cli(['tenant', 'update', 'branded-co', '--branding-file', file]);
      expect([set.code, set.stderr]).toEqual([0, '']);
      expect(set.stdout).toMatch(/^branding:\s+payment link, texts: default, fr$/m);
      const bad = await cli(['tenant', 'update', 'branded-co', '--branding-file', '-'], {
        stdin: '{"payment_url":"http://x.test/"}',
      });
      expect([bad.code, bad.stderr]).toEqual([
        1,
        expect.stringContaining('branding.payment_url: must be an https URL'),
      ]);
      const notJson = await cli(['tenant', 'update', 'branded-co', '--branding-file', '-'], { stdin: 'nope' });
      expect([notJson.code, notJson.stderr]).toEqual([
        2,
        expect.stringContaining('--branding-file: stdin is not JSON'),
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('lists subscribers by status a page at a time, or every page with --all', async () => {
    await createTenant('listed-co');
    for (let i = 0; i < 5; i += 1)
      await cli(['subscriber', 'set', '--tenant', 'listed-co', `cus_l${i}`, i < 3 ? 'lockout' : 'warning']);
    const first = await cli(['subscriber', 'list', '--tenant', 'listed-co', '--status', 'lockout', '--limit', '2']);
    expect(first.code).toBe(0);
    const [header, ...rows] = lines(first.stdout);
    expect(header).toMatch(/^CUSTOMER\s+STATUS\s+DERIVED\s+REASON\s+UPDATED$/);
    expect(rows[0]).toMatch(/^cus_l0\s+lockout\s+lockout\s+manual\s+\d{4}-/);
    expect(rows.at(-1)).toBe('(more: --cursor cus_l1, or --all)');
    const rest = await cli([
      'subscriber',
      'list',
      '--tenant',
      'listed-co',
      '--status',
      'lockout',
      '--limit',
      '2',
      '--cursor',
      'cus_l1',
      '--json',
    ]);
    expect(
      parseJson<{ data: { processor_customer_id: string }[]; next_cursor: string | null }>(rest.stdout),
    ).toMatchObject({
      data: [{ processor_customer_id: 'cus_l2' }],
      next_cursor: null,
    });
    const all = await cli(['subscriber', 'list', '--tenant', 'listed-co', '--limit', '2', '--all', '--json']);
    expect(
      parseJson<{ data: { processor_customer_id: string }[] }>(all.stdout).data.map((r) => r.processor_customer_id),
    ).toEqual(['cus_l0', 'cus_l1', 'cus_l2', 'cus_l3', 'cus_l4']);
    expect(all.stderr).toContain('subscribers so far');
    const bad = await cli(['subscriber', 'list', '--tenant', 'listed-co', '--status', 'late']);
    expect([bad.code, bad.stderr]).toEqual([
      2,
      expect.stringContaining("--status must be one or more of active, warning, lockout, comma-separated (got 'late')"),
    ]);
  });

  it('lists subscribers by several statuses at once, and by the status before the policy', async () => {
    await createTenant('watched-co', ['--enforcement', 'monitor']);
    await createTenant('gated-co');
    for (const slug of ['watched-co', 'gated-co']) {
      for (const [id, status] of [
        ['cus_w1', 'lockout'],
        ['cus_w2', 'warning'],
        ['cus_w3', 'active'],
      ] as const)
        await cli(['subscriber', 'set', '--tenant', slug, id, status]);
    }
    const ids = async (args: string[]) =>
      parseJson<{ data: { processor_customer_id: string }[] }>(
        (await cli(['subscriber', 'list', ...args, '--json'])).stdout,
      ).data.map((r) => r.processor_customer_id);
    expect(await ids(['--tenant', 'gated-co', '--status', 'warning,lockout'])).toEqual(['cus_w1', 'cus_w2']);
    expect(await ids(['--tenant', 'gated-co', '--status', 'lockout, active,lockout'])).toEqual(['cus_w1', 'cus_w3']);
    // monitor answers active whatever is derived: the derived status is what it would enforce.
    expect(await ids(['--tenant', 'watched-co', '--status', 'warning,lockout'])).toEqual([]);
    expect(await ids(['--tenant', 'watched-co', '--derived-status', 'warning,lockout'])).toEqual(['cus_w1', 'cus_w2']);
    expect(await ids(['--tenant', 'watched-co', '--status', 'active', '--derived-status', 'lockout'])).toEqual([
      'cus_w1',
    ]);
    const table = await cli(['subscriber', 'list', '--tenant', 'watched-co', '--derived-status', 'lockout']);
    expect(lines(table.stdout)[1]).toMatch(/^cus_w1\s+active\s+lockout\s+manual\s/);
    for (const value of ['warning,late', ',', 'Lockout']) {
      const bad = await cli(['subscriber', 'list', '--tenant', 'watched-co', '--derived-status', value], {
        env: { DUNWALL_URL: 'http://127.0.0.1:9', DUNWALL_ADMIN_TOKEN: TOKEN },
      });
      expect([bad.code, lines(bad.stderr)], value).toEqual([2, [expect.stringContaining('--derived-status must')]]);
    }
  });

  it('deletes a tenant only once its slug is typed back, or with --yes; deletes an unused tier', async () => {
    const t = (await createTenant('gone-co')) as TenantJson & { publishable_key: string };
    await cli(['subscriber', 'set', '--tenant', 'gone-co', 'cus_g1', 'lockout']);
    const refused = await cli(['tenant', 'delete', 'gone-co'], { stdin: 'gone\n' });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('Type the slug to confirm');
    expect(refused.stderr).toContain('not deleted');
    expect((await lookup('gone-co', t.publishable_key, 'cus_g1')).body.status).toBe('lockout');
    const confirmed = await cli(['tenant', 'delete', 'gone-co'], { stdin: 'gone-co\n' });
    expect([confirmed.code, confirmed.stdout]).toEqual([0, 'tenant gone-co deleted, with all its data\n']);
    expect((await lookup('gone-co', t.publishable_key, 'cus_g1')).status).toBe(404);
    await createTenant('gone-co');
    expect((await cli(['tenant', 'delete', 'gone-co', '--yes'])).code).toBe(0);

    expect(
      (
        await cli([
          'tier',
          'set',
          'temp',
          'powered_by_watermark=true',
          'custom_domain=false',
          'downstream_webhooks=false',
        ])
      ).code,
    ).toBe(0);
    await createTenant('temp-co', ['--tier', 'temp']);
    const inUse = await cli(['tier', 'delete', 'temp']);
    expect([inUse.code, inUse.stderr]).toEqual([1, expect.stringContaining('tier_in_use')]);
    await cli(['tenant', 'delete', 'temp-co', '--yes']);
    expect((await cli(['tier', 'delete', 'temp'])).stdout).toBe('tier temp deleted\n');
  });

  it('updates fields, with none for null, and refuses an update with no field', async () => {
    await createTenant('hooli', [
      '--card-update-url',
      'https://hooli.example/card',
      '--allowed-origins',
      'https://hooli.example',
    ]);

    const updated = await cli([
      'tenant',
      'update',
      'hooli',
      '--tier',
      'scale',
      '--hmac-required',
      'true',
      '--allowed-origins',
      'https://a.hooli.example, https://b.hooli.example',
      '--json',
    ]);
    expect(updated.stderr).toBe('');
    expect(updated.code).toBe(0);
    expect(parseJson<TenantJson>(updated.stdout)).toMatchObject({
      tier: 'scale',
      hmac_required: true,
      card_update_url: 'https://hooli.example/card',
      allowed_origins: ['https://a.hooli.example', 'https://b.hooli.example'],
    });

    const cleared = await cli([
      'tenant',
      'update',
      'hooli',
      '--card-update-url',
      'none',
      '--allowed-origins',
      'none',
      '--json',
    ]);
    expect(cleared.code).toBe(0);
    expect(parseJson<TenantJson>(cleared.stdout)).toMatchObject({ card_update_url: null, allowed_origins: null });

    const nothing = await cli(['tenant', 'update', 'hooli']);
    expect(nothing.code).toBe(2);
    expect(lines(nothing.stderr)).toHaveLength(1);
    expect(nothing.stderr).toMatch(/^dunwall: .*at least one.*dunwall help/);

    const badBool = await cli(['tenant', 'update', 'hooli', '--hmac-required', 'yes']);
    expect(badBool.code).toBe(2);
    expect(lines(badBool.stderr)).toHaveLength(1);

    const limited = await cli(['tenant', 'update', 'hooli', '--lookups-per-minute', '5000', '--json']);
    expect(parseJson<TenantJson>(limited.stdout)).toMatchObject({ lookups_per_minute: 5000 });
    const shown = await cli(['tenant', 'show', 'hooli']);
    expect(shown.stdout).toMatch(/lookups_per_minute: +5000/);
    const unlimited = await cli(['tenant', 'update', 'hooli', '--lookups-per-minute', 'none', '--json']);
    expect(parseJson<TenantJson>(unlimited.stdout)).toMatchObject({ lookups_per_minute: null });
    const badLimit = await cli(['tenant', 'update', 'hooli', '--lookups-per-minute', '0']);
    expect(badLimit.code).toBe(2);
    expect(lines(badLimit.stderr)).toHaveLength(1);

    const badTier = await cli(['tenant', 'update', 'hooli', '--tier', 'platinum']);
    expect(badTier.code).toBe(1);
    expect(badTier.stderr).toBe("dunwall: invalid_request: tier: no tier is named 'platinum'\n");
  });

  it("creates a tenant with both modes' keys, and --test addresses its test mode", async () => {
    const created = await createTenant('modes-cli');
    expect(created.publishable_key).toMatch(/^pk_live_[A-Za-z0-9]{32}$/);
    const testKey = (created as { test_publishable_key?: string }).test_publishable_key ?? '';
    expect(testKey).toMatch(/^pk_test_[A-Za-z0-9]{32}$/);
    // --live and --either-mode are gone: a tenant has both modes.
    expect((await cli(['tenant', 'create', 'gone-cli', '--live'])).code).toBe(2);
    expect((await cli(['tenant', 'update', 'modes-cli', '--either-mode'])).code).toBe(2);

    // --test, before or after the command: the test mode's subscriber, unknown to the live key.
    expect((await cli(['--test', 'subscriber', 'set', '--tenant', 'modes-cli', 'cus_t', 'lockout'])).code).toBe(0);
    expect((await lookup('modes-cli', testKey, 'cus_t')).body).toMatchObject({ status: 'lockout' });
    expect((await lookup('modes-cli', created.publishable_key ?? '', 'cus_t')).body).toMatchObject({
      status: 'active',
    });
    expect((await cli(['subscriber', 'show', '--tenant', 'modes-cli', 'cus_t'])).code).toBe(1);
    expect((await cli(['subscriber', 'show', '--tenant', 'modes-cli', 'cus_t', '--test'])).code).toBe(0);
    const rotated = await cli(['tenant', 'rotate', 'modes-cli', '--key', 'publishable', '--test', '--json']);
    expect(parseJson<TenantJson>(rotated.stdout).publishable_key).toMatch(/^pk_test_/);
    const shown = await cli(['tenant', 'show', 'modes-cli', '--test', '--json']);
    expect(parseJson<TenantJson & { mode?: string }>(shown.stdout).mode).toBe('test');
  });

  it('reads --stripe-webhook-secret - from stdin, never from the command line', async () => {
    await createTenant('stark');
    const spy = vi.spyOn(store.tenants, 'updateTenant');
    try {
      const updated = await cli(['tenant', 'update', 'stark', '--stripe-webhook-secret', '-'], {
        stdin: `  ${WEBHOOK_SECRET}\n`,
      });
      expect(updated.stderr).toBe('');
      expect(updated.code).toBe(0);
      expect(updated.stdout).toMatch(/^slug:\s+stark$/m);
      expect(updated.stdout).not.toContain(WEBHOOK_SECRET);
      expect(spy).toHaveBeenCalledWith('stark', {}, expect.any(Date), {
        kind: 'stripe_webhook_secret',
        material: WEBHOOK_SECRET,
        overlapS: expect.any(Number),
        // The CLI acts as the operator, and the change is recorded as the operator's.
        by: { kind: 'operator' },
        // Without --test, the live mode's secret.
        mode: 'live',
      });
    } finally {
      spy.mockRestore();
    }

    const empty = await cli(['tenant', 'update', 'stark', '--stripe-webhook-secret', '-'], { stdin: '\n' });
    expect(empty.code).toBe(2);
    expect(lines(empty.stderr)).toHaveLength(1);

    const invalid = await cli(['tenant', 'update', 'stark', '--stripe-webhook-secret', '-'], { stdin: 'not-a-secret' });
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toMatch(/^dunwall: invalid_request: stripe_webhook_secret/);
    expect(lines(invalid.stderr)).toHaveLength(1);
  });

  it('suspends and resumes a tenant, and the lookup follows', async () => {
    const tenant = await createTenant('umbrella');
    const key = tenant.publishable_key ?? '';

    const suspended = await cli(['tenant', 'suspend', 'umbrella']);
    expect(suspended.code).toBe(0);
    expect(suspended.stdout).toMatch(/^suspended:\s+true$/m);
    expect((await lookup('umbrella', key, 'cus_1')).body.code).toBe('tenant_suspended');

    const resumed = await cli(['tenant', 'resume', 'umbrella', '--json']);
    expect(resumed.code).toBe(0);
    expect(parseJson<TenantJson>(resumed.stdout).suspended).toBe(false);
    expect(await lookup('umbrella', key, 'cus_1')).toEqual({ status: 200, body: { status: 'active' } });
  });

  it('rotates the publishable key and the HMAC secret, printing when the old one expires', async () => {
    const tenant = await createTenant('wayne');

    const rotated = await cli(['tenant', 'rotate', 'wayne', '--key', 'publishable']);
    expect(rotated.stderr).toBe('');
    expect(rotated.code).toBe(0);
    const newKey = /^publishable_key:\s+(pk_\S+)$/m.exec(rotated.stdout)?.[1] ?? '';
    expect(newKey).not.toBe('');
    expect(newKey).not.toBe(tenant.publishable_key);
    expect(rotated.stdout).toMatch(/shown only once/i);
    expect(rotated.stdout).toMatch(/^previous_expires_at:\s+\d{4}-\d\d-\d\dT/m);
    // Both keys work during the overlap.
    expect((await lookup('wayne', newKey, 'cus_1')).status).toBe(200);
    expect((await lookup('wayne', tenant.publishable_key ?? '', 'cus_1')).status).toBe(200);

    const hmac = await cli(['tenant', 'rotate', 'wayne', '--key', 'hmac', '--json']);
    expect(hmac.code).toBe(0);
    const body = parseJson<TenantJson>(hmac.stdout);
    expect(body.hmac_secret).toBeTruthy();
    expect(body.hmac_secret).not.toBe(tenant.hmac_secret);
    expect(body.publishable_key).toBeUndefined();
    expect(Date.parse(body.previous_expires_at ?? '')).toBeGreaterThan(Date.now());

    const noKey = await cli(['tenant', 'rotate', 'wayne']);
    expect(noKey.code).toBe(2);
    const badKey = await cli(['tenant', 'rotate', 'wayne', '--key', 'admin']);
    expect(badKey.code).toBe(2);
    expect(lines(badKey.stderr)).toHaveLength(1);
  });

  it('answers an unknown tenant with exit 1 and one line naming tenant_not_found', async () => {
    for (const args of [
      ['tenant', 'show', 'no-such-tenant'],
      ['tenant', 'suspend', 'no-such-tenant'],
      ['subscriber', 'show', '--tenant', 'no-such-tenant', 'cus_1'],
    ]) {
      const result = await cli(args);
      expect(result.code).toBe(1);
      expect(result.stdout).toBe('');
      expect(lines(result.stderr)).toHaveLength(1);
      expect(result.stderr).toBe('dunwall: tenant_not_found: No tenant has this slug.\n');
    }
    const exists = await cli(['tenant', 'create', 'base']);
    expect(exists.code).toBe(1);
    expect(exists.stderr).toMatch(/^dunwall: tenant_exists: /);
  });
});

describe('dunwall subscriber', () => {
  it('sets, shows with history, and clears a subscriber', async () => {
    const tenant = await createTenant('cyberdyne', ['--card-update-url', 'https://cyberdyne.example/card']);

    const warning = await cli([
      'subscriber',
      'set',
      '--tenant',
      'cyberdyne',
      'cus_42',
      'warning',
      '--reason',
      'soft_decline',
    ]);
    expect(warning.stderr).toBe('');
    expect(warning.code).toBe(0);
    expect(warning.stdout).toMatch(/^processor_customer_id:\s+cus_42$/m);
    expect(warning.stdout).toMatch(/^status:\s+warning$/m);
    expect(warning.stdout).toMatch(/^reason:\s+soft_decline$/m);

    const lockout = await cli(['subscriber', 'set', 'cus_42', 'lockout', '--tenant', 'cyberdyne', '--json']);
    expect(lockout.code).toBe(0);
    expect(parseJson<{ status: string; reason: string }>(lockout.stdout)).toMatchObject({
      status: 'lockout',
      reason: 'manual',
    });

    const show = await cli(['subscriber', 'show', '--tenant', 'cyberdyne', 'cus_42']);
    expect(show.code).toBe(0);
    expect(show.stdout).toMatch(/^status:\s+lockout$/m);
    expect(show.stdout).toMatch(/^updated_at:\s+\d{4}-/m);
    expect(show.stdout).toMatch(/^WHEN\s+STATUS\s+REASON\s+SOURCE\s+EVENT\s+DECLINE_CODE$/m);
    expect(show.stdout).toMatch(/^\S+\s+warning\s+soft_decline\s+admin\s+-\s+-$/m);
    expect(show.stdout).toMatch(/^\S+\s+lockout\s+manual\s+admin\s+-\s+-$/m);

    const showJson = await cli(['subscriber', 'show', '--tenant', 'cyberdyne', 'cus_42', '--json']);
    const body = parseJson<{ status: string; history: { status: string | null; source: string }[] }>(showJson.stdout);
    expect(body.status).toBe('lockout');
    expect(body.history.map((h) => h.status).sort()).toEqual(['lockout', 'warning']);

    expect((await lookup('cyberdyne', tenant.publishable_key ?? '', 'cus_42')).body.status).toBe('lockout');

    const clear = await cli(['subscriber', 'clear', '--tenant', 'cyberdyne', 'cus_42']);
    expect(clear.stderr).toBe('');
    expect(clear.code).toBe(0);
    expect(clear.stdout).toContain('cus_42');
    expect(await lookup('cyberdyne', tenant.publishable_key ?? '', 'cus_42')).toEqual({
      status: 200,
      body: { status: 'active' },
    });

    // Cleared: no record, the history kept.
    const gone = await cli(['subscriber', 'show', '--tenant', 'cyberdyne', 'cus_42']);
    expect(gone.code).toBe(0);
    expect(gone.stdout).toMatch(/^status:\s+\(no record: unknown, so the lookup answers active\)$/m);
    expect(gone.stdout).toMatch(/^\S+\s+\(removed\)\s+-\s+admin\s+-\s+-$/m);
    const never = await cli(['subscriber', 'show', '--tenant', 'cyberdyne', 'cus_never_seen']);
    expect(never.code).toBe(1);
    expect(never.stderr).toMatch(/^dunwall: subscriber_not_found: /);
  });

  it('clears an override: the status is again what the episodes give', async () => {
    const tenant = await createTenant('overridden-co');
    const key = tenant.publishable_key ?? '';
    const at = Math.floor(Date.now() / 1000) - 60;
    // A Stripe episode puts the customer in warning; the operator overrides it to lockout.
    const failed = event('invoice.payment_failed', invoice('cus_ov', { next_payment_attempt: at + 86_400 }), {
      created: at,
    });
    const replayed = await app.inject({
      method: 'POST',
      url: '/admin/v1/tenants/overridden-co/stripe-events',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ events: [failed] }),
    });
    expect(replayed.statusCode, replayed.body).toBe(200);
    expect((await lookup('overridden-co', key, 'cus_ov')).body.status).toBe('warning');
    expect((await cli(['subscriber', 'set', '--tenant', 'overridden-co', 'cus_ov', 'lockout'])).code).toBe(0);
    expect((await lookup('overridden-co', key, 'cus_ov')).body.status).toBe('lockout');

    const cleared = await cli(['subscriber', 'clear-override', '--tenant', 'overridden-co', 'cus_ov']);
    expect([cleared.code, cleared.stderr]).toEqual([0, '']);
    expect(cleared.stdout).toMatch(/^cus_ov: override cleared on overridden-co; /);
    expect((await lookup('overridden-co', key, 'cus_ov')).body.status).toBe('warning');
    expect((await cli(['subscriber', 'clear-override', '--tenant', 'overridden-co', 'cus_ov', '--json'])).stdout).toBe(
      '',
    );
    const missing = await cli(['subscriber', 'clear-override', 'cus_ov']);
    expect([missing.code, missing.stderr]).toEqual([2, expect.stringContaining('missing --tenant SLUG')]);
  });

  it('checks its arguments before calling the API', async () => {
    const cases = [
      ['subscriber', 'set', 'cus_1', 'lockout'],
      ['subscriber', 'set', '--tenant', 'acme', 'cus_1', 'suspended'],
      ['subscriber', 'set', '--tenant', 'acme', 'cus_1'],
      ['subscriber', 'show', '--tenant', 'acme', 'cus_1', 'extra'],
      ['subscriber', 'clear'],
    ];
    for (const args of cases) {
      const result = await cli(args, { env: { DUNWALL_URL: 'http://127.0.0.1:9', DUNWALL_ADMIN_TOKEN: TOKEN } });
      expect(result.code, args.join(' ')).toBe(2);
      expect(lines(result.stderr), args.join(' ')).toHaveLength(1);
      expect(result.stderr).toMatch(/dunwall help/);
    }
  });

  it('sends a customer ID the API rejects and reports its invalid_request', async () => {
    const result = await cli(['subscriber', 'set', '--tenant', 'base', 'not-a-customer', 'lockout']);
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^dunwall: invalid_request: /);
    expect(lines(result.stderr)).toHaveLength(1);
  });
});

interface KeyJson {
  id: string;
  name: string;
  scopes: string[];
  prefix: string;
  expires_at: string | null;
  last_used_at: string | null;
  previous_expires_at: string | null;
  secret_key?: string;
}

/** A call of the tenant API (`/v1`) with a secret key, from a server: no Origin. */
async function v1(
  key: string,
  path: string,
  init: { method?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: { status?: string; code?: string; data?: unknown[] } | null }> {
  const res = await fetch(`${url}/v1${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${key}`, ...init.headers },
  });
  const text = await res.text();
  return { status: res.status, body: text === '' ? null : (JSON.parse(text) as { status?: string; code?: string }) };
}

describe('dunwall key', () => {
  it('creates a key whose secret is shown once, under a banner, and answers the tenant API', async () => {
    await createTenant('keyed-co');
    await cli(['subscriber', 'set', '--tenant', 'keyed-co', 'cus_k1', 'warning']);
    const created = await cli([
      'key',
      'create',
      'keyed-co',
      '--name',
      'billing backend',
      '--scopes',
      'status:read, subscribers:read',
    ]);
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(/^id:\s+key_[A-Za-z0-9]{20}$/m);
    expect(created.stdout).toMatch(/^name:\s+billing backend$/m);
    expect(created.stdout).toMatch(/^scopes:\s+status:read, subscribers:read$/m);
    expect(created.stdout).toMatch(/^expires_at:\s+never$/m);
    expect(created.stdout).toMatch(/shown only once/i);
    const secret = /^secret_key:\s+(sk_live_[A-Za-z0-9]{40})$/m.exec(created.stdout)?.[1] ?? '';
    expect(secret).not.toBe('');
    expect(created.stdout).toMatch(new RegExp(`^prefix:\\s+${secret.slice(0, 12)}$`, 'm'));
    // The banner comes before the secret, which is printed once.
    expect(created.stdout.indexOf('Shown only once')).toBeLessThan(created.stdout.indexOf(secret));
    expect(created.stdout.split(secret)).toHaveLength(2);

    expect(await v1(secret, '/subscribers/cus_k1/status')).toMatchObject({ status: 200, body: { status: 'warning' } });
    expect((await v1(secret, '/subscribers?status=warning')).body?.data).toHaveLength(1);
    expect((await v1(secret, '/settings')).body?.code).toBe('insufficient_scope');
  });

  it('prints the secret alone on stdout with --quiet, to be piped; in test mode (--test) an sk_test_ key', async () => {
    await createTenant('quiet-co');
    const quiet = await cli([
      '--test',
      'key',
      'create',
      'quiet-co',
      '--name',
      'ci',
      '--scopes',
      'status:read',
      '--quiet',
    ]);
    expect(quiet.stderr).toBe('');
    expect(quiet.code).toBe(0);
    expect(quiet.stdout).toMatch(/^sk_test_[A-Za-z0-9]{40}\n$/);
    expect((await v1(quiet.stdout.trim(), '/subscribers/cus_q/status')).status).toBe(200);
    // As a real process writing into a pipe.
    const piped = await spawnCli([
      '--test',
      'key',
      'create',
      'quiet-co',
      '--name',
      'piped',
      '--scopes',
      'status:read',
      '--quiet',
    ]);
    expect(piped.stderr).toBe('');
    expect(piped.stdout).toMatch(/^sk_test_[A-Za-z0-9]{40}\n$/);
    const both = await cli([
      '--test',
      'key',
      'create',
      'quiet-co',
      '--name',
      'x',
      '--scopes',
      'status:read',
      '--quiet',
      '--json',
    ]);
    expect([both.code, both.stdout]).toEqual([2, '']);
    expect(both.stderr).toContain('give only one of --quiet, --json');

    const json = await cli([
      '--test',
      'key',
      'create',
      'quiet-co',
      '--name',
      'scripted',
      '--scopes',
      'status:read',
      '--expires-at',
      '2099-01-01T00:00:00Z',
      '--json',
    ]);
    expect(json.code).toBe(0);
    const key = parseJson<KeyJson>(json.stdout);
    expect(key).toMatchObject({
      name: 'scripted',
      scopes: ['status:read'],
      expires_at: '2099-01-01T00:00:00.000Z',
      last_used_at: null,
    });
    expect(key.secret_key).toMatch(/^sk_test_/);
  });

  it('checks scopes against the known list before calling the API, naming the bad one', async () => {
    const offline = { DUNWALL_URL: 'http://127.0.0.1:9', DUNWALL_ADMIN_TOKEN: TOKEN };
    const bad = await cli(['key', 'create', 'base', '--name', 'x', '--scopes', 'status:read,subscribers:delete'], {
      env: offline,
    });
    expect(bad.code).toBe(2);
    expect(lines(bad.stderr)).toHaveLength(1);
    expect(bad.stderr).toContain(`--scopes: unknown scope 'subscribers:delete' (known: ${SCOPES.join(', ')})`);
    for (const args of [
      ['key', 'create', 'base', '--name', 'x'],
      ['key', 'create', 'base', '--scopes', 'status:read'],
      ['key', 'create', 'base', '--name', 'x', '--scopes', ' , '],
      ['key', 'create', 'base', '--name', 'x', '--scopes', 'status:read', '--expires-at', 'tomorrow'],
      ['key', 'create'],
      ['key', 'revoke', 'base'],
      ['key', 'rotate', 'base', 'key_x', '--overlap-seconds', '-5'],
      ['key', 'rotate', 'base', 'key_x', '--overlap-seconds', '2592001'],
      ['key', 'list', 'base', 'extra'],
    ]) {
      const result = await cli(args, { env: offline });
      expect(result.code, args.join(' ')).toBe(2);
      expect(lines(result.stderr), args.join(' ')).toHaveLength(1);
      expect(result.stderr, args.join(' ')).toMatch(/dunwall help/);
    }
    // What only the service knows is its answer: a time already past.
    const past = await cli([
      'key',
      'create',
      'base',
      '--name',
      'x',
      '--scopes',
      'status:read',
      '--expires-at',
      '2020-01-01T00:00:00Z',
    ]);
    expect([past.code, past.stderr]).toEqual([1, 'dunwall: invalid_request: expires_at: must be in the future\n']);
  });

  it('lists keys as a table without their secrets, with their last use once recorded', async () => {
    await createTenant('listed-keys');
    expect((await cli(['key', 'list', 'listed-keys'])).stdout).toBe('no secret keys\n');
    const a = parseJson<KeyJson>(
      (await cli(['key', 'create', 'listed-keys', '--name', 'api server', '--scopes', 'status:read', '--json'])).stdout,
    );
    const b = parseJson<KeyJson>(
      (
        await cli([
          'key',
          'create',
          'listed-keys',
          '--name',
          'ops',
          '--scopes',
          'keys:write,subscribers:write',
          '--expires-at',
          '2099-06-01T12:00:00Z',
          '--json',
        ])
      ).stdout,
    );
    await v1(a.secret_key ?? '', '/subscribers/cus_1/status');
    await keyUsage.flush((uses) => store.keys.touchSecretKeys(uses));

    const list = await cli(['key', 'list', 'listed-keys']);
    expect(list.code).toBe(0);
    const [header, ...rows] = lines(list.stdout);
    expect(header).toMatch(/^ID\s+NAME\s+SCOPES\s+PREFIX\s+CREATED\s+EXPIRES\s+LAST USED$/);
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatch(
      new RegExp(
        `^${a.id}\\s+api server\\s+status:read\\s+${a.prefix}\\s+\\d{4}-\\S+\\s+never\\s+\\d{4}-\\d\\d-\\d\\dT\\S+$`,
      ),
    );
    // Scopes in the contract's order, whatever the order given.
    expect(rows[1]).toMatch(
      new RegExp(
        `^${b.id}\\s+ops\\s+subscribers:write,keys:write\\s+${b.prefix}\\s+\\d{4}-\\S+\\s+2099-06-01T12:00:00\\.000Z\\s+never$`,
      ),
    );
    for (const secret of [a.secret_key ?? '', b.secret_key ?? '']) {
      expect(list.stdout).not.toContain(secret);
      expect(list.stdout).not.toContain(secret.slice(12));
    }
    const json = parseJson<{ data: KeyJson[] }>((await cli(['key', 'list', 'listed-keys', '--json'])).stdout);
    expect(json.data.map((k) => k.id)).toEqual([a.id, b.id]);
    expect(json.data.every((k) => k.secret_key === undefined)).toBe(true);
  });

  it('rotates with an overlap, the replaced secret working until then; revokes at once', async () => {
    await createTenant('rotated-keys');
    const key = parseJson<KeyJson>(
      (await cli(['key', 'create', 'rotated-keys', '--name', 'web', '--scopes', 'status:read', '--json'])).stdout,
    );
    const old = key.secret_key ?? '';

    const rotated = await cli(['key', 'rotate', 'rotated-keys', key.id, '--overlap-seconds', '3600']);
    expect(rotated.stderr).toBe('');
    expect(rotated.code).toBe(0);
    expect(rotated.stdout).toMatch(/shown only once/i);
    const next = /^secret_key:\s+(sk_live_\S+)$/m.exec(rotated.stdout)?.[1] ?? '';
    expect(next).not.toBe('');
    expect(next).not.toBe(old);
    const until =
      /^previous_expires_at:\s+(\S+) \(the replaced secret works until then\)$/m.exec(rotated.stdout)?.[1] ?? '';
    expect(Date.parse(until) - Date.now()).toBeGreaterThan(3_500_000);
    expect((await v1(old, '/subscribers/cus_1/status')).status).toBe(200);
    expect((await v1(next, '/subscribers/cus_1/status')).status).toBe(200);

    // No overlap: the replaced secret stops at once.
    const quiet = await cli(['key', 'rotate', 'rotated-keys', key.id, '--overlap-seconds', '0', '--quiet']);
    expect(quiet.stdout).toMatch(/^sk_live_[A-Za-z0-9]{40}\n$/);
    const newest = quiet.stdout.trim();
    expect((await v1(next, '/subscribers/cus_1/status')).body?.code).toBe('invalid_secret_key');
    expect((await v1(newest, '/subscribers/cus_1/status')).status).toBe(200);

    const revoked = await cli(['key', 'revoke', 'rotated-keys', key.id]);
    expect([revoked.code, revoked.stderr]).toEqual([0, '']);
    expect(revoked.stdout).toBe(
      `secret key ${key.id} of rotated-keys revoked: every instance refuses it within a second\n`,
    );
    expect((await v1(newest, '/subscribers/cus_1/status')).body?.code).toBe('invalid_secret_key');
    const again = await cli(['key', 'revoke', 'rotated-keys', key.id]);
    expect([again.code, again.stderr]).toEqual([1, expect.stringMatching(/^dunwall: secret_key_not_found: /)]);
    const unknownTenant = await cli(['key', 'list', 'no-such-keys']);
    expect(unknownTenant.stderr).toBe('dunwall: tenant_not_found: No tenant has this slug.\n');
  });

  it('is in the help, the group help and the completion script', async () => {
    const help = await cli(['help']);
    expect(help.stdout).toContain('dunwall key create SLUG --name NAME --scopes SCOPE[,SCOPE...]');
    expect(help.stdout).toContain('dunwall help [tenant|key|subscriber|tier|webhook|stripe|secrets]');
    const group = await cli(['help', 'key']);
    expect(group.code).toBe(0);
    for (const command of ['create', 'list', 'revoke', 'rotate'])
      expect(group.stdout).toContain(`dunwall key ${command} SLUG`);
    expect(group.stdout).toContain(SCOPES.join(', '));
    const own = await cli(['key', 'rotate', '--help']);
    expect(own.stdout).toMatch(/^Usage: dunwall key rotate SLUG KEY_ID \[--overlap-seconds N\] \[--quiet\]/);
    const bash = (await cli(['completion', 'bash'])).stdout;
    expect(bash).toMatch(/key\)\n\s+if \[ "\$COMP_CWORD" -eq 2 \]; then opts="create list revoke rotate"/);
    expect(bash).toMatch(/create\) opts="--name --scopes --expires-at --quiet/);
    expect(bash).toMatch(/rotate\) opts="--overlap-seconds --quiet/);
  });
});

describe('dunwall webhook', () => {
  it('creates, lists, shows, updates, rotates and deletes an endpoint; shows its messages and attempts; retries and replays', async () => {
    await createTenant('hooked', ['--tier', 'scale']);
    const created = await cli([
      'webhook',
      'create',
      '--tenant',
      'hooked',
      'https://hooks.example.com/dunwall',
      '--description',
      'billing backend',
      '--events',
      'subscriber.status_changed',
    ]);
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    const id = /^id:\s+(ep_\w+)$/m.exec(created.stdout)?.[1] ?? '';
    const secret = /^secret:\s+(whsec_\S+)\s+\(shown once/m.exec(created.stdout)?.[1] ?? '';
    expect(id).toMatch(/^ep_[a-z2-7]{24}$/);
    expect(secret).toMatch(/^whsec_/);
    expect(created.stdout).toMatch(/^events:\s+subscriber\.status_changed$/m);

    const listed = await cli(['webhook', 'list', '--tenant', 'hooked']);
    expect(listed.stdout).toMatch(
      new RegExp(`^${id}\\s+yes\\s+0\\s+subscriber\\.status_changed\\s+https://hooks\\.example\\.com/dunwall$`, 'm'),
    );
    const shown = await cli(['webhook', 'show', '--tenant', 'hooked', id]);
    expect(shown.stdout).not.toContain(secret);
    expect(shown.stdout).toMatch(/^signing_secrets:\s+current since /m);

    const disabled = await cli([
      'webhook',
      'update',
      '--tenant',
      'hooked',
      id,
      '--enabled',
      'false',
      '--events',
      'all',
    ]);
    expect(disabled.stdout).toMatch(/^enabled:\s+no: admin \(disabled through the admin API\)/m);
    expect(disabled.stdout).toMatch(/^events:\s+all$/m);
    expect((await cli(['webhook', 'update', '--tenant', 'hooked', id, '--enabled', 'true'])).stdout).toMatch(
      /^enabled:\s+yes$/m,
    );

    const rotated = await cli([
      'webhook',
      'rotate-secret',
      '--tenant',
      'hooked',
      id,
      '--overlap-seconds',
      '60',
      '--json',
    ]);
    const next = parseJson<{ secret: string; previous_expires_at: string; signing_secrets: unknown[] }>(rotated.stdout);
    expect(next.secret).not.toBe(secret);
    expect(next.signing_secrets).toHaveLength(2);

    expect((await cli(['subscriber', 'set', '--tenant', 'hooked', 'cus_hook1', 'lockout'])).code).toBe(0);
    const messages = await cli(['webhook', 'messages', '--tenant', 'hooked', id, '--state', 'pending']);
    expect(messages.stdout).toMatch(
      /^\S+\s+msg_[a-z2-7]{24}\s+subscriber\.status_changed\s+cus_hook1\s+1\s+pending\s+0\s/m,
    );
    const messageId = /(msg_[a-z2-7]{24})/.exec(messages.stdout)?.[1] ?? '';
    expect((await cli(['webhook', 'attempts', '--tenant', 'hooked', id])).stdout.trim()).toBe('no attempts');
    expect((await cli(['webhook', 'retry', '--tenant', 'hooked', id, messageId])).stdout.trim()).toBe(
      `message ${messageId} queued for ${id}`,
    );
    const replayed = await cli([
      'webhook',
      'replay',
      '--tenant',
      'hooked',
      id,
      '--since',
      '2020-01-01T00:00:00Z',
      '--json',
    ]);
    expect(parseJson(replayed.stdout)).toEqual({ queued: 1 });

    expect((await cli(['webhook', 'delete', '--tenant', 'hooked', id])).stdout.trim()).toBe(
      `webhook endpoint ${id} deleted`,
    );
    expect((await cli(['webhook', 'list', '--tenant', 'hooked'])).stdout.trim()).toBe('no webhook endpoints');
  });

  it("prints a receiver's redirect with control characters in its Location as escapes, never raw, as text and as JSON", async () => {
    // A real receiver on loopback answering every delivery with a redirect whose Location holds
    // C1 controls (U+009B is CSI), and UTF-8 that Node reads as Latin-1 bytes (U+202E becomes U+0080 among others).
    const location = Buffer.concat([
      Buffer.from('https://evil.test/'),
      Buffer.from([0x9b, 0x33, 0x31, 0x6d, 0x85, 0x9d]),
      Buffer.from('pay\u202eme', 'utf8'),
    ]);
    const receiver = createServer((socket) => {
      socket.once('data', () =>
        socket.end(
          Buffer.concat([
            Buffer.from('HTTP/1.1 302 Found\r\nLocation: '),
            location,
            Buffer.from('\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'),
          ]),
        ),
      );
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const port = (receiver.address() as AddressInfo).port;
    const loopback = { allowHttpLoopback: true, allowedNetworks: ['127.0.0.0/8'] };
    const hookApp = await buildAppWithModel({ store, adminToken: TOKEN, downstream: loopback });
    try {
      const env = { DUNWALL_URL: await hookApp.listen({ port: 0, host: '127.0.0.1' }), DUNWALL_ADMIN_TOKEN: TOKEN };
      expect((await cli(['tenant', 'create', 'redirected', '--tier', 'scale'], { env })).code).toBe(0);
      const created = await cli(
        ['webhook', 'create', '--tenant', 'redirected', `http://127.0.0.1:${port}/hook`, '--json'],
        { env },
      );
      const id = parseJson<{ id: string }>(created.stdout).id;
      expect(
        (await cli(['subscriber', 'set', '--tenant', 'redirected', 'cus_redirected', 'warning'], { env })).code,
      ).toBe(0);
      const deliverer = new DownstreamDeliverer({
        queue: store.downstream.queue,
        attemptTimeoutMs: 5_000,
        concurrencyPerEndpoint: 1,
        log: { info() {}, warn() {} },
        ...loopback,
      });
      expect(await deliverer.runOnce()).toBe(1);
      await deliverer.stop();

      const raw =
        (await store.downstream.endpoints.listAttempts(
          (await store.tenants.getTenant('redirected'))?.id ?? 0,
          id,
          10,
        )) ?? [];
      expect(raw[0]?.error).toMatch(/[\u0080-\u009f]/); // kept as received: the escaping is the printing's

      // Any control but the line breaks that end the printed lines.
      // eslint-disable-next-line no-control-regex
      const CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028-\u202e]/;
      const text = await cli(['webhook', 'attempts', '--tenant', 'redirected', id], { env });
      expect(text.code).toBe(0);
      expect(text.stdout).not.toMatch(CONTROL);
      expect(text.stdout).toContain('redirects are not followed (to https://evil.test/\\u009b31m\\u0085\\u009dpay');
      const json = await cli(['webhook', 'attempts', '--tenant', 'redirected', id, '--json'], { env });
      expect(json.stdout).not.toMatch(CONTROL);
      // Still JSON, for the value the API answers: the stored one with its controls escaped.
      expect(parseJson<{ data: { error: string }[] }>(json.stdout).data[0]?.error).toBe(
        escapeControls(raw[0]?.error ?? ''),
      );
    } finally {
      await hookApp.close();
      await new Promise<void>((resolve) => receiver.close(() => resolve()));
    }
  });

  it('refuses a tier without downstream webhooks, unknown event types and an update with nothing to change', async () => {
    const refused = await cli(['webhook', 'create', '--tenant', 'base', 'https://hooks.example.com/x']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('downstream_webhooks_not_entitled');
    const badType = await cli([
      'webhook',
      'create',
      '--tenant',
      'base',
      'https://hooks.example.com/x',
      '--events',
      'subscriber.created',
    ]);
    expect([badType.code, badType.stderr]).toEqual([
      2,
      expect.stringContaining("unknown event type 'subscriber.created'"),
    ]);
    const nothing = await cli(['webhook', 'update', '--tenant', 'base', `ep_${'a'.repeat(24)}`]);
    expect([nothing.code, nothing.stderr]).toEqual([2, expect.stringContaining('give at least one of')]);
  });
});

describe('dunwall tier', () => {
  it('lists tiers as a table and as JSON', async () => {
    const list = await cli(['tier', 'list']);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/^NAME\s+POWERED_BY_WATERMARK\s+CUSTOM_DOMAIN\s+DOWNSTREAM_WEBHOOKS/m);
    expect(list.stdout).toMatch(/^starter\s+true\s+false\s+false/m);
    expect(list.stdout).toMatch(/^scale\s+false\s+true\s+true/m);

    const json = await cli(['tier', 'list', '--json']);
    const tiers = parseJson<{ data: { name: string; entitlements: Record<string, boolean> }[] }>(json.stdout).data;
    expect(tiers.find((t) => t.name === 'growth')?.entitlements).toMatchObject({
      custom_domain: true,
      powered_by_watermark: false,
    });
  });

  it('creates or replaces a tier from flag=value arguments', async () => {
    const set = await cli([
      'tier',
      'set',
      'enterprise',
      'powered_by_watermark=false',
      'custom_domain=true',
      'downstream_webhooks=true',
      'sso=true',
    ]);
    expect(set.stderr).toBe('');
    expect(set.code).toBe(0);
    expect(set.stdout).toMatch(/^name:\s+enterprise$/m);
    expect(set.stdout).toMatch(
      /^entitlements:\s+powered_by_watermark=false custom_domain=true downstream_webhooks=true sso=true$/m,
    );

    const list = await cli(['tier', 'list']);
    expect(list.stdout).toMatch(/\s+SSO$/m);
    expect(list.stdout).toMatch(/^enterprise\s+false\s+true\s+true\s+true$/m);
    expect(list.stdout).toMatch(/^starter\s+true\s+false\s+false\s+-$/m);

    const json = await cli([
      'tier',
      'set',
      'enterprise',
      'powered_by_watermark=false',
      'custom_domain=true',
      'downstream_webhooks=false',
      '--json',
    ]);
    expect(parseJson<{ entitlements: Record<string, boolean> }>(json.stdout).entitlements).toEqual({
      powered_by_watermark: false,
      custom_domain: true,
      downstream_webhooks: false,
    });

    const missingFlag = await cli(['tier', 'set', 'enterprise', 'custom_domain=true']);
    expect(missingFlag.code).toBe(1);
    expect(missingFlag.stderr).toBe('dunwall: invalid_request: entitlements.powered_by_watermark: is required\n');

    for (const args of [
      ['tier', 'set', 'enterprise'],
      ['tier', 'set', 'enterprise', 'sso=yes'],
      ['tier', 'set', 'enterprise', 'sso'],
      ['tier', 'set', 'enterprise', 'sso=true', 'sso=false'],
      ['tier', 'set', 'enterprise', 'Bad-Flag=true'],
      ['tier', 'set', 'enterprise', 'constructor=true'],
    ]) {
      const result = await cli(args);
      expect(result.code, args.join(' ')).toBe(2);
      expect(lines(result.stderr)).toHaveLength(1);
    }
    expect((await cli(['tier', 'set', 'enterprise', 'constructor=true'])).stderr).toMatch(
      /^dunwall: 'constructor' is not a valid flag name \(.*none of constructor\)/,
    );
  });
});

describe('dunwall and the rate limits', () => {
  /** The same store behind a service with tight limits, on a clock that stands still: every window ends 60 s ahead. */
  let limited: App;
  let limitedUrl: string;
  const T = Date.parse('2026-06-01T00:00:00Z');
  beforeAll(async () => {
    limited = await buildAppWithModel({
      store,
      adminToken: TOKEN,
      now: () => T,
      rateLimits: { lookupPerIp: 0, lookupPerTenant: 0, failuresPerIp: 2, adminPerIp: 4 },
    });
    limitedUrl = await limited.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(() => limited?.close());

  it("is not locked out by its own address's failures, and says how long to wait when it is refused", async () => {
    const env = { DUNWALL_URL: limitedUrl, DUNWALL_ADMIN_TOKEN: TOKEN };
    // A developer's typos from this address: a wrong key twice, past the failure quota.
    for (let i = 0; i < 2; i += 1) {
      const res = await fetch(`${limitedUrl}/api/subscriber-status/base?processor_customer_id=cus_1`, {
        headers: { authorization: 'Bearer pk_typotypotypotypotypotypo' },
      });
      expect(res.status).toBe(401);
    }
    expect(
      (
        await fetch(`${limitedUrl}/api/subscriber-status/base?processor_customer_id=cus_1`, {
          headers: { authorization: 'Bearer pk_typotypotypotypotypotypo' },
        })
      ).status,
    ).toBe(429);
    // The admin token still works from the same address.
    const listed = await cli(['tenant', 'list'], { env });
    expect(listed.stderr).toBe('');
    expect(listed.code).toBe(0);
    // A wrong token is refused, and the command says for how long, from Retry-After.
    const wrong = await cli(['tenant', 'list'], { env: { ...env, DUNWALL_ADMIN_TOKEN: `${TOKEN}x` } });
    expect([wrong.code, wrong.stdout, wrong.stderr]).toEqual([1, '', 'dunwall: rate limited; retry in 60 s\n']);
    const json = await cli(['tenant', 'list', '--json'], { env: { ...env, DUNWALL_ADMIN_TOKEN: `${TOKEN}x` } });
    expect(JSON.parse(json.stderr)).toEqual({
      error: {
        kind: 'api',
        status: 429,
        code: 'rate_limited',
        message: 'rate limited; retry in 60 s',
        retry_after_s: 60,
        exit: 1,
      },
    });
    // The admin API's own quota (4 a minute, three used above) refuses the token too, saying the same.
    expect((await cli(['tenant', 'show', 'base'], { env })).code).toBe(0);
    const busy = await cli(['tenant', 'show', 'base'], { env });
    expect([busy.code, busy.stderr]).toEqual([1, 'dunwall: rate limited; retry in 60 s\n']);
  });
});

describe('dunwall errors and environment', () => {
  it('exits 2 with one line and a hint on bad usage', async () => {
    for (const args of [
      ['frobnicate'],
      ['tenant'],
      ['tenant', 'explode'],
      ['tenant', 'create'],
      ['tenant', 'show', 'acme', 'extra'],
      ['tenant', 'list', '--bogus'],
      ['tenant', 'create', 'x', '--tier'],
      ['--bogus'],
      ['help', 'nothing'],
    ]) {
      const result = await cli(args);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stdout, args.join(' ')).toBe('');
      expect(lines(result.stderr), args.join(' ')).toHaveLength(1);
      expect(result.stderr, args.join(' ')).toMatch(/^dunwall: .*Run 'dunwall help' for usage\.\n$/);
    }
  });

  it('prints help and the version', async () => {
    for (const args of [['help'], ['--help'], ['-h']]) {
      const result = await cli(args);
      expect(result.code).toBe(0);
      expect(result.stdout).toContain('dunwall tenant create SLUG');
      expect(result.stdout).toContain('dunwall subscriber show --tenant SLUG CUS_ID');
      expect(result.stdout).toContain('DUNWALL_ADMIN_TOKEN');
    }
    // No command at all is a mistake: the help goes to stderr, and the exit is 2.
    const bare = await cli([]);
    expect(bare.code).toBe(2);
    expect(bare.stdout).toBe('');
    expect(bare.stderr).toContain('dunwall tenant create SLUG');
    expect(bare.stderr).toContain('dunwall: missing command');
    const group = await cli(['tenant', '--help']);
    expect(group.code).toBe(0);
    expect(group.stdout).toContain('dunwall tenant rotate SLUG --key publishable|hmac');
    expect(group.stdout).not.toContain('dunwall tier set');
    // Every command has its own help: its usage, what it does, its options.
    const own = await cli(['tenant', 'create', '--help']);
    expect(own.code).toBe(0);
    expect(own.stdout).toMatch(/^Usage: dunwall tenant create SLUG /);
    expect(own.stdout).toContain('--allowed-origins VALUE');
    expect(own.stdout).not.toContain('dunwall tenant rotate');

    const version = await cli(['--version']);
    expect(version.code).toBe(0);
    expect(version.stdout).toMatch(/^dunwall \d+\.\d+\.\d+/);
  });

  it('with --json, reports errors as one JSON line: API errors with their status and code, usage errors with exit 2', async () => {
    const api = await cli(['tenant', 'show', 'no-such-co', '--json']);
    expect(api.code).toBe(1);
    expect(api.stdout).toBe('');
    expect(JSON.parse(api.stderr)).toMatchObject({
      error: { kind: 'api', status: 404, code: 'tenant_not_found', exit: 1 },
    });
    const usage = await cli(['--json', 'tenant', 'create']);
    expect(usage.code).toBe(2);
    expect(JSON.parse(usage.stderr)).toMatchObject({
      error: { kind: 'usage', exit: 2, message: expect.stringContaining('missing SLUG') },
    });
    // The API's field names are the user's: a path parameter is named as the docs name it.
    const bad = await cli(['subscriber', 'show', '--tenant', 'acme', 'user_1', '--json']);
    expect(JSON.parse(bad.stderr)).toMatchObject({
      error: { code: 'invalid_request', message: expect.stringContaining('processor_customer_id') },
    });
    expect(bad.stderr).not.toContain('customerId');
  });

  it('prints completion scripts for bash and zsh that name every command and its options', async () => {
    const bash = await cli(['completion', 'bash']);
    expect(bash.code).toBe(0);
    expect(bash.stdout).toContain('complete -F _dunwall dunwall');
    expect(bash.stdout).toContain('opts="tenant key subscriber tier webhook stripe secrets');
    expect(bash.stdout).toMatch(
      /create\) opts="--tier --card-update-url --hmac-required --allowed-origins --lookups-per-minute/,
    );
    const zsh = await cli(['completion', 'zsh']);
    expect(zsh.stdout).toContain('bashcompinit');
    expect((await cli(['completion', 'fish'])).code).toBe(2);
    // The script is valid bash, and completes the first word.
    const dir = mkdtempSync(join(tmpdir(), 'dunwall-completion-'));
    try {
      writeFileSync(
        join(dir, 'c.sh'),
        `${bash.stdout}\nCOMP_WORDS=(dunwall te); COMP_CWORD=1; _dunwall; echo "\${COMPREPLY[@]}"\nCOMP_WORDS=(dunwall tenant del); COMP_CWORD=2; _dunwall; echo "\${COMPREPLY[@]}"\n`,
      );
      const out = await new Promise<string>((resolve, reject) => {
        const child = spawn('bash', [join(dir, 'c.sh')], { stdio: ['ignore', 'pipe', 'pipe'] });
        let text = '';
        child.stdout.on('data', (d: Buffer) => (text += d.toString()));
        child.on('error', reject);
        child.on('close', () => resolve(text));
      });
      expect(out.split('\n').slice(0, 2)).toEqual(['tenant', 'delete']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reports a server that is down on one line, exit 1', async () => {
    const port = await closedPort();
    const result = await cli(['tenant', 'list'], {
      env: { DUNWALL_URL: `http://127.0.0.1:${port}/`, DUNWALL_ADMIN_TOKEN: TOKEN },
    });
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(`dunwall: cannot reach http://127.0.0.1:${port} (connection refused)\n`);
  });

  it('tolerates a trailing slash on DUNWALL_URL', async () => {
    const result = await cli(['tenant', 'show', 'base', '--json'], {
      env: { DUNWALL_URL: `${url}/`, DUNWALL_ADMIN_TOKEN: TOKEN },
    });
    expect(result.stderr).toBe('');
    expect(parseJson<TenantJson>(result.stdout).slug).toBe('base');
  });

  it('reads the admin token from the data folder when DUNWALL_ADMIN_TOKEN is unset', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dunwall-cli-'));
    try {
      writeFileSync(join(dir, 'admin-token'), `${TOKEN}\n`, { mode: 0o600 });
      const result = await cli(['tenant', 'show', 'base'], { env: { DUNWALL_URL: url, DUNWALL_DATA_DIR: dir } });
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      expect(result.stdout).toMatch(/^slug:\s+base$/m);

      writeFileSync(join(dir, 'admin-token'), 'wrong-token-0123456789abcdefghijklmnop\n');
      const wrong = await cli(['tenant', 'show', 'base'], { env: { DUNWALL_URL: url, DUNWALL_DATA_DIR: dir } });
      expect(wrong.code).toBe(1);
      expect(wrong.stderr).toBe('dunwall: invalid_admin_token: The admin token is not valid.\n');
      expect(wrong.stderr).not.toContain('wrong-token');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('fails with one clear line when there is no admin token at all', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dunwall-cli-'));
    try {
      const result = await cli(['tenant', 'list'], { env: { DUNWALL_URL: url, DUNWALL_DATA_DIR: dir } });
      expect(result.code).toBe(2);
      expect(lines(result.stderr)).toHaveLength(1);
      expect(result.stderr).toMatch(/^dunwall: .*set DUNWALL_ADMIN_TOKEN/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a DUNWALL_URL that is not http(s)', async () => {
    const result = await cli(['tenant', 'list'], {
      env: { DUNWALL_URL: 'ftp://example.com', DUNWALL_ADMIN_TOKEN: TOKEN },
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toBe('dunwall: DUNWALL_URL must be an http:// or https:// URL\n');
  });

  it('migrates an embedded data folder, then finds the schema up to date', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'dunwall-cli-'));
    try {
      const env = { DUNWALL_DATA_DIR: join(dir, 'data') };
      const first = await cli(['migrate'], { env });
      expect(first.stderr).toBe('');
      expect(first.code).toBe(0);
      expect(first.stdout).toMatch(/^applied 001_init\.sql$/m);

      const second = await cli(['migrate'], { env });
      expect(second.code).toBe(0);
      expect(second.stdout).toBe('schema up to date\n');

      const bad = await cli(['migrate'], { env: { ...env, PORT: 'eighty' } });
      expect(bad.code).toBe(2);
      expect(lines(bad.stderr)).toHaveLength(1);
      expect(bad.stderr).toMatch(/^dunwall: invalid configuration: PORT must be/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('dunwall stripe replay', () => {
  const nowS = () => Math.floor(Date.now() / 1000);

  function writeJsonl(lines: string[]): string {
    const dir = mkdtempSync(join(tmpdir(), 'dunwall-replay-'));
    const file = join(dir, 'events.jsonl');
    writeFileSync(file, `${lines.join('\n')}\n`);
    return file;
  }

  it('backfills statuses from an export, in batches, whatever the order, and lists the lines it refused', async () => {
    const tenant = await createTenant('replay-co');
    const t = nowS() - 3600;
    const lockedOut = event('invoice.payment_failed', invoice('cus_r1', { next_payment_attempt: null }), {
      created: t,
    });
    const recovered = [
      event('invoice.paid', invoice('cus_r2', {}), { created: t + 60 }),
      event('charge.failed', charge('cus_r2', { outcome_reason: 'insufficient_funds' }), { created: t }),
    ];
    // More than one batch of events that change nothing.
    const noise = Array.from({ length: 620 }, (_, i) =>
      event('customer.created', { id: `cus_n${i}`, object: 'customer' }, { created: t }),
    );
    const file = writeJsonl([
      JSON.stringify(lockedOut),
      ...recovered.map((e) => JSON.stringify(e)),
      '',
      '{not json',
      JSON.stringify({ id: 'not-an-event' }),
      JSON.stringify(lockedOut),
      ...noise.map((e) => JSON.stringify(e)),
    ]);

    const res = await cli(['stripe', 'replay', '--tenant', 'replay-co', file, '--json']);
    expect(res.code).toBe(1);
    // Not a terminal: one progress line a batch, then the one error line (JSON, as --json asks).
    expect(lines(res.stderr)).toEqual([
      'stripe replay: 499 events · 2 customers',
      'stripe replay: 624 events · 2 customers',
      JSON.stringify({
        error: { kind: 'failure', message: `2 line(s) of ${file} were not replayed (listed above)`, exit: 1 },
      }),
    ]);
    expect(parseJson(res.stdout)).toEqual({
      tenant: 'replay-co',
      file,
      received: 624,
      customers_seen: 2,
      // One episode each: cus_r1's subscription, cus_r2's.
      episodes_created: 2,
      // The decline of cus_r2 names no invoice: kept, waiting for a link, and it changes nothing.
      outcomes: { applied: 2, stale: 0, ignored: 0, pending: 1, duplicate: 1, irrelevant: 620, livemode_mismatch: 0 },
      statuses: { active: 1, warning: 0, lockout: 1, unknown: 0 },
      changes: [
        { processor_customer_id: 'cus_r1', from: null, to: 'lockout', reason: 'retries_exhausted' },
        { processor_customer_id: 'cus_r2', from: null, to: 'active', reason: 'paid' },
      ],
      invalid: [
        { line: 5, detail: 'not JSON' },
        { line: 6, detail: 'id: must be a Stripe event id (evt_...)' },
      ],
    });
    const key = tenant.publishable_key ?? '';
    expect((await lookup('replay-co', key, 'cus_r1')).body.status).toBe('lockout');
    expect((await lookup('replay-co', key, 'cus_r2')).body.status).toBe('active');

    // Replaying the same export again changes nothing.
    const again = await cli([
      'stripe',
      'replay',
      '--tenant',
      'replay-co',
      writeJsonl(recovered.map((e) => JSON.stringify(e))),
    ]);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(
      /^events:\s+applied 0, stale 0, ignored 0, pending 0, duplicate 2, irrelevant 0, livemode_mismatch 0$/m,
    );
    expect(again.stdout).toMatch(/^episodes created:\s+0$/m);
    expect(again.stdout).toMatch(/^statuses:\s+lockout 0, warning 0, active 1, unknown 0$/m);
  });

  it('refuses, line by line, JSON that is not an event and events dated ahead, and replays the rest', async () => {
    const tenant = await createTenant('replay-odd');
    const file = writeJsonl([
      'null',
      '[]',
      JSON.stringify(
        event('invoice.payment_failed', invoice('cus_ahead', { next_payment_attempt: null }), {
          created: nowS() + 10 * 86_400,
        }),
      ),
      JSON.stringify(
        event('invoice.payment_failed', invoice('cus_now', { next_payment_attempt: null }), { created: nowS() }),
      ),
      JSON.stringify({ ...event('invoice.paid', invoice('cus_ms', {}), { created: nowS() }), created: Date.now() }),
      `"${'é'.repeat(10)}"`,
    ]);
    const res = await cli(['stripe', 'replay', '--tenant', 'replay-odd', file, '--json']);
    expect(res.code).toBe(1);
    const summary = parseJson<{ outcomes: { applied: number }; invalid: { line: number; detail: string }[] }>(
      res.stdout,
    );
    expect(summary.outcomes.applied).toBe(1);
    expect(summary.invalid).toEqual([
      { line: 1, detail: 'the event must be a JSON object' },
      { line: 2, detail: 'the event must be a JSON object' },
      { line: 3, detail: 'created: more than 300 s in the future' },
      { line: 5, detail: 'created: more than 300 s in the future' },
      { line: 6, detail: 'the event must be a JSON object' },
    ]);
    expect((await lookup('replay-odd', tenant.publishable_key ?? '', 'cus_now')).body.status).toBe('lockout');
    expect((await lookup('replay-odd', tenant.publishable_key ?? '', 'cus_ahead')).body).toEqual({ status: 'active' });
  });

  it('fails on one line for a missing file, a missing tenant option or an unknown tenant', async () => {
    const missing = await cli(['stripe', 'replay', '--tenant', 'replay-co', '/nonexistent/events.jsonl']);
    expect(missing.code).toBe(1);
    expect(lines(missing.stderr)).toEqual(['dunwall: cannot read /nonexistent/events.jsonl (ENOENT)']);
    const noTenant = await cli(['stripe', 'replay', 'x.jsonl']);
    expect(noTenant.code).toBe(2);
    const file = writeJsonl([JSON.stringify(event('invoice.paid', invoice('cus_x', {}), { created: nowS() }))]);
    const unknown = await cli(['stripe', 'replay', '--tenant', 'nobody', file]);
    expect(unknown.code).toBe(1);
    expect(lines(unknown.stderr)).toEqual([
      'dunwall: tenant_not_found: No tenant has this slug. (stopped at line 1: that line and the ones after it were not replayed)',
    ]);
    expect(unknown.stdout).toMatch(/^events:\s+applied 0,/m);
  });
});

describe('dunwall stripe send-sample', () => {
  const SAMPLE_SECRET = 'whsec_sampleTestSecret0123456789abcdef';
  let key = '';

  beforeAll(async () => {
    // The samples are test-mode events: the test mode's key answers them, its signing secret verifies them.
    key = ((await createTenant('sample-co')) as { test_publishable_key?: string }).test_publishable_key ?? '';
    const set = await cli(['tenant', 'update', 'sample-co', '--stripe-webhook-secret', '-', '--test'], {
      stdin: `${SAMPLE_SECRET}\n`,
    });
    expect(set.code).toBe(0);
  });

  interface SentJson {
    url: string;
    subscription: string;
    invoice: string;
    shape: string;
    api_version: string;
    events: { id: string; type: string; http_status: number; outcome: string }[];
    derived: { status: string; reason: string };
  }

  async function send(
    scenario: string,
    customer: string,
    extra: string[] = [],
    secret = SAMPLE_SECRET,
  ): Promise<Result> {
    // The service's URL from --url: send-sample needs no admin token.
    return cli(
      [
        'stripe',
        'send-sample',
        scenario,
        '--tenant',
        'sample-co',
        '--customer',
        customer,
        '--secret',
        '-',
        '--url',
        url,
        '--test',
        ...extra,
      ],
      {
        env: {},
        stdin: `${secret}\n`,
      },
    );
  }
  async function sent(scenario: string, customer: string, extra: string[] = []): Promise<SentJson> {
    const result = await send(scenario, customer, ['--json', ...extra]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    return parseJson<SentJson>(result.stdout);
  }
  async function reasonOf(customer: string): Promise<[string | undefined, string]> {
    const shown = parseJson<{ status: string; reason: string }>(
      (await cli(['subscriber', 'show', '--tenant', 'sample-co', customer, '--json', '--test'])).stdout,
    );
    const looked = await lookup('sample-co', key, customer);
    expect(looked.body.status).toBe(shown.status);
    return [looked.body.status, shown.reason];
  }

  it.each(['basil', 'legacy'])(
    'drives a customer through warning, lockout and back to active (%s shape), as each scenario says',
    async (shape) => {
      const customer = `cus_sample_${shape}`;
      const failed = await sent('payment_failed', customer, ['--shape', shape]);
      expect(failed).toMatchObject({
        url: `${url}/webhooks/stripe/sample-co`,
        shape,
        derived: { status: 'warning', reason: 'soft_decline' },
      });
      expect(failed.events.map((e) => [e.type, e.http_status])).toEqual([
        ['payment_intent.payment_failed', 200],
        ['invoice.payment_failed', 200],
      ]);
      expect(failed.events.at(-1)?.outcome).toBe('applied');
      expect(await reasonOf(customer)).toEqual(['warning', 'soft_decline']);

      const hard = await sent('hard_decline', customer, ['--shape', shape]);
      // The same customer's runs speak of the same subscription and invoice.
      expect([hard.subscription, hard.invoice]).toEqual([failed.subscription, failed.invoice]);
      expect(await reasonOf(customer)).toEqual(['lockout', 'hard_decline']);

      const paid = await sent('paid', customer, ['--shape', shape]);
      expect(paid.events).toMatchObject([{ type: 'invoice.paid', http_status: 200, outcome: 'applied' }]);
      expect(await reasonOf(customer)).toEqual(['active', 'paid']);

      const exhausted = `cus_sample_exhausted_${shape}`;
      await sent('retries_exhausted', exhausted, ['--shape', shape]);
      expect(await reasonOf(exhausted)).toEqual(['lockout', 'retries_exhausted']);
      await sent('subscription_deleted', exhausted, ['--shape', shape]);
      expect(await reasonOf(exhausted)).toEqual(['active', 'subscription_ended']);

      const confirming = `cus_sample_3ds_${shape}`;
      await sent('action_required', confirming, [
        '--shape',
        shape,
        '--subscription',
        'sub_Given3ds',
        '--invoice',
        'in_Given3ds',
      ]);
      expect(await reasonOf(confirming)).toEqual(['warning', 'payment_action_required']);
    },
  );

  it('prints what it sent and the answers, and never the secret', async () => {
    const result = await send('payment_failed', 'cus_sample_text');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^sent to: +http:\/\/127\.0\.0\.1:\d+\/webhooks\/stripe\/sample-co$/m);
    expect(result.stdout).toMatch(/^ +invoice\.payment_failed +evt_[A-Za-z0-9]+ +created \d+ +-> 200 applied$/m);
    expect(result.stdout).toMatch(/^derived: +warning \(soft_decline\)$/m);
    expect(result.stdout + result.stderr).not.toContain(SAMPLE_SECRET);
  });

  it('says clearly that a wrong secret was refused, on one line, without echoing it', async () => {
    const wrong = 'whsec_notTheTenantsSecret000000000000';
    const result = await send('payment_failed', 'cus_sample_wrong', [], wrong);
    expect(result.code).toBe(1);
    expect(result.stdout).toBe('');
    expect(lines(result.stderr)).toHaveLength(1);
    expect(result.stderr).toMatch(
      /^dunwall: invalid_signature: .*Is the secret on stdin the tenant's test-mode Stripe signing secret\? Set it with: dunwall tenant update sample-co --stripe-webhook-secret - --test\n$/,
    );
    expect(result.stderr).not.toContain(wrong);
    const json = await send('payment_failed', 'cus_sample_wrong', ['--json'], wrong);
    expect(parseJson<{ error: Record<string, unknown> }>(json.stderr).error).toMatchObject({
      kind: 'api',
      status: 400,
      code: 'invalid_signature',
      exit: 1,
    });
    // Nothing reached the customer.
    expect((await lookup('sample-co', key, 'cus_sample_wrong')).body).toEqual({ status: 'active' });
  });

  it('checks its arguments before sending anything', async () => {
    const usage = async (args: string[], stdin = `${SAMPLE_SECRET}\n`) =>
      cli(['stripe', 'send-sample', ...args], { env: {}, stdin });
    const base = ['--tenant', 'sample-co', '--customer', 'cus_x', '--url', url];
    const cases: [string[], RegExp, string?][] = [
      [
        ['refund', ...base, '--secret', '-'],
        /SCENARIO must be one of payment_failed, retries_exhausted, hard_decline, action_required, paid, subscription_deleted/,
      ],
      [['paid', ...base, '--secret', SAMPLE_SECRET], /give --secret - and the tenant's Stripe signing secret/],
      [['paid', ...base, '--secret', '-'], /no secret on stdin/, ''],
      [
        ['paid', '--tenant', 'sample-co', '--customer', 'nope', '--secret', '-'],
        /--customer must be a Stripe customer id/,
      ],
      [['paid', ...base, '--secret', '-', '--shape', 'v2'], /--shape must be one of basil, legacy/],
      [['paid', ...base, '--secret', '-', '--invoice', 'inv_1'], /--invoice must look like in_/],
      [['paid', '--customer', 'cus_x', '--secret', '-'], /missing --tenant SLUG/],
    ];
    for (const [args, message, stdin] of cases) {
      const result = await usage(args, stdin);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stderr, args.join(' ')).toMatch(message);
      expect(result.stderr, args.join(' ')).not.toContain(SAMPLE_SECRET);
    }
    const port = await closedPort();
    const down = await cli(
      [
        'stripe',
        'send-sample',
        'paid',
        '--tenant',
        'sample-co',
        '--customer',
        'cus_x',
        '--secret',
        '-',
        '--url',
        `http://127.0.0.1:${port}`,
      ],
      { env: {}, stdin: SAMPLE_SECRET },
    );
    expect(down).toMatchObject({
      code: 1,
      stderr: `dunwall: cannot reach http://127.0.0.1:${port}/webhooks/stripe/sample-co (connection refused)\n`,
    });
    const unknown = await cli(
      [
        'stripe',
        'send-sample',
        'paid',
        '--tenant',
        'nobody-here',
        '--customer',
        'cus_x',
        '--secret',
        '-',
        '--url',
        url,
      ],
      {
        env: {},
        stdin: SAMPLE_SECRET,
      },
    );
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(
      /^dunwall: tenant_not_found: .*Create it with: dunwall tenant create nobody-here\n$/,
    );
  });

  it('is in the help and the completion script', async () => {
    expect((await cli(['help', 'stripe'])).stdout).toContain(
      'dunwall stripe send-sample payment_failed|retries_exhausted|hard_decline|action_required|paid|subscription_deleted|card_expiring|renewal_upcoming|card_updated --tenant SLUG',
    );
    expect((await cli(['completion', 'bash'])).stdout).toMatch(
      /send-sample\) opts="--tenant --customer --secret --shape --url --subscription --invoice/,
    );
  });
});
