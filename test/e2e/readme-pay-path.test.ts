import { createHmac } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { chromium } from 'playwright-core';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../../src/cli/run.js';
import { readAdminTokenFile } from '../../src/runtime/admin-token.js';
import { loadConfig } from '../../src/runtime/config.js';
import { createLogger } from '../../src/runtime/logger.js';
import { start } from '../../src/runtime/server.js';
import type { Running } from '../../src/runtime/server.js';
import { event, hostedInvoiceUrl, invoice, paymentIds, signed } from '../helpers/stripe-fixtures.js';

/**
 * The README's "Integrating in five minutes", run as written: its commands through the
 * `dunwall` command against a running service, its backend's hmac, its snippet tag on a
 * page in Chromium. A failing invoice (signed as Stripe signs it) gates the customer; the
 * gate leads with Pay now to the invoice's hosted page; the customer pays there (Stripe's
 * `invoice.paid` reaches Dunwall) and comes back to the tab: the gate is gone.
 *
 * Stripe's hosted invoice page cannot be reached from here: the browser is answered, at that
 * address, by a stand-in page that says so. Everything else is real.
 */
const CHROMIUM = '/usr/bin/chromium';
const haveBrowser = existsSync(CHROMIUM);
if (!haveBrowser && process.env.CI === 'true') throw new Error(`${CHROMIUM} is required in CI (.ci/run installs it)`);

const README = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const STRIPE_SECRET = 'whsec_readme_path_0123456789abcdef';

/** The README's five-minute section. */
function fiveMinutes(): string {
  const start = README.indexOf('## Integrating in five minutes');
  const end = README.indexOf('\n## ', start + 1);
  if (start < 0 || end < 0) throw new Error('README: no "Integrating in five minutes" section');
  return README.slice(start, end);
}

/** Words of a shell command line: single quotes kept together, as the shell reads them. */
function shellWords(line: string): string[] {
  return [...line.matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? '');
}

/**
 * The `dunwall` commands of the section's shell blocks, each with what it reads on stdin:
 * `echo 'X' | dunwall ...` gives X.
 */
function readmeCommands(section: string): { args: string[]; stdin: string }[] {
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1] ?? '');
  return blocks.flatMap((block) =>
    block
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l.includes('dunwall '))
      .map((l) => {
        const [left, right] = l.includes(' | ') ? l.split(' | ') : [null, l];
        const stdin = left === null ? '' : (shellWords(left)[1] ?? '');
        const words = shellWords(right ?? '');
        // `npm run -s dunwall -- ARGS`: npm hands the command what follows `--`.
        const args = words.slice(words.indexOf('dunwall') + 1);
        return { args: args[0] === '--' ? args.slice(1) : args, stdin };
      }),
  );
}

describe.skipIf(!haveBrowser)("the README's five-minute path ends with a gate the customer leaves by paying", () => {
  let running: Running;
  let pageServer: Server;
  let browser: Browser;
  const dataDir = mkdtempSync(join(tmpdir(), 'dunwall-readme-'));

  async function dunwall(args: string[], stdin = ''): Promise<string> {
    let out = '';
    let err = '';
    const code = await run(args, {
      stdout: { write: (s: string) => ((out += s), true) },
      stderr: { write: (s: string) => ((err += s), true) },
      stdin: Readable.from(stdin === '' ? [] : [stdin]),
      env: { DUNWALL_URL: running.url, DUNWALL_ADMIN_TOKEN: readAdminTokenFile(dataDir) ?? '' },
    });
    if (code !== 0) throw new Error(`dunwall ${args.join(' ')}: exit ${code}: ${err}`);
    return out;
  }

  async function stripe(fixture: ReturnType<typeof event>): Promise<void> {
    const nowS = Math.floor(Date.now() / 1000);
    const { payload, signature } = signed(fixture, STRIPE_SECRET, nowS);
    const res = await fetch(`${running.url}/webhooks/stripe/acme`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      body: payload,
    });
    expect(res.status).toBe(200);
  }

  beforeAll(async () => {
    running = await start(
      loadConfig({ DUNWALL_DATA_DIR: dataDir, PORT: '0', DUNWALL_DEMO: '0' }),
      createLogger('silent'),
    );
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
  });
  afterAll(async () => {
    await browser?.close();
    await new Promise<void>((resolve) => (pageServer ? pageServer.close(() => resolve()) : resolve()));
    await running?.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('creates the tenant and sets the links as the README says, gates on a failed invoice, and lets the customer pay through the gate', async () => {
    const section = fiveMinutes();
    // The tenant and its Stripe signing secret, as the README's steps say.
    expect(section).toContain('npm run -s dunwall -- tenant create acme');
    const created = JSON.parse(await dunwall(['--json', 'tenant', 'create', 'acme'])) as {
      publishable_key: string;
      hmac_secret: string;
    };
    expect(section).toContain('npm run -s dunwall -- tenant update acme --stripe-webhook-secret -');
    await dunwall(['tenant', 'update', 'acme', '--stripe-webhook-secret', '-'], STRIPE_SECRET);
    // Step 4's commands, exactly as written: the fallback links, then the policy.
    const commands = readmeCommands(section).filter(
      (c) => c.args[0] === 'tenant' && c.args[1] === 'update' && !c.args.includes('--stripe-webhook-secret'),
    );
    expect(commands.map((c) => c.args.join(' '))).toEqual([
      'tenant update acme --card-update-url https://billing.acme.com/card',
      'tenant update acme --branding-file -',
    ]);
    for (const c of commands) await dunwall(c.args, c.stdin);
    const tenant = JSON.parse(await dunwall(['--json', 'tenant', 'show', 'acme'])) as {
      card_update_url: string;
      branding: { payment_url?: string };
    };
    expect(tenant).toMatchObject({
      card_update_url: 'https://billing.acme.com/card',
      branding: { payment_url: 'https://billing.acme.com' },
    });

    // The backend's hmac, as step 1 computes it; the page's tag, as step 2 writes it.
    const customer = { stripeId: 'cus_readme1' };
    const hmac = createHmac('sha256', created.hmac_secret).update(customer.stripeId).digest('hex');
    const tagTemplate = /```html\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
    const tag = tagTemplate
      .replace('https://dunwall.example.com/snippet.js', `${running.url}/snippet.js`)
      .replace('pk_...', created.publishable_key)
      .replace('<%= customer.stripe_id %>', customer.stripeId)
      .replace('<%= dunwall_hmac %>', hmac);
    expect(tag).toContain(`data-hmac="${hmac}"`);
    pageServer = createServer((_req, res) => {
      res
        .writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
        .end(`<!doctype html><html><body><h1>Acme app</h1>${tag}</body></html>`);
    });
    await new Promise<void>((resolve) => pageServer.listen(0, '127.0.0.1', resolve));
    const appUrl = `http://localhost:${(pageServer.address() as AddressInfo).port}/app`;

    // Stripe gives up on the invoice: no next attempt.
    const ids = paymentIds();
    const createdS = Math.floor(Date.now() / 1000) - 5;
    await stripe(
      event('invoice.payment_failed', invoice(customer.stripeId, { ids, next_payment_attempt: null }), {
        created: createdS,
      }),
    );

    const context = await browser.newContext({ viewport: { width: 1000, height: 700 } });
    // The stand-in for Stripe's hosted invoice page (not reachable from here).
    let paidPageOpened = false;
    await context.route('https://invoice.stripe.com/**', async (route) => {
      paidPageOpened = true;
      await route.fulfill({
        contentType: 'text/html',
        body: "<!doctype html><title>Invoice</title><p>Stand-in for Stripe's hosted invoice page.</p>",
      });
    });
    const page = await context.newPage();
    await page.goto(appUrl);
    const dialog = page.locator('dunwall-enforcement [role="dialog"]');
    await expect.poll(() => dialog.isVisible(), { timeout: 10_000 }).toBe(true);
    const pay = dialog.locator('a', { hasText: 'Pay now' });
    expect(await pay.getAttribute('href')).toBe(hostedInvoiceUrl(ids.invoice));
    mkdirSync(join(process.cwd(), 'test-results'), { recursive: true });
    await page.screenshot({ path: join(process.cwd(), 'test-results', 'readme-gate-pay-now.png') });

    // The customer pays in the new tab; Stripe tells Dunwall; the customer comes back.
    const [invoicePage] = await Promise.all([context.waitForEvent('page'), pay.click()]);
    await invoicePage.waitForLoadState();
    expect(paidPageOpened).toBe(true);
    await stripe(event('invoice.paid', invoice(customer.stripeId, { ids, status: 'paid' }), { created: createdS + 4 }));
    await invoicePage.close();
    await page.bringToFront();
    await page.evaluate(() => window.dispatchEvent(new Event('focus')));
    await dialog.waitFor({ state: 'detached', timeout: 5_000 });
    expect(await page.locator('dunwall-enforcement [role="alert"]').count()).toBe(0);
    await context.close();
  });
});
