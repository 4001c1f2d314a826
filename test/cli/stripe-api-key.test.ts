import { spawn } from 'node:child_process';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../../src/cli/run.js';
import type { App } from '../../src/http/app.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { buildAppWithModel } from '../helpers/harness.js';
import { startStripeStandin } from '../helpers/stripe-standin.js';
import type { StripeStandin } from '../helpers/stripe-standin.js';

/**
 * `dunwall tenant update SLUG --stripe-api-key -` against a service whose Stripe is the
 * stand-in: the key read from stdin (never from the command line), `--test` for the test
 * mode, `none` to remove it; what is printed is the prefix, never the key; Stripe's refusal
 * (a missing permission) is the CLI's error, on one line.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TOKEN = 'cli-stripe-key-admin-token-0123456789abcdef';
const LIVE_KEY = `rk_live_${'C1l2I3k4'.repeat(6)}`;
const TEST_KEY = `rk_test_${'T1e2S3t4'.repeat(6)}`;
const NO_PORTAL = `rk_live_${'N0p0R0t0'.repeat(6)}`;

let store: Store;
let app: App;
let url: string;
let standin: StripeStandin;

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

async function cli(args: string[], stdin?: string): Promise<Result> {
  let stdout = '';
  let stderr = '';
  const code = await run(args, {
    stdout: { write: (chunk: string) => ((stdout += chunk), true) },
    stderr: { write: (chunk: string) => ((stderr += chunk), true) },
    stdin: Readable.from(stdin === undefined ? [] : [stdin]),
    env: { DUNWALL_URL: url, DUNWALL_ADMIN_TOKEN: TOKEN },
  });
  return { code, stdout, stderr };
}

/** The real command in a child process: the key piped to its stdin. */
function spawnCli(args: string[], stdin: string): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
      cwd: ROOT,
      env: { ...process.env, DUNWALL_URL: url, DUNWALL_ADMIN_TOKEN: TOKEN },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(stdin);
  });
}

beforeAll(async () => {
  standin = await startStripeStandin(
    { subscriptions: [], invoices: [], invoicePayments: [], paymentIntents: [], charges: [] },
    {
      keys: {
        [LIVE_KEY]: 'all',
        [TEST_KEY]: 'all',
        [NO_PORTAL]: ['rak_invoice_read', 'rak_customer_read', 'rak_subscription_read'],
      },
    },
  );
  store = await openStore({ engine: 'embedded', dataDir: null });
  app = await buildAppWithModel({ store, adminToken: TOKEN, stripeApi: { apiUrl: standin.url } });
  url = await app.listen({ port: 0, host: '127.0.0.1' });
  for (const args of [
    ['tenant', 'create', 'acme'],
    ['tenant', 'create', 'sandbox', '--test'],
  ]) {
    const created = await cli(args);
    expect(created.code, created.stderr).toBe(0);
  }
});

afterAll(async () => {
  await app?.close();
  await store?.close();
  await standin?.close();
});

describe('dunwall tenant update --stripe-api-key', () => {
  it('reads the key from the stdin of the real command, and prints its prefix only', async () => {
    const res = await spawnCli(['tenant', 'update', 'acme', '--stripe-api-key', '-'], `${LIVE_KEY}\n`);
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/^mode:\s+live$/m);
    expect(res.stdout).toMatch(/^stripe_api_key:\s+rk_live_C1l2\.\.\. set /m);
    expect(res.stdout).toMatch(/^last_change:\s+.* by the operator$/m);
    expect(res.stdout).not.toContain(LIVE_KEY);
    expect(standin.requests.filter((r) => r.key === LIVE_KEY)).toHaveLength(4);

    const shown = await cli(['tenant', 'show', 'acme']);
    expect(shown.stdout).toMatch(/^stripe_api_key:\s+rk_live_C1l2\.\.\. set /m);
    expect(shown.stdout).not.toContain(LIVE_KEY);
  });

  it('--test sets the test mode key; a key of the other mode is refused naming both', async () => {
    const test = await cli(['tenant', 'update', 'sandbox', '--stripe-api-key', '-', '--test', '--json'], TEST_KEY);
    expect(test.stderr).toBe('');
    expect(JSON.parse(test.stdout)).toMatchObject({ mode: 'test', stripe_api_key: { prefix: 'rk_test_T1e2' } });

    const wrong = await cli(['tenant', 'update', 'sandbox', '--stripe-api-key', '-', '--test'], LIVE_KEY);
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(
      /^dunwall: stripe_key_mode_mismatch: The key is a live key .* the mode addressed is test/,
    );
    expect(wrong.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('names the missing permission, and keeps the key in force', async () => {
    const res = await cli(['tenant', 'update', 'acme', '--stripe-api-key', '-'], NO_PORTAL);
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('stripe_key_permission');
    expect(res.stderr).toContain('Customer portal: write');
    expect((await cli(['tenant', 'show', 'acme'])).stdout).toMatch(/rk_live_C1l2/);
  });

  it('never takes the key on the command line, and wants it alone', async () => {
    const inline = await cli(['tenant', 'update', 'acme', '--stripe-api-key', LIVE_KEY]);
    expect(inline.code).toBe(2);
    expect(inline.stderr).toContain("takes '-' (the key on stdin) or 'none'");
    expect(inline.stderr).not.toContain(LIVE_KEY);
    const mixed = await cli(['tenant', 'update', 'acme', '--stripe-api-key', '-', '--tier', 'growth'], LIVE_KEY);
    expect(mixed.code).toBe(2);
    const empty = await cli(['tenant', 'update', 'acme', '--stripe-api-key', '-'], '\n');
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('no key on stdin');
  });

  it('none removes it', async () => {
    const res = await cli(['tenant', 'update', 'acme', '--stripe-api-key', 'none']);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toMatch(/^stripe_api_key:\s+none$/m);
    expect((await cli(['tenant', 'show', 'acme'])).stdout).toMatch(/^stripe_api_key:\s+none: /m);
  });
});
