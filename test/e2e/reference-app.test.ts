import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computeHmac } from '../../src/domain/hmac.js';
import { startAppProcess } from '../helpers/app-process.js';
import type { AppProcess } from '../helpers/app-process.js';
import { availableEngines, schemaScopedUrl } from '../helpers/engines.js';
import { withMigratedStore } from '../helpers/migrated-data-dir.js';
import {
  REQUEST_TIMEOUT_MS,
  adminCall,
  killAllServices,
  startBuiltServiceProcess,
  startServiceProcess,
} from '../helpers/service-process.js';
import type { ServiceProcess } from '../helpers/service-process.js';
import { event, hostedInvoiceUrl, invoice, paymentIds, signed } from '../helpers/stripe-fixtures.js';
import type { PaymentIds, StripeEventFixture } from '../helpers/stripe-fixtures.js';

/**
 * The reference app, examples/saas, as a team gets it running: its files copied into a project
 * of their own, its Dunwall packages installed from the tarballs a real Dunwall serves
 * (`npm install <dunwall>/packages/<name>.tgz`, the rest from the registry), its front end built
 * by Vite, its Express API started as `npm start` starts it, against Dunwall as a process of its
 * own, on the embedded store and on PostgreSQL. Chromium drives it through every state a
 * customer meets: active, warning, lockout, paid, a grace period ending, Dunwall down, and the
 * app's server started while Dunwall is down. Stripe's events are signed as Stripe signs them;
 * Stripe's hosted invoice page is never opened.
 *
 * One install and one Vite build serve both engines: the build's three Dunwall values (the
 * service's address, the tenant, its publishable key) are placeholders, written into the built
 * files for each engine's service, as a deploy step fills a built image's settings.
 */
const CHROMIUM = '/usr/bin/chromium';
const haveBrowser = existsSync(CHROMIUM);
if (!haveBrowser && process.env.CI === 'true') throw new Error(`${CHROMIUM} is required in CI (.ci/run installs it)`);
if (!haveBrowser) process.stderr.write(`\n*** ${CHROMIUM} not found: the reference app suite is SKIPPED. ***\n\n`);
const ROOT = resolve(import.meta.dirname, '../..');
const APP = join(ROOT, 'examples', 'saas');
const BUILT = existsSync(join(ROOT, 'dist', 'src', 'runtime', 'server.js'));
if (!BUILT && process.env.CI === 'true')
  throw new Error('dist/ is not built: CI builds it with npm ci before the tests');
if (!BUILT)
  process.stderr.write('\n*** dist/ is not built (npm run build): the reference app suite is SKIPPED. ***\n\n');

const engines = await availableEngines();
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const run = promisify(execFile);
const TOKEN = 'reference-app-admin-token-0123456789abcdefghij';
const STRIPE_SECRET = 'whsec_reference_app_0123456789abcdefghij';
const PLACEHOLDER = { url: 'https://dunwall.placeholder.invalid', key: 'pk_test_placeholder0000000000000000' };
const DAY_S = 86_400;
const LISTENING = /Acme listening on (http:\/\/\S+)/;
/** `npm start`'s arguments to node. */
const START = ['--import', 'tsx', 'server/index.ts'];

const customerId = () => `cus_Ref${Math.random().toString(36).slice(2, 12)}`;
const nowS = () => Math.floor(Date.now() / 1000);

describe.skipIf(!haveBrowser || !BUILT)('the reference app, examples/saas, as a team runs it', () => {
  const dirs: string[] = [];
  const tempDir = (prefix: string) => {
    const d = mkdtempSync(join(tmpdir(), prefix));
    dirs.push(d);
    return d;
  };
  let project = '';
  let built = '';
  let browser: Browser;
  /** The embedded store's service: it serves the tarballs the install takes, then runs the first engine's states. */
  let embeddedService: ServiceProcess;
  const apps: AppProcess[] = [];

  beforeAll(async () => {
    embeddedService = await startBuiltServiceProcess(withMigratedStore(tempDir('dunwall-refapp-data-')), TOKEN);
    project = tempDir('dunwall-refapp-');
    cpSync(APP, project, {
      recursive: true,
      filter: (src) => !/(^|\/)(node_modules|dist|package-lock\.json)$/.test(relative(APP, src)),
    });
    // The docs' install: the packages from the Dunwall that serves them, the rest as package.json says.
    const tarballs = ['node', 'react', 'react-native'].map((name) => `${embeddedService.base}/packages/${name}.tgz`);
    await run(npm, ['install', ...tarballs, '--no-audit', '--no-fund', '--prefer-offline'], {
      cwd: project,
      timeout: 240_000,
    });
    // `npm run build`, with placeholders for the values each engine's service fills in.
    await run(
      process.execPath,
      [join(project, 'node_modules', 'vite', 'bin', 'vite.js'), 'build', '--logLevel', 'error'],
      {
        cwd: project,
        env: {
          PATH: process.env.PATH ?? '',
          VITE_DUNWALL_URL: PLACEHOLDER.url,
          VITE_DUNWALL_TENANT: 'acme',
          VITE_DUNWALL_KEY: PLACEHOLDER.key,
        },
        timeout: 120_000,
      },
    );
    built = join(project, 'dist.built');
    renameSync(join(project, 'dist'), built);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
  }, 360_000);

  afterAll(async () => {
    await browser?.close();
    await Promise.all(apps.map((a) => a.kill()));
    await killAllServices();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('installs the Dunwall packages from the service, as the docs install them, and type-checks as written', async () => {
    const manifest = JSON.parse(readFileSync(join(project, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
      scripts: Record<string, string>;
    };
    // What the test starts is what `npm start` runs.
    expect(manifest.scripts.start).toBe(`node ${START.join(' ')}`);
    for (const name of ['node', 'react', 'react-native']) {
      expect(manifest.dependencies[`@dunwall/${name}`]).toBe(`${embeddedService.base}/packages/${name}.tgz`);
      expect(existsSync(join(project, 'node_modules', '@dunwall', name, 'package.json'))).toBe(true);
    }
    const checked = await run(
      process.execPath,
      [join(project, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', project],
      {
        cwd: project,
        timeout: 120_000,
      },
    ).then(
      () => 'ok',
      (err: { stdout?: string }) => err.stdout ?? String(err),
    );
    expect(checked).toBe('ok');
  });

  for (const engine of engines) {
    describe(`on the ${engine.name} store`, () => {
      let service: ServiceProcess;
      let dropSchema: (() => Promise<void>) | undefined;
      let tenant: { publishable_key: string; hmac_secret: string };
      let secretKey = '';
      let app: AppProcess;
      let appEnv: Record<string, string>;
      const contexts: BrowserContext[] = [];
      /** The customer taken from active to warning, lockout and back. */
      const customer = customerId();
      let ids: PaymentIds;
      const t0 = nowS() - 600;
      /** Grace: dunning started 4 days ago (the grace of 3 days has ended), and 1 day ago. */
      const graceEnded = customerId();
      const inGrace = customerId();

      beforeAll(async () => {
        if (engine.name === 'embedded') service = embeddedService;
        else {
          const scoped = await schemaScopedUrl('refapp');
          dropSchema = scoped.drop;
          service = await startServiceProcess(scoped.url, TOKEN);
        }
        tenant = (await admin('POST', '/tenants', { slug: 'acme' }, 201)) as typeof tenant;
        await admin('PATCH', '/tenants/acme', { stripe_webhook_secret: STRIPE_SECRET }, 200);
        secretKey = String(
          (
            (await admin('POST', '/tenants/acme/keys', { name: 'acme api', scopes: ['status:read'] }, 201)) as {
              secret_key: string;
            }
          ).secret_key,
        );

        // The built front end, its Dunwall values this engine's.
        rmSync(join(project, 'dist'), { recursive: true, force: true });
        cpSync(built, join(project, 'dist'), { recursive: true });
        const assets = join(project, 'dist', 'assets');
        for (const file of readdirSync(assets).filter((f) => f.endsWith('.js'))) {
          const js = readFileSync(join(assets, file), 'utf8');
          writeFileSync(
            join(assets, file),
            js.replaceAll(PLACEHOLDER.url, service.base).replaceAll(PLACEHOLDER.key, tenant.publishable_key),
          );
        }
        // `npm start`, with the settings the docs name.
        appEnv = {
          DUNWALL_URL: service.base,
          DUNWALL_SECRET_KEY: secretKey,
          DUNWALL_HMAC_SECRET: tenant.hmac_secret,
          HOST: '127.0.0.1',
          PORT: '0',
        };
        app = await startAppProcess(START, project, appEnv, LISTENING);
        apps.push(app);
      }, 120_000);

      afterAll(async () => {
        for (const c of contexts.splice(0)) await c.close();
        await app?.kill();
        if (engine.name !== 'embedded') await killService(service);
        await dropSchema?.();
      });

      async function admin(method: string, path: string, body: unknown, expected: number): Promise<unknown> {
        const res = await adminCall(service.base, TOKEN, method, path, body);
        if (res.status !== expected) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
        return res.json();
      }

      async function stripe(fixture: StripeEventFixture): Promise<void> {
        const { payload, signature } = signed(fixture, STRIPE_SECRET, nowS());
        const res = await fetch(`${service.base}/webhooks/stripe/acme`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'stripe-signature': signature },
          body: payload,
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
        expect(res.status, await res.text()).toBe(200);
      }

      /** The app's API as the browser's fetch asks it, for the customer `who` (null: signed out). */
      async function api(
        path: string,
        who: string | null,
        base = app.url,
      ): Promise<{ status: number; type: string | null; body: Record<string, unknown> }> {
        const res = await fetch(`${base}${path}`, {
          headers: who === null ? {} : { cookie: `customer=${who}` },
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
        return {
          status: res.status,
          type: res.headers.get('content-type'),
          body: (await res.json()) as Record<string, unknown>,
        };
      }
      const apiStatus = async (path: string, who: string) => (await api(path, who)).status;
      /** What Dunwall's lookup answers for `who` (what the page is told when it asks). */
      async function lookup(who: string): Promise<string> {
        const res = await fetch(`${service.base}/api/subscriber-status/acme?processor_customer_id=${who}`, {
          headers: { authorization: `Bearer ${tenant.publishable_key}` },
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
        return ((await res.json()) as { status: string }).status;
      }

      /** A browser signed in as `who` through the app's own sign-in; a new context: nothing kept from another. */
      async function signedIn(who: string): Promise<Page> {
        const context = await browser.newContext({ viewport: { width: 1000, height: 700 } });
        contexts.push(context);
        // Stripe's hosted invoice page is never opened from here.
        await context.route('https://invoice.stripe.com/**', (route) =>
          route.fulfill({ contentType: 'text/html', body: '<title>Invoice</title>' }),
        );
        const page = await context.newPage();
        page.on('pageerror', (err) => process.stderr.write(`page error: ${err.message}\n`));
        await page.goto(`${app.url}/signin?customer=${who}`);
        return page;
      }
      const billing = (page: Page) => page.getByTestId('billing').innerText();
      const apiLine = (page: Page) => page.getByTestId('api').innerText();
      const gate = (page: Page) => page.getByRole('dialog');
      const banner = (page: Page) => page.getByRole('alert');

      it('active: the page shows nothing, the API serves, /api/me names the customer with its hmac', async () => {
        expect(await api('/api/me', null)).toMatchObject({ status: 200, body: { customer: null, hmac: null } });
        expect((await api('/api/me', customer)).body).toEqual({
          customer,
          hmac: computeHmac(tenant.hmac_secret, customer),
        });
        expect(await api('/api/projects', customer)).toMatchObject({
          status: 200,
          body: { projects: [{ name: 'Website' }, { name: 'Mobile app' }] },
        });

        const page = await signedIn(customer);
        await expect.poll(() => billing(page)).toBe('Billing: active from service');
        await expect.poll(() => apiLine(page)).toBe('API: 2 projects');
        expect(await banner(page).count()).toBe(0);
        expect(await gate(page).count()).toBe(0);

        await page.goto(`${app.url}/mobile.html`);
        await expect.poll(() => page.getByText('Everything is paid up.').isVisible()).toBe(true);
        expect(await banner(page).count()).toBe(0);
      });

      it('warning: the banner with Pay now to the invoice, on the web and the mobile screen; the API still serving', async () => {
        ids = paymentIds();
        await stripe(
          event('invoice.payment_failed', invoice(customer, { ids, next_payment_attempt: t0 + 3 * DAY_S }), {
            created: t0,
          }),
        );
        await expect.poll(() => lookup(customer)).toBe('warning');
        const page = await signedIn(customer);
        await expect.poll(() => billing(page)).toBe('Billing: warning from service');
        await expect.poll(() => banner(page).isVisible()).toBe(true);
        expect(await banner(page).getByRole('link', { name: 'Pay now' }).getAttribute('href')).toBe(
          hostedInvoiceUrl(ids.invoice),
        );
        expect(await gate(page).count()).toBe(0);
        await expect.poll(() => apiLine(page)).toBe('API: 2 projects');
        expect(await apiStatus('/api/projects', customer)).toBe(200);

        await page.goto(`${app.url}/mobile.html`);
        await expect.poll(() => banner(page).isVisible()).toBe(true);
        expect(await banner(page).getByRole('link', { name: 'Pay now' }).count()).toBe(1);
        expect(await page.getByText('Your plan needs attention.').isVisible()).toBe(true);
      });

      let locked: Page;
      it('lockout: the gate over the app and the mobile screen, every protected API call 402 with the problem, /api/me still answering', async () => {
        await stripe(
          event('invoice.payment_failed', invoice(customer, { ids, next_payment_attempt: null }), { created: t0 + 10 }),
        );
        await expect.poll(() => lookup(customer)).toBe('lockout');
        // The API's copy follows Dunwall's feed.
        await expect.poll(() => apiStatus('/api/projects', customer), { timeout: 10_000 }).toBe(402);
        for (const path of ['/api/projects', '/api/usage']) {
          const refused = await api(path, customer);
          expect(refused.type, path).toMatch(/^application\/problem\+json/);
          expect(refused.body, path).toMatchObject({
            status: 402,
            code: 'billing_lockout',
            pay_url: hostedInvoiceUrl(ids.invoice),
          });
        }
        expect(await api('/api/me', customer)).toMatchObject({ status: 200, body: { customer } });

        const mobile = await signedIn(customer);
        await mobile.goto(`${app.url}/mobile.html`);
        await expect
          .poll(() => mobile.getByRole('heading', { name: 'Your account is on hold' }).isVisible())
          .toBe(true);

        locked = await signedIn(customer);
        await expect.poll(() => gate(locked).isVisible()).toBe(true);
        // Dunwall's answer or the API's 402 through useBillingFetch(), whichever the page had first.
        expect(await billing(locked)).toMatch(/^Billing: lockout from (service|api)$/);
        expect(await gate(locked).getByRole('link', { name: 'Pay now' }).getAttribute('href')).toBe(
          hostedInvoiceUrl(ids.invoice),
        );
        await expect.poll(() => apiLine(locked)).toBe('API: 402 billing_lockout');
      });

      it('paid: the gate gone within 2 s of the tab coming back, and the API serving again', async () => {
        await stripe(event('invoice.paid', invoice(customer, { ids, status: 'paid' }), { created: t0 + 20 }));
        // Dunwall knows; the tab has not asked since.
        await expect.poll(() => lookup(customer)).toBe('active');
        expect(await gate(locked).isVisible()).toBe(true);
        // The customer comes back to the tab: the time from its return to the gate's removal, in the page's clock.
        const gone = await locked.evaluate(
          () =>
            new Promise<number>((resolve) => {
              const start = performance.now();
              const done = () => {
                if (document.querySelector('[role="dialog"]') !== null) return;
                observer.disconnect();
                resolve(performance.now() - start);
              };
              const observer = new MutationObserver(done);
              observer.observe(document.body, { childList: true, subtree: true });
              document.dispatchEvent(new Event('visibilitychange'));
              done();
              setTimeout(() => resolve(-1), 10_000);
            }),
        );
        expect(gone).toBeGreaterThanOrEqual(0);
        expect(gone).toBeLessThan(2_000);
        await expect.poll(() => billing(locked)).toBe('Billing: active from service');
        await expect.poll(() => apiStatus('/api/projects', customer), { timeout: 10_000 }).toBe(200);
        await locked.reload();
        await expect.poll(() => apiLine(locked)).toBe('API: 2 projects');
        expect(await gate(locked).count()).toBe(0);
        expect(await banner(locked).count()).toBe(0);
      });

      it("a grace period ending: with grace_days 3, a dunning start 4 days old is the gate, one a day old the banner's countdown", async () => {
        await admin('PATCH', '/tenants/acme', { policy: { grace_days: 3 } }, 200);
        const now = nowS();
        await stripe(
          event('invoice.payment_failed', invoice(graceEnded, { next_payment_attempt: null }), {
            created: now - 4 * DAY_S,
          }),
        );
        await stripe(
          event('invoice.payment_failed', invoice(inGrace, { next_payment_attempt: null }), { created: now - DAY_S }),
        );
        await expect.poll(() => lookup(graceEnded)).toBe('lockout');
        await expect.poll(() => lookup(inGrace)).toBe('warning');
        await expect.poll(() => apiStatus('/api/projects', graceEnded), { timeout: 10_000 }).toBe(402);
        expect(await apiStatus('/api/projects', inGrace)).toBe(200);

        const ended = await signedIn(graceEnded);
        await expect.poll(() => gate(ended).isVisible()).toBe(true);
        const grace = await signedIn(inGrace);
        await expect.poll(() => banner(grace).isVisible()).toBe(true);
        expect(await banner(grace).innerText()).toContain('Access will be paused in 2 days.');
        expect(await gate(grace).count()).toBe(0);
      });

      it("Dunwall down: the pages fail open, the API answers at once from its copy, and the page follows the API's refusal", async () => {
        await killService(service);
        // The running API answers from its copy: the paid customer served; the locked-out one
        // keeps Dunwall's last word until the copy is stale (staleAfterMs, 60 s by default).
        expect(await apiStatus('/api/projects', customer)).toBe(200);
        expect(await apiStatus('/api/projects', graceEnded)).toBe(402);
        // That customer, on a browser that kept nothing: Dunwall cannot be asked, and the API's
        // 402 (a fresh word of the tenant's server) is what gates the page, with its Pay now.
        const page = await signedIn(graceEnded);
        await expect.poll(() => billing(page), { timeout: 10_000 }).toBe('Billing: lockout from api');
        expect(await gate(page).isVisible()).toBe(true);
        const active = await signedIn(customer);
        await expect.poll(() => billing(active), { timeout: 10_000 }).toBe('Billing: active from fallback');
        await expect.poll(() => apiLine(active)).toBe('API: 2 projects');
      });

      it("the app's server started while Dunwall is down: it listens and lets everyone through", async () => {
        const second = await startAppProcess(START, project, appEnv, LISTENING);
        apps.push(second);
        for (const who of [customer, graceEnded, inGrace])
          expect((await api('/api/projects', who, second.url)).status, who).toBe(200);
        expect((await api('/api/me', graceEnded, second.url)).body).toEqual({
          customer: graceEnded,
          hmac: computeHmac(tenant.hmac_secret, graceEnded),
        });
        await second.kill();
      });
    });
  }
});

/** Stops a service process outright, as a crash or an outage would. */
async function killService(service: ServiceProcess): Promise<void> {
  if (service.child.exitCode === null && service.child.signalCode === null) service.child.kill('SIGKILL');
  await service.exited;
}
