import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { extname, join, resolve } from 'node:path';
import { chromium } from 'playwright-core';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { build } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lockoutProblem } from '../../packages/node/src/middleware/guard.js';
import { computeHmac } from '../../src/domain/hmac.js';
import { readAdminTokenFile } from '../../src/runtime/admin-token.js';
import { loadConfig } from '../../src/runtime/config.js';
import { createLogger } from '../../src/runtime/logger.js';
import { start } from '../../src/runtime/server.js';
import type { Running } from '../../src/runtime/server.js';

/**
 * @dunwall/react as a tenant meets it: the docs' Vite app (docs/examples/react, built by Vite
 * as written), on its own origin, asking a real Dunwall service, in Chromium.
 */
const CHROMIUM = '/usr/bin/chromium';
const haveBrowser = existsSync(CHROMIUM);
if (!haveBrowser && process.env.CI === 'true') throw new Error(`${CHROMIUM} is required in CI (.ci/run installs it)`);

const ROOT = resolve(import.meta.dirname, '../..');
const EXAMPLE = join(ROOT, 'docs', 'examples', 'react');
const RESULTS = join(ROOT, 'test-results');
const CARD_URL = 'https://billing.acme.test/card';
const PAY_URL = 'https://billing.acme.test/pay';
const API_PAY_URL = 'https://billing.acme.test/pay/tok_api';
/** The customers the app's own API refuses (its copy says lockout), whatever the browser hears from Dunwall. */
const refusedByApi = new Set<string>();
const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript',
  '.css': 'text/css',
};

interface Tenant {
  slug: string;
  publishable_key: string;
  /** The test mode's key: the app runs against the tenant's test mode, where a preview is answered. */
  test_publishable_key: string;
  hmac_secret: string;
}

describe.skipIf(!haveBrowser)('@dunwall/react in a Vite-built page, in Chromium', () => {
  let running: Running;
  let app: Server;
  let appOrigin = '';
  let browser: Browser;
  let acme: Tenant;
  const dataDir = mkdtempSync(join(tmpdir(), 'dunwall-react-'));
  const out = mkdtempSync(join(tmpdir(), 'dunwall-react-app-'));

  async function admin(method: string, path: string, body?: unknown): Promise<unknown> {
    const call = () =>
      fetch(`${running.url}/admin/v1${path}`, {
        method,
        headers: {
          authorization: `Bearer ${readAdminTokenFile(dataDir)}`,
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
    // A kept-alive connection the service closed while the app was being built: asked again on a new one.
    const res = await call().catch((err: Error) =>
      (err.cause as { code?: string } | undefined)?.code === 'ECONNRESET' ? call() : Promise.reject(err),
    );
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return res.json();
  }
  const setStatus = (customer: string, status: string) =>
    admin('PUT', `/tenants/acme/subscribers/${customer}?mode=test`, { status });

  beforeAll(async () => {
    running = await start(
      loadConfig({ DUNWALL_DATA_DIR: dataDir, PORT: '0', DUNWALL_DEMO: '0' }),
      createLogger('silent'),
    );
    acme = (await admin('POST', '/tenants', {
      slug: 'acme',
      tier: 'scale',
      card_update_url: CARD_URL,
      livemode: false,
    })) as Tenant;
    await admin('PATCH', '/tenants/acme', {
      branding: {
        payment_url: PAY_URL,
        texts: { fr: { banner_body: 'Votre dernier paiement a échoué.', gate_title: 'Votre compte est suspendu' } },
      },
    });

    // The docs' example, built as a tenant builds it, pointed at this service.
    await build({
      root: EXAMPLE,
      logLevel: 'silent',
      configFile: false,
      resolve: {
        alias: {
          '@dunwall/react': join(ROOT, 'packages', 'react', 'src', 'index.ts'),
          '@dunwall/core': join(ROOT, 'packages', 'core', 'src', 'index.ts'),
        },
      },
      define: {
        'import.meta.env.VITE_DUNWALL_URL': JSON.stringify(running.url),
        'import.meta.env.VITE_DUNWALL_TENANT': JSON.stringify('acme'),
        'import.meta.env.VITE_DUNWALL_KEY': JSON.stringify(acme.test_publishable_key),
      },
      build: { outDir: out, emptyOutDir: true, target: 'es2022' },
    });

    // The tenant's app: its built files, and /api/me naming who is signed in (a cookie here).
    app = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://app.test');
      // The app's API, as @dunwall/node's middleware guards it: the customers this test refuses get its 402 problem.
      if (url.pathname === '/api/projects') {
        const customer = /(?:^|; )user=(cus_[A-Za-z0-9_]+)/.exec(req.headers.cookie ?? '')?.[1] ?? '';
        if (!refusedByApi.has(customer))
          return void res
            .writeHead(200, { 'content-type': 'application/json' })
            .end(JSON.stringify(['Apollo', 'Gemini']));
        const problem = lockoutProblem({
          status: 'lockout',
          source: 'feed',
          lockout_at: null,
          pay_url: API_PAY_URL,
        } as Parameters<typeof lockoutProblem>[0]);
        res
          .writeHead(402, { 'content-type': 'application/problem+json', 'cache-control': 'no-store' })
          .end(JSON.stringify(problem));
        return;
      }
      if (url.pathname === '/api/me') {
        const customer = /(?:^|; )user=(cus_[A-Za-z0-9_]+)/.exec(req.headers.cookie ?? '')?.[1] ?? 'cus_nobody';
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ customer, hmac: computeHmac(acme.hmac_secret, customer) }));
        return;
      }
      const file = url.pathname === '/' ? 'index.html' : url.pathname.slice(1);
      const path = join(out, file);
      if (!path.startsWith(out) || !existsSync(path)) return void res.writeHead(404).end();
      res
        .writeHead(200, { 'content-type': TYPES[extname(path)] ?? 'application/octet-stream' })
        .end(readFileSync(path));
    });
    await new Promise<void>((done) => app.listen(0, '127.0.0.1', done));
    appOrigin = `http://localhost:${(app.address() as AddressInfo).port}`;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    mkdirSync(RESULTS, { recursive: true });
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await new Promise((done) => app?.close(done));
    await running?.close();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(out, { recursive: true, force: true });
  });

  async function signedIn(
    customer: string,
    options: { locale?: string; viewport?: { width: number; height: number } } = {},
  ): Promise<BrowserContext> {
    const context = await browser.newContext({
      viewport: options.viewport ?? { width: 1100, height: 720 },
      ...(options.locale ? { locale: options.locale } : {}),
    });
    await context.addCookies([{ name: 'user', value: customer, url: appOrigin }]);
    return context;
  }
  const billing = (page: Page) => page.getByTestId('billing').innerText();

  it('type-checks as written', () => {
    execFileSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', EXAMPLE], {
      stdio: 'pipe',
    });
  });

  it('shows the banner for a warning: the texts, the card update link, dismissed for the browser session', async () => {
    await setStatus('cus_warn', 'warning');
    const context = await signedIn('cus_warn');
    const page = await context.newPage();
    await page.goto(appOrigin);
    const banner = page.getByRole('alert');
    await expect.poll(() => banner.count()).toBe(1);
    expect(await banner.innerText()).toContain('Your last payment did not go through.');
    expect(await page.getByRole('link', { name: 'Update card' }).getAttribute('href')).toBe(CARD_URL);
    expect(await billing(page)).toBe('warning from service');
    // The scale tier's entitlement, from the same answer.
    await expect.poll(() => page.getByRole('button', { name: 'Set up your custom domain' }).count()).toBe(1);
    await page.screenshot({ path: join(RESULTS, 'react-banner.png') });
    await page.getByRole('button', { name: 'Dismiss' }).click();
    expect(await banner.count()).toBe(0);
    await page.reload();
    await expect.poll(() => billing(page)).toBe('warning from service');
    expect(await page.getByRole('alert').count()).toBe(0);
    await context.close();
  });

  it("speaks the reader's language from the tenant's branding", async () => {
    await setStatus('cus_fr', 'warning');
    const context = await signedIn('cus_fr', { locale: 'fr-FR' });
    const page = await context.newPage();
    await page.goto(appOrigin);
    await expect.poll(() => page.getByRole('alert').innerText()).toContain('Votre dernier paiement a échoué.');
    await context.close();
  });

  it('gates a lockout: a modal dialog holding the focus over an inert page, with no focus ring until the keyboard moves, and no way around it', async () => {
    await setStatus('cus_lock', 'lockout');
    const context = await signedIn('cus_lock');
    const page = await context.newPage();
    await page.goto(appOrigin);
    const dialog = page.getByRole('dialog', { name: 'Your account is on hold' });
    await expect.poll(() => dialog.count()).toBe(1);
    expect(await dialog.getAttribute('aria-modal')).toBe('true');
    // The dialog holds the focus, with no ring; the first Tab rings the first link.
    expect(await page.evaluate(() => document.activeElement?.getAttribute('role'))).toBe('dialog');
    expect(await page.evaluate(() => getComputedStyle(document.activeElement as Element).outlineStyle)).toBe('none');
    expect(await page.evaluate(() => document.querySelectorAll('.dunwall-box a:focus-visible').length)).toBe(0);
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Update card');
    expect(await page.evaluate(() => document.activeElement?.matches(':focus-visible'))).toBe(true);
    expect(await page.evaluate(() => getComputedStyle(document.activeElement as Element).outlineStyle)).toBe('solid');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Contact support');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe('Update card');
    await page.keyboard.press('Escape');
    expect(await dialog.count()).toBe(1);
    // The page behind is inert and does not scroll; its figures cannot be read through the backdrop.
    expect(await page.evaluate(() => (document.getElementById('root') as HTMLElement).inert)).toBe(true);
    expect(await page.evaluate(() => getComputedStyle(document.body).overflow)).toBe('hidden');
    const veil = await page.evaluate(
      () => getComputedStyle(document.querySelector('.dunwall-veil') as Element).backgroundColor,
    );
    expect(Number(/rgba?\([^)]*,\s*([\d.]+)\)$/.exec(veil)?.[1] ?? '1')).toBeGreaterThanOrEqual(0.95);
    await page.screenshot({ path: join(RESULTS, 'react-gate.png') });
    await context.close();
  });

  it('keeps the last answer for the next load: a reload with the lookup failing shows the banner from the copy, a copied lockout as the banner, never the gate', async () => {
    await setStatus('cus_back', 'lockout');
    const context = await signedIn('cus_back');
    const page = await context.newPage();
    await page.goto(appOrigin);
    await expect.poll(() => page.getByRole('dialog').count()).toBe(1);
    const kept = await page.evaluate(() => localStorage.getItem('dunwall:v1:acme:cus_back'));
    expect(JSON.parse(kept ?? '{}')).toMatchObject({ status: 'lockout' });
    expect(kept).not.toContain('pay_url');
    // The lookup fails: the copy says lockout, and it is shown as the banner, not the gate.
    await page.route(`${running.url}/api/subscriber-status/**`, (route) => route.abort());
    await page.reload();
    await expect.poll(() => billing(page)).toBe('warning from fallback');
    expect(await page.getByRole('alert').count()).toBe(1);
    expect(await page.getByRole('dialog').count()).toBe(0);
    await page.unroute(`${running.url}/api/subscriber-status/**`);

    // A warning kept, and the lookup failing again: the banner at once, from the copy.
    await setStatus('cus_back', 'warning');
    await page.reload();
    await expect.poll(() => billing(page)).toBe('warning from service');
    await page.route(`${running.url}/api/subscriber-status/**`, (route) => route.abort());
    await page.reload();
    await expect.poll(() => billing(page)).toBe('warning from fallback');
    expect(await page.getByRole('alert').innerText()).toContain('Your last payment did not go through.');
    expect(await page.getByRole('dialog').count()).toBe(0);
    await page.unroute(`${running.url}/api/subscriber-status/**`);

    // An active answer is kept too, and shown at once on the next load, with its entitlements.
    await setStatus('cus_back', 'active');
    await page.reload();
    await expect.poll(() => billing(page)).toBe('active from service');
    let release = () => {};
    const held = new Promise<void>((done) => (release = done));
    await page.route(`${running.url}/api/subscriber-status/**`, async (route) => {
      await held;
      await route.continue();
    });
    await page.reload();
    await expect.poll(() => billing(page)).toBe('active from persisted (asking)');
    expect(await page.getByRole('button', { name: 'Set up your custom domain' }).count()).toBe(1);
    release();
    await expect.poll(() => billing(page)).toBe('active from service');
    await context.close();
  });

  it("gates when the app's own API refuses with the 402 billing_lockout problem, as useBillingFetch() in the example hears it", async () => {
    await setStatus('cus_api', 'active');
    const served = await signedIn('cus_api');
    const page = await served.newPage();
    await page.goto(appOrigin);
    await expect.poll(() => page.getByRole('list', { name: 'Projects' }).innerText()).toContain('Apollo');
    expect(await billing(page)).toBe('active from service');
    expect(await page.getByRole('dialog').count()).toBe(0);
    await served.close();

    // The API refuses (its copy says lockout); Dunwall's lookup, from the browser, says active or cannot be reached.
    refusedByApi.add('cus_api');
    for (const reachable of [true, false]) {
      const context = await signedIn('cus_api');
      const refused = await context.newPage();
      if (!reachable) await refused.route(`${running.url}/**`, (route) => route.abort());
      await refused.goto(appOrigin);
      const dialog = refused.getByRole('dialog', { name: 'Your account is on hold' });
      await expect.poll(() => dialog.count()).toBe(1);
      expect(await dialog.getByRole('link', { name: 'Pay now' }).getAttribute('href')).toBe(API_PAY_URL);
      await expect.poll(() => billing(refused)).toBe('lockout from api');
      await context.close();
    }
    refusedByApi.delete('cus_api');
  });

  it('asks again when the window gets the focus back: the customer who paid elsewhere gets in at once', async () => {
    await setStatus('cus_pays', 'lockout');
    const context = await signedIn('cus_pays');
    const page = await context.newPage();
    await page.goto(appOrigin);
    await expect.poll(() => page.getByRole('dialog').count()).toBe(1);
    await setStatus('cus_pays', 'active');
    await page.evaluate(() => window.dispatchEvent(new Event('focus')));
    await expect.poll(() => page.getByRole('dialog').count()).toBe(0);
    expect(await billing(page)).toBe('active from service');
    // The page is given back.
    expect(await page.evaluate(() => (document.getElementById('root') as HTMLElement).inert)).toBe(false);
    expect(await page.evaluate(() => getComputedStyle(document.body).overflow)).not.toBe('hidden');
    await context.close();
  });

  it('offline then online: no gate from the failure, and the fresh answer once the network is back', async () => {
    await setStatus('cus_net', 'active');
    const context = await signedIn('cus_net');
    const page = await context.newPage();
    await page.goto(appOrigin);
    await expect.poll(() => billing(page)).toBe('active from service');
    await context.setOffline(true);
    await setStatus('cus_net', 'lockout');
    await page.evaluate(() => window.dispatchEvent(new Event('focus')));
    await expect.poll(() => billing(page)).toBe('active from fallback');
    expect(await page.getByRole('dialog').count()).toBe(0);
    await context.setOffline(false);
    await expect.poll(() => page.getByRole('dialog').count(), { timeout: 10_000 }).toBe(1);
    expect(await billing(page)).toBe('lockout from service');
    await context.close();
  });

  it("previews a test tenant's banner and gate: the countdown, and Pay now first, in a new tab", async () => {
    const context = await signedIn('cus_preview');
    const page = await context.newPage();
    await page.goto(`${appOrigin}/?preview=warning`);
    const banner = page.getByRole('alert');
    await expect.poll(() => banner.count()).toBe(1);
    await expect.poll(() => banner.locator('time').innerText()).toBe('Access will be paused in 7 days.');
    const pay = page.getByRole('link', { name: 'Pay now' });
    expect(await pay.getAttribute('href')).toBe(PAY_URL);
    expect(await pay.getAttribute('target')).toBe('_blank');
    await page.goto(`${appOrigin}/?preview=lockout`);
    const dialog = page.getByRole('dialog');
    await expect.poll(() => dialog.count()).toBe(1);
    expect(await dialog.getByRole('link').allInnerTexts()).toEqual(['Pay now', 'Contact support']);
    // Nothing of a preview is kept.
    expect(await page.evaluate(() => localStorage.getItem('dunwall:v1:acme:cus_preview'))).toBeNull();
    await context.close();
  });

  it('fits a phone: the banner wraps within a fifth of the screen', async () => {
    await setStatus('cus_phone', 'warning');
    const context = await signedIn('cus_phone', { viewport: { width: 375, height: 667 } });
    const page = await context.newPage();
    await page.goto(appOrigin);
    const banner = page.getByRole('alert');
    await expect.poll(() => banner.count()).toBe(1);
    const box = await banner.boundingBox();
    expect(box?.width).toBeLessThanOrEqual(375);
    expect(box?.height).toBeLessThan(667 / 5);
    await page.screenshot({ path: join(RESULTS, 'react-banner-phone.png') });
    await context.close();
  });
});
