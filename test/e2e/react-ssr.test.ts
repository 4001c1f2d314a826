import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import type { Plugin } from 'esbuild';
import { chromium } from 'playwright-core';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { computeHmac } from '../../src/domain/hmac.js';
import type { App } from '../../src/http/app.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/index.js';
import { ADMIN_TOKEN, adminRequest, buildAppWithModel } from '../helpers/harness.js';
import { portOf } from '../helpers/socket.js';
import { LEGACY_API, event, hostedInvoiceUrl, invoice, paymentIds, signed } from '../helpers/stripe-fixtures.js';
import type { ClientProps } from './react-ssr-app/server.js';

/**
 * docs/examples/nextjs as Next.js runs it, in Chromium: the layout gets the customer's
 * status from a real Dunwall with a secret key (`lib/dunwall.ts`'s copy, `pageBootstrap`), the client component renders
 * on the server with that bootstrap (`react-dom/server`), the browser hydrates it
 * (`hydrateRoot`) and asks Dunwall itself, cross-origin, with the publishable key and the
 * hmac. With React 19, and React 18 from the registry.
 *
 * What must hold: the banner is in the server's HTML and shown before any script runs (no
 * flash); hydration is silent (no warning, no recovered error: a control page whose props
 * differ shows that both would be seen); then the page follows Dunwall's fresh answer; and
 * a gate comes only from a fresh answer, never from the bootstrap.
 */
const CHROMIUM = '/usr/bin/chromium';
const haveBrowser = existsSync(CHROMIUM);
if (!haveBrowser && process.env.CI === 'true') throw new Error(`${CHROMIUM} is required in CI (.ci/run installs it)`);
if (!haveBrowser) process.stderr.write(`\n*** ${CHROMIUM} not found: the server rendering suite is SKIPPED. ***\n\n`);

const ROOT = resolve(import.meta.dirname, '../..');
const RESULTS = join(ROOT, 'test-results');
const APP = join(ROOT, 'test', 'e2e', 'react-ssr-app');
const STRIPE_SECRET = 'whsec_react_ssr_0123456789abcdef';
const DAY_MS = 86_400_000;
const WAIT = { timeout: 10_000, interval: 50 };
/** What React says of a hydration that went wrong, in 18 and 19. */
const HYDRATION = /hydrat|did not match|didn't match|server html|server rendered/i;
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';

type Version = '19' | '18';
const VERSIONS: Version[] = ['19', '18'];

interface Built {
  renderPage(customer: string | null): Promise<{ html: string; props: ClientProps; react: string }>;
  /** Stops lib/dunwall.ts's copy. */
  close(): Promise<void>;
  client: Uint8Array;
}

/** Customers of each run, named by what Dunwall says of them when the page is rendered. */
interface Customers {
  /** A soft decline: `warning`, its invoice's pay link, a lockout in 14 days. */
  dunning: string;
  /** No record: `active`. */
  fresh: string;
  /** Retries exhausted: `lockout`, with the pay link. */
  lockout: string;
  /** `lockout`, for the page whose own lookup fails. */
  away: string;
  /** `warning`, for the control. */
  control: string;
}

/** Imports of `react` and `react-dom` resolved from `dir` (another React than the checkout's). */
function reactFrom(dir: string | null): Plugin {
  return {
    name: 'react-from',
    setup(b) {
      if (dir === null) return;
      b.onResolve({ filter: /^react(-dom)?(\/.*)?$/ }, (args) =>
        args.pluginData === 'react-from'
          ? undefined
          : b.resolve(args.path, { kind: args.kind, resolveDir: dir, pluginData: 'react-from' }),
      );
    },
  };
}

describe('docs/nextjs.md', () => {
  it('shows every file of docs/examples/nextjs exactly as it is (but the sign-in stand-in), and the middleware of docs/servers.md', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'nextjs.md'), 'utf8');
    const blocks = [...doc.matchAll(/<!-- (docs\/examples\/\S+) -->\n```tsx?\n([\s\S]*?)```\n/g)].map(
      ([, path = '', code = '']) => [path, code] as const,
    );
    const shown = ['app/billing.tsx', 'app/layout.tsx', 'lib/dunwall.ts'].map((f) => `docs/examples/nextjs/${f}`);
    const files = readdirSync(join(ROOT, 'docs', 'examples', 'nextjs'), { recursive: true, encoding: 'utf8' })
      .filter((f) => /\.tsx?$/.test(f))
      .map((f) => `docs/examples/nextjs/${f}`);
    expect(files.sort()).toEqual([...shown, 'docs/examples/nextjs/lib/session.ts'].sort());
    expect(blocks.map(([path]) => path).sort()).toEqual([...shown, 'docs/examples/next-middleware.ts'].sort());
    for (const [path, code] of blocks) expect(code, path).toBe(readFileSync(join(ROOT, path), 'utf8'));
    expect(doc.match(/```tsx?\n/g)?.length).toBe(blocks.length);
  });
});

describe.skipIf(!haveBrowser)('docs/examples/nextjs: server rendered, then hydrated in Chromium', () => {
  let store: Store;
  let app: App;
  let serviceUrl = '';
  let pageServer: Server;
  let pageOrigin = '';
  let browser: Browser;
  let hmacSecret = '';
  let secretKey = '';
  let lockoutAt = '';
  const payUrls = new Map<string, string>();
  const built = new Map<Version, Built>();
  const customers = new Map<Version, Customers>();
  const dirs: string[] = [];
  /** The server bundles. */
  let workDir = '';
  const ENV = [
    'DUNWALL_URL',
    'DUNWALL_SECRET_KEY',
    'DUNWALL_HMAC_SECRET',
    'NEXT_PUBLIC_DUNWALL_URL',
    'NEXT_PUBLIC_DUNWALL_TENANT',
    'NEXT_PUBLIC_DUNWALL_PUBLISHABLE_KEY',
  ];
  const savedEnv = Object.fromEntries(ENV.map((k) => [k, process.env[k]]));
  /** Runs once, after the next page is rendered and before it is sent: Dunwall changes its mind meanwhile. */
  let afterRender: (() => Promise<void>) | null = null;

  const admin = async (method: string, path: string, body?: unknown): Promise<Record<string, unknown>> => {
    const res = await adminRequest(app, method, path, body);
    if (res.statusCode >= 300) throw new Error(`${method} ${path}: ${res.statusCode} ${res.body}`);
    return res.json() as Record<string, unknown>;
  };

  /** A failed invoice as Stripe sends it; returns its pay link. */
  async function failed(customerId: string, nowS: number, nextAttemptS: number | null): Promise<string> {
    const ids = paymentIds();
    const fixture = event(
      'invoice.payment_failed',
      invoice(customerId, { api: LEGACY_API, ids, next_payment_attempt: nextAttemptS }),
      {
        created: nowS,
        api: LEGACY_API,
      },
    );
    const { payload, signature } = signed(fixture, STRIPE_SECRET, nowS);
    const res = await app.inject({
      method: 'POST',
      url: '/webhooks/stripe/acme',
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      payload,
    });
    if (res.statusCode !== 200) throw new Error(`Stripe webhook: ${res.statusCode} ${res.body}`);
    return hostedInvoiceUrl(ids.invoice);
  }

  /** Sets a customer's status, and waits until Dunwall answers it. */
  async function setStatus(customerId: string, status: 'active' | 'warning' | 'lockout'): Promise<void> {
    await admin('PUT', `/tenants/acme/subscribers/${customerId}`, { status });
    await vi.waitFor(async () => {
      const res = await fetch(`${serviceUrl}/v1/subscribers/${customerId}/status`, {
        headers: { authorization: `Bearer ${secretKey}` },
      });
      expect(((await res.json()) as { status: string }).status).toBe(status);
    }, WAIT);
  }

  /** React 18 and its react-dom from the registry, into a folder of their own; null when it cannot be had. */
  async function installReact18(): Promise<string | null> {
    const dir = mkdtempSync(join(tmpdir(), 'dunwall-react18-'));
    dirs.push(dir);
    try {
      await promisify(execFile)(
        npm,
        ['install', 'react@18', 'react-dom@18', '--no-audit', '--no-fund', '--no-save', '--prefer-offline'],
        {
          cwd: dir,
          timeout: 90_000,
        },
      );
      return dir;
    } catch (err) {
      if (process.env.CI === 'true') throw err;
      process.stderr.write(
        `\n*** react@18 could not be installed (${(err as Error).message.split('\n')[0]}): the React 18 run is SKIPPED. ***\n\n`,
      );
      return null;
    }
  }

  async function buildFor(version: Version, reactDir: string | null): Promise<Built> {
    const common = {
      bundle: true,
      jsx: 'automatic' as const,
      alias: {
        '@dunwall/react': join(ROOT, 'packages', 'react', 'src', 'index.ts'),
        '@dunwall/node': join(ROOT, 'packages', 'node', 'src', 'index.ts'),
      },
      plugins: [reactFrom(reactDir)],
      logLevel: 'error' as const,
    };
    // The server's: a CommonJS module for this process, React bundled in.
    const serverFile = join(workDir, `server-${version}.cjs`);
    await build({
      ...common,
      entryPoints: [join(APP, 'server.tsx')],
      platform: 'node',
      format: 'cjs',
      target: 'node20',
      outfile: serverFile,
    });
    // The browser's: development React, which reports hydration mismatches; the public settings inlined as Next.js does.
    const client = await build({
      ...common,
      entryPoints: [join(APP, 'client.tsx')],
      platform: 'browser',
      format: 'esm',
      target: 'es2022',
      write: false,
      define: {
        'process.env.NODE_ENV': '"development"',
        'process.env.NEXT_PUBLIC_DUNWALL_URL': JSON.stringify(process.env.NEXT_PUBLIC_DUNWALL_URL),
        'process.env.NEXT_PUBLIC_DUNWALL_TENANT': JSON.stringify(process.env.NEXT_PUBLIC_DUNWALL_TENANT),
        'process.env.NEXT_PUBLIC_DUNWALL_PUBLISHABLE_KEY': JSON.stringify(
          process.env.NEXT_PUBLIC_DUNWALL_PUBLISHABLE_KEY,
        ),
      },
    });
    const server = createRequire(import.meta.url)(serverFile) as Pick<Built, 'renderPage' | 'close'>;
    const [bundle] = client.outputFiles;
    if (!bundle) throw new Error('esbuild wrote no client bundle');
    return { renderPage: server.renderPage, close: server.close, client: bundle.contents };
  }

  async function servePage(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://page.test');
    const script = /^\/client-(18|19)\.js$/.exec(url.pathname);
    const version = (script?.[1] ?? url.searchParams.get('react') ?? '') as Version;
    const app = built.get(version);
    if (url.pathname === '/app' && app) {
      const { html, props } = await app.renderPage(url.searchParams.get('customer'));
      const then = afterRender;
      afterRender = null;
      await then?.();
      // The page: the server's HTML, a check of what shows before any script runs, the props, then React.
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Acme</title></head><body>
<div id="root">${html}</div>
<script>window.__beforeScripts = { banner: (document.querySelector('#root [role="alert"]')?.getBoundingClientRect().height ?? 0) > 0, gate: document.querySelector('.dunwall-veil') !== null };</script>
<script id="billing-props" type="application/json">${JSON.stringify(props).replace(/</g, '\\u003c')}</script>
<script type="module" src="/client-${version}.js${url.search}"></script>
</body></html>`);
      return;
    }
    if (script && app) {
      res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' }).end(app.client);
      return;
    }
    res.writeHead(url.pathname === '/favicon.ico' ? 204 : 404).end();
  }

  beforeAll(async () => {
    workDir = mkdtempSync(join(tmpdir(), 'dunwall-ssr-'));
    dirs.push(workDir);
    const react18 = installReact18();
    store = await openStore({ engine: 'embedded', dataDir: null });
    app = await buildAppWithModel({ store, adminToken: ADMIN_TOKEN });
    serviceUrl = `http://127.0.0.1:${await portOf(app)}`;
    pageServer = createServer((req, res) => {
      servePage(req, res).catch((err: unknown) => {
        process.stderr.write(`react-ssr page server: ${String(err)}\n`);
        if (!res.headersSent) res.writeHead(500);
        res.end();
      });
    });
    await new Promise<void>((done) => pageServer.listen(0, '127.0.0.1', done));
    pageOrigin = `http://127.0.0.1:${(pageServer.address() as AddressInfo).port}`;

    // The tenant: its app's origin only, a warning escalated after 14 days, a secret key to read statuses.
    const tenant = await admin('POST', '/tenants', {
      slug: 'acme',
      policy: { escalate_after_days: 14 },
      allowed_origins: [pageOrigin],
    });
    await admin('PATCH', '/tenants/acme', { stripe_webhook_secret: STRIPE_SECRET });
    const key = await admin('POST', '/tenants/acme/keys', { name: 'next.js server', scopes: ['status:read'] });
    hmacSecret = String(tenant.hmac_secret);
    secretKey = String(key.secret_key);
    // What the Next.js app is deployed with: lib/dunwall.ts's (server) and app/billing.tsx's (public).
    Object.assign(process.env, {
      DUNWALL_URL: serviceUrl,
      DUNWALL_SECRET_KEY: secretKey,
      DUNWALL_HMAC_SECRET: hmacSecret,
      NEXT_PUBLIC_DUNWALL_URL: serviceUrl,
      NEXT_PUBLIC_DUNWALL_TENANT: 'acme',
      NEXT_PUBLIC_DUNWALL_PUBLISHABLE_KEY: String(tenant.publishable_key),
    });

    const nowS = Math.floor(Date.now() / 1000);
    for (const v of VERSIONS) {
      const c: Customers = {
        dunning: `cus_dunning_${v}`,
        fresh: `cus_fresh_${v}`,
        lockout: `cus_lockout_${v}`,
        away: `cus_away_${v}`,
        control: `cus_control_${v}`,
      };
      payUrls.set(c.dunning, await failed(c.dunning, nowS, nowS + 3 * 86_400));
      payUrls.set(c.lockout, await failed(c.lockout, nowS, null));
      payUrls.set(c.away, await failed(c.away, nowS, null));
      await setStatus(c.control, 'warning');
      customers.set(v, c);
    }
    lockoutAt = new Date(nowS * 1000 + 14 * DAY_MS).toISOString().replace('.000Z', 'Z');

    built.set('19', await buildFor('19', null));
    const dir18 = await react18;
    if (dir18 !== null) built.set('18', await buildFor('18', join(dir18, 'node_modules')));
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    mkdirSync(RESULTS, { recursive: true });
  }, 180_000);

  afterAll(async () => {
    for (const b of built.values()) await b.close();
    await browser?.close();
    await new Promise((done) => pageServer?.close(done));
    await app?.close();
    await store?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    for (const k of ENV) {
      if (savedEnv[k] === undefined) delete process.env[k];
      else process.env[k] = savedEnv[k];
    }
  });

  interface Opened {
    page: Page;
    /** What the server rendered into the page, as the browser got it. */
    body: string;
    /** Every console message of level error or warning, and every uncaught error. */
    problems: string[];
    close(): Promise<void>;
  }

  /** Opens the app as `customer` in a new browser context (no copy kept from another page). */
  async function open(
    version: Version,
    customer: string,
    opts: { javaScript?: boolean; query?: string; before?: (page: Page) => Promise<unknown> } = {},
  ): Promise<Opened> {
    const context = await browser.newContext({
      viewport: { width: 1000, height: 700 },
      javaScriptEnabled: opts.javaScript ?? true,
    });
    const page = await context.newPage();
    const problems: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error' || m.type() === 'warning') problems.push(`${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
    await opts.before?.(page);
    const response = await page.goto(
      `${pageOrigin}/app?${new URLSearchParams({ react: version, customer })}${opts.query ?? ''}`,
    );
    if (!response || response.status() !== 200) throw new Error(`the app answered ${response?.status()}`);
    const page_ = await response.text();
    const body = page_.slice(page_.indexOf('<div id="root">'), page_.indexOf('<script>'));
    if (opts.javaScript ?? true) {
      await page.waitForFunction(() => document.documentElement.dataset.hydrated === 'true', undefined, {
        timeout: 10_000,
      });
      expect(await page.evaluate(() => (window as unknown as { __react: string }).__react)).toMatch(
        new RegExp(`^${version}\\.`),
      );
    }
    return { page, body, problems, close: () => context.close() };
  }

  const recovered = (page: Page) =>
    page.evaluate(() => (window as unknown as { __recoverable: string[] }).__recoverable);
  const beforeScripts = (page: Page) =>
    page.evaluate(() => (window as unknown as { __beforeScripts: { banner: boolean; gate: boolean } }).__beforeScripts);
  const readout = (page: Page) =>
    page.locator('#billing-readout').evaluate((p) => `${p.dataset.status}/${p.dataset.source}`);
  const banner = (page: Page) => page.locator('#root [role="alert"]');
  const gate = (page: Page) => page.locator('.dunwall-veil [role="dialog"]');

  /** Hydrated in silence: nothing React said of hydration, nothing it recovered from. */
  async function expectSilentHydration(o: Opened, allowed: RegExp | null = null): Promise<void> {
    expect(o.problems.filter((p) => HYDRATION.test(p))).toEqual([]);
    expect(await recovered(o.page)).toEqual([]);
    expect(o.problems.filter((p) => !allowed?.test(p))).toEqual([]);
  }

  const needs = (version: Version, skip: () => void) => {
    if (!built.has(version)) skip();
    return customers.get(version) as Customers;
  };

  describe.each(VERSIONS)('with React %s', (version) => {
    it('server renders a warning with its lockout date: shown with no script, hydrated in silence, then gone once Dunwall says active', async (ctx) => {
      const c = needs(version, () => ctx.skip());
      const payUrl = payUrls.get(c.dunning);

      // No JavaScript at all: the server's HTML alone shows the banner, its pay link and its date.
      const plain = await open(version, c.dunning, { javaScript: false });
      expect(plain.body).toContain('role="alert"');
      expect(plain.body).toMatch(new RegExp(`<time datetime="${lockoutAt}"`, 'i'));
      expect(await banner(plain.page).isVisible()).toBe(true);
      expect(await banner(plain.page).locator('a').first().getAttribute('href')).toBe(payUrl);
      expect(await banner(plain.page).locator('time').getAttribute('datetime')).toBe(lockoutAt);
      expect(await gate(plain.page).count()).toBe(0);
      await plain.page.screenshot({ path: join(RESULTS, `react-ssr-${version}-warning-no-script.png`) });
      await plain.close();

      const o = await open(version, c.dunning);
      expect(await beforeScripts(o.page)).toEqual({ banner: true, gate: false });
      // The browser's own answer (the hmac it was given brings the pay link): the same warning, now with its countdown.
      await expect.poll(() => readout(o.page), WAIT).toBe('warning/service');
      await expect
        .poll(() => banner(o.page).locator('time').textContent(), WAIT)
        .toBe('Access will be paused in 14 days.');
      expect(await banner(o.page).locator('a').first().getAttribute('href')).toBe(payUrl);
      await o.page.screenshot({ path: join(RESULTS, `react-ssr-${version}-warning.png`) });
      await expectSilentHydration(o);

      // The customer paid; back on the tab, the page asks again and the banner goes.
      await setStatus(c.dunning, 'active');
      await o.page.evaluate(() => window.dispatchEvent(new Event('focus')));
      await expect.poll(() => readout(o.page), WAIT).toBe('active/service');
      expect(await banner(o.page).count()).toBe(0);
      await expectSilentHydration(o);
      await o.close();
    });

    it('server renders an active customer with no banner, and shows one once Dunwall says warning', async (ctx) => {
      const c = needs(version, () => ctx.skip());
      afterRender = () => setStatus(c.fresh, 'warning');
      const o = await open(version, c.fresh);
      expect(o.body).not.toContain('role="alert"');
      expect(await beforeScripts(o.page)).toEqual({ banner: false, gate: false });
      await expect.poll(() => readout(o.page), WAIT).toBe('warning/service');
      expect(await banner(o.page).isVisible()).toBe(true);
      await expectSilentHydration(o);
      await o.close();
    });

    it('server renders a lockout as a banner, never a gate; the gate comes with the browser’s own answer', async (ctx) => {
      const c = needs(version, () => ctx.skip());
      const payUrl = payUrls.get(c.lockout);

      const plain = await open(version, c.lockout, { javaScript: false });
      expect(plain.body).toContain('role="alert"');
      expect(plain.body).not.toContain('role="dialog"');
      expect(await banner(plain.page).isVisible()).toBe(true);
      expect(await gate(plain.page).count()).toBe(0);
      await plain.close();

      const o = await open(version, c.lockout);
      expect(await beforeScripts(o.page)).toEqual({ banner: true, gate: false });
      await expect.poll(() => readout(o.page), WAIT).toBe('lockout/service');
      await expect.poll(() => gate(o.page).isVisible(), WAIT).toBe(true);
      expect(await banner(o.page).count()).toBe(0);
      expect(await gate(o.page).locator('a').first().getAttribute('href')).toBe(payUrl);
      await o.page.screenshot({ path: join(RESULTS, `react-ssr-${version}-gate.png`) });
      await expectSilentHydration(o);
      await o.close();
    });

    it('keeps a lockout bootstrap a banner when the browser cannot reach Dunwall: fail open, no gate', async (ctx) => {
      const c = needs(version, () => ctx.skip());
      const lookups: string[] = [];
      const o = await open(version, c.away, {
        before: (page) =>
          page.route(`${serviceUrl}/**`, (route) => {
            if (route.request().url().includes('/api/subscriber-status/')) lookups.push(route.request().url());
            return route.abort('connectionrefused');
          }),
      });
      await expect.poll(() => readout(o.page), WAIT).toBe('warning/fallback');
      expect(lookups).toHaveLength(1);
      expect(await banner(o.page).isVisible()).toBe(true);
      expect(await gate(o.page).count()).toBe(0);
      await o.page.screenshot({ path: join(RESULTS, `react-ssr-${version}-away.png`) });
      // The refused requests (the lookup, and the check that the service answers at all) are the errors the console shows,
      // and the one warning says why, once.
      await expect
        .poll(() => o.problems.filter((p) => p.startsWith('warning: [dunwall]')), WAIT)
        .toEqual(['warning: [dunwall] network: Failed to fetch; failing open']);
      await expectSilentHydration(
        o,
        /Failed to load resource: net::ERR_CONNECTION_REFUSED|^warning: \[dunwall\] network: /,
      );
      await o.close();
    });

    it('the control: a client hydrating other props than the server rendered with is reported, as these checks rely on', async (ctx) => {
      const c = needs(version, () => ctx.skip());
      const o = await open(version, c.control, { query: '&tamper=1' });
      expect(o.body).toContain('role="alert"');
      await expect.poll(() => recovered(o.page), WAIT).not.toEqual([]);
      const said = [...(await recovered(o.page)), ...o.problems];
      expect(
        said.filter((m) => HYDRATION.test(m)),
        said.join('\n'),
      ).not.toEqual([]);
      await o.close();
    });
  });

  it("renders what lib/dunwall.ts's pageBootstrap gave: Dunwall's answer, and the customer id signed with the HMAC secret", async () => {
    const c = customers.get('19') as Customers;
    const server = built.get('19') as Built;
    const { props } = await server.renderPage(c.lockout);
    expect(props.customer).toBe(c.lockout);
    expect(props.hmac).toBe(computeHmac(hmacSecret, c.lockout));
    expect(props.bootstrap).toMatchObject({ status: 'lockout', pay_url: payUrls.get(c.lockout) });
    expect(typeof props.bootstrap?.at).toBe('number');
    // Signed out: no customer, nothing asked, nothing shown.
    const out = await server.renderPage(null);
    expect(out.props).toEqual({ customer: null, hmac: null, bootstrap: null });
    expect(out.html).not.toContain('dunwall');
    // (Dunwall out of reach, or the key refused: test/packages/node-page-bootstrap.test.ts.)
  });
});
