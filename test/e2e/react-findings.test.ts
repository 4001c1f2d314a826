/**
 * @dunwall/react and @dunwall/react-native where a tenant's app meets Dunwall, in Chromium:
 * - the app's own API (a server on loopback) refusing with @dunwall/node's 402
 *   `billing_lockout` problem gates through `useBillingFetch()`, whatever Dunwall's lookup
 *   answers (active, or nothing at all); a 200 changes nothing;
 * - each misconfiguration is said once per page in the console with its code, never with the
 *   key, the hmac or the customer id, and `debug` logs every answer and decision.
 * The app is served from its own origin; Dunwall is a real service (test/helpers/snippet-browser.ts).
 * React Native runs through react-native-web, as its other suites do.
 */
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import type { Browser, BrowserContext, ConsoleMessage, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { lockoutProblem } from '../../packages/node/src/middleware/guard.js';
import { computeHmac } from '../../src/domain/hmac.js';
import { haveBrowser, launchChromium, startService } from '../helpers/snippet-browser.js';
import type { Service, Tenant } from '../helpers/snippet-browser.js';

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));
const PAY_URL = 'https://billing.acme.test/pay/tok_1';
/** Nothing listens there: Dunwall cannot be reached. */
const NOWHERE = 'http://127.0.0.1:9';

/** The app: the provider, a page that loads its projects from its own API through useBillingFetch(), the banner and the gate. */
const APP = `
import { useState } from 'react';
import { createRoot } from 'react-dom/client';
import { BillingBanner, BillingGate, DunwallProvider, useBillingFetch, useBillingStatus } from '@dunwall/under-test';

const c = JSON.parse(new URLSearchParams(location.search).get('config') ?? '{}');

function Projects() {
  const billingFetch = useBillingFetch();
  const { status, source, ready } = useBillingStatus();
  const [answer, setAnswer] = useState('');
  const load = async () => {
    const res = await billingFetch('/api/projects', { headers: { accept: 'application/json' } });
    const body = await res.json();
    setAnswer(res.status + ' ' + (body.code ?? body.projects.join(',')));
  };
  return (
    <main>
      <p data-testid="billing">{status} from {source}{ready ? '' : ' (asking)'}</p>
      <button type="button" onClick={() => void load()}>Load projects</button>
      <p data-testid="answer">{answer}</p>
    </main>
  );
}

const root = document.getElementById('root');
if (root)
  createRoot(root).render(
    <DunwallProvider baseUrl={c.baseUrl} tenant={c.tenant} publishableKey={c.key} customer={c.customer} hmac={c.hmac} debug={c.debug}>
      <BillingBanner />
      <Projects />
      <BillingGate />
    </DunwallProvider>,
  );
`;

const PACKAGES = {
  react: here('../../packages/react/src/index.ts'),
  'react-native': here('../../packages/react-native/src/index.ts'),
} as const;
type Package = keyof typeof PACKAGES;

async function bundle(pkg: Package): Promise<string> {
  const out = await build({
    stdin: { contents: APP, loader: 'tsx', resolveDir: here('.'), sourcefile: 'app.tsx' },
    bundle: true,
    write: false,
    format: 'iife',
    target: 'es2022',
    jsx: 'automatic',
    alias: { '@dunwall/under-test': PACKAGES[pkg], 'react-native': 'react-native-web' },
    define: { 'process.env.NODE_ENV': '"production"' },
    logLevel: 'warning',
  });
  const [file] = out.outputFiles;
  if (!file) throw new Error(`esbuild wrote nothing for ${pkg}`);
  return file.text;
}

interface Config {
  baseUrl: string;
  tenant: string;
  key: string;
  customer: string;
  hmac?: string | null;
  debug?: boolean;
}

describe.skipIf(!haveBrowser)("the React packages in a tenant's app, in Chromium", () => {
  let service: Service;
  let app: Server;
  let appOrigin = '';
  let browser: Browser;
  let context: BrowserContext | undefined;
  let acme: Tenant;
  let strict: Tenant;
  let guarded: Tenant;
  let secretKey = '';
  const bundles = new Map<Package, string>();
  /** What the app's API answers: the middleware's refusal, or the projects. */
  let api: 'refuse' | 'serve' = 'serve';
  const apiCalls: string[] = [];

  beforeAll(async () => {
    service = await startService();
    acme = (await service.admin('POST', '/tenants', { slug: 'acme' })) as Tenant;
    strict = (await service.admin('POST', '/tenants', { slug: 'strict-co', hmac_required: true })) as Tenant;
    guarded = (await service.admin('POST', '/tenants', {
      slug: 'guarded-co',
      allowed_origins: ['https://app.guarded.test'],
    })) as Tenant;
    secretKey = (
      (await service.admin('POST', '/tenants/acme/keys', { name: 'shipped by mistake', scopes: ['status:read'] })) as {
        secret_key: string;
      }
    ).secret_key;
    for (const pkg of Object.keys(PACKAGES) as Package[]) bundles.set(pkg, await bundle(pkg));

    // The tenant's app: its page, its bundle, and its API, which @dunwall/node's middleware guards.
    app = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://app.test');
      if (url.pathname === '/api/projects') {
        apiCalls.push(api);
        if (api === 'refuse') {
          const problem = lockoutProblem({
            status: 'lockout',
            source: 'feed',
            lockout_at: null,
            pay_url: PAY_URL,
          } as Parameters<typeof lockoutProblem>[0]);
          res
            .writeHead(402, { 'content-type': 'application/problem+json', 'cache-control': 'no-store' })
            .end(JSON.stringify(problem));
        } else
          res
            .writeHead(200, { 'content-type': 'application/json' })
            .end(JSON.stringify({ projects: ['apollo', 'gemini'] }));
        return;
      }
      const pkg = url.pathname.slice(1).replace(/\.js$/, '') as Package;
      if (bundles.has(pkg)) return void res.writeHead(200, { 'content-type': 'text/javascript' }).end(bundles.get(pkg));
      const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Acme</title>
<style>html,body,#root{height:100%;margin:0}#root{display:flex;flex-direction:column}</style></head>
<body><div id="root"></div><script src="/${url.searchParams.get('pkg') ?? 'react'}.js"></script></body></html>`;
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html);
    });
    await new Promise<void>((done) => app.listen(0, '127.0.0.1', done));
    // Another origin than the service's (127.0.0.1): the lookup is a cross-origin call, as in production.
    appOrigin = `http://localhost:${(app.address() as AddressInfo).port}`;
    browser = await launchChromium();
  }, 180_000);

  afterEach(async () => {
    await context?.close();
    context = undefined;
  });
  afterAll(async () => {
    await browser?.close();
    await new Promise((done) => app?.close(done));
    await service?.close();
  });

  /** The page, and every `[dunwall]` line it says in the console, by level. */
  async function open(pkg: Package, config: Config): Promise<{ page: Page; warnings: string[]; infos: string[] }> {
    context = await browser.newContext({ viewport: { width: 420, height: 760 } });
    const page = await context.newPage();
    page.on('pageerror', (err) => process.stderr.write(`page error: ${err.message}\n`));
    const warnings: string[] = [];
    const infos: string[] = [];
    page.on('console', (m: ConsoleMessage) => {
      if (!m.text().startsWith('[dunwall]')) return;
      if (m.type() === 'warning') warnings.push(m.text());
      else if (m.type() === 'info') infos.push(m.text());
    });
    await page.goto(`${appOrigin}/?pkg=${pkg}&config=${encodeURIComponent(JSON.stringify(config))}`);
    return { page, warnings, infos };
  }
  const billing = (page: Page) => page.getByTestId('billing').textContent();
  const gate = (page: Page) => page.getByRole('dialog');

  for (const pkg of Object.keys(PACKAGES) as Package[]) {
    describe(`@dunwall/${pkg}: useBillingFetch()`, () => {
      const customer = `cus_api_${pkg.replace('-', '_')}`;
      const signed = (baseUrl: string): Config => ({
        baseUrl,
        tenant: 'acme',
        key: acme.publishable_key,
        customer,
        hmac: computeHmac(acme.hmac_secret, customer),
      });

      it("gates when the app's API refuses with the 402 billing_lockout problem while Dunwall answers active, and the app still reads the answer", async () => {
        const { page } = await open(pkg, signed(service.running.url));
        await expect.poll(() => billing(page)).toBe('active from service');
        api = 'serve';
        await page.getByRole('button', { name: 'Load projects' }).click();
        await expect.poll(() => page.getByTestId('answer').textContent()).toBe('200 apollo,gemini');
        expect(await billing(page)).toBe('active from service');
        expect(await gate(page).count()).toBe(0);

        api = 'refuse';
        await page.getByRole('button', { name: 'Load projects' }).click();
        await expect.poll(() => gate(page).count(), { timeout: 10_000 }).toBe(1);
        await expect.poll(() => gate(page).getByRole('link', { name: 'Pay now' }).count()).toBe(1);
        if (pkg === 'react')
          expect(await gate(page).getByRole('link', { name: 'Pay now' }).getAttribute('href')).toBe(PAY_URL);
        expect(await billing(page)).toBe('lockout from api');
        // Passed through unchanged: the app read the problem itself.
        await expect.poll(() => page.getByTestId('answer').textContent()).toBe('402 billing_lockout');
        // Never kept as a lockout.
        const kept = await page.evaluate((k) => localStorage.getItem(k), `dunwall:v1:acme:${customer}`);
        if (kept !== null) expect(JSON.parse(kept)).toMatchObject({ status: 'active' });

        if (pkg === 'react') {
          // The customer paid and comes back: Dunwall's fresh answer (active) lifts the gate.
          await page.evaluate(() => window.dispatchEvent(new Event('focus')));
          await expect.poll(() => gate(page).count(), { timeout: 10_000 }).toBe(0);
          expect(await billing(page)).toBe('active from service');
        }
      });

      it("gates on the app's 402 when Dunwall cannot be reached at all; a 200 changes nothing", async () => {
        const { page } = await open(pkg, signed(NOWHERE));
        await expect.poll(() => billing(page), { timeout: 10_000 }).toBe('active from fallback');
        api = 'serve';
        await page.getByRole('button', { name: 'Load projects' }).click();
        await expect.poll(() => page.getByTestId('answer').textContent()).toBe('200 apollo,gemini');
        expect(await billing(page)).toBe('active from fallback');
        expect(await gate(page).count()).toBe(0);
        api = 'refuse';
        await page.getByRole('button', { name: 'Load projects' }).click();
        await expect.poll(() => gate(page).count(), { timeout: 10_000 }).toBe(1);
        expect(await billing(page)).toBe('lockout from api');
      });
    });
  }

  describe('each misconfiguration said once, with its code, never a secret', () => {
    const CASES: [string, () => Config, string, RegExp][] = [
      [
        'a wrong publishable key',
        () => ({
          baseUrl: service.running.url,
          tenant: 'acme',
          key: 'pk_live_wrongwrongwrongwrongwrong1',
          customer: 'cus_said',
        }),
        'invalid_publishable_key',
        /not a publishable key of tenant "acme"/,
      ],
      [
        'a secret key given as the publishable key',
        () => ({ baseUrl: service.running.url, tenant: 'acme', key: secretKey, customer: 'cus_said' }),
        'secret_key_in_browser',
        /secret key.*rotate it/,
      ],
      [
        'a slug with a typo',
        () => ({ baseUrl: service.running.url, tenant: 'acme-typo', key: acme.publishable_key, customer: 'cus_said' }),
        'tenant_not_found',
        /no tenant "acme-typo"/,
      ],
      [
        'a wrong hmac',
        () => ({
          baseUrl: service.running.url,
          tenant: 'acme',
          key: acme.publishable_key,
          customer: 'cus_said',
          hmac: 'f'.repeat(64),
        }),
        'hmac_mismatch',
        /hmac does not match/,
      ],
      [
        'no hmac for a tenant that requires it',
        () => ({
          baseUrl: service.running.url,
          tenant: 'strict-co',
          key: strict.publishable_key,
          customer: 'cus_said',
        }),
        'hmac_required',
        /tenant "strict-co" requires the hmac/,
      ],
      [
        "an origin not in the tenant's allowed_origins",
        () => ({
          baseUrl: service.running.url,
          tenant: 'guarded-co',
          key: guarded.publishable_key,
          customer: 'cus_said',
        }),
        'origin_not_allowed',
        /is http:\/\/localhost:\d+ in the allowed_origins of tenant "guarded-co"/,
      ],
    ];
    // React Native has no CORS on a device: a refused origin is a browser's alone.
    const cases = (Object.keys(PACKAGES) as Package[]).flatMap((pkg) =>
      CASES.filter(([, , code]) => pkg === 'react' || code !== 'origin_not_allowed').map((c) => [pkg, ...c] as const),
    );
    for (const [pkg, name, make, code, sentence] of cases) {
      it(`@dunwall/${pkg}, ${name}: ${code}`, async () => {
        const config = { ...make(), debug: true };
        const { page, warnings, infos } = await open(pkg, config);
        await expect.poll(() => billing(page), { timeout: 10_000 }).toBe('active from fallback');
        await expect.poll(() => warnings.length, { timeout: 10_000 }).toBe(1);
        expect(warnings[0]).toMatch(new RegExp(`^\\[dunwall\\] ${code}: `));
        expect(warnings[0]).toMatch(sentence);

        // Asked again (the customer is back: the page in view again, AppState active on React Native):
        // the same failure, not said again; debug logs each answer.
        const before = infos.length;
        await page.evaluate(() => document.dispatchEvent(new Event('visibilitychange')));
        await expect.poll(() => infos.length, { timeout: 10_000 }).toBeGreaterThan(before);
        await page.evaluate(() => new Promise((resolve) => setTimeout(resolve, 0)));
        expect(warnings).toHaveLength(1);
        expect(
          infos.every((line) => /^\[dunwall\] active fallback /.test(line)),
          infos.join('\n'),
        ).toBe(true);

        const secrets = [
          config.key,
          acme.hmac_secret,
          strict.hmac_secret,
          'cus_said',
          'f'.repeat(64),
          secretKey,
          acme.publishable_key,
        ];
        for (const line of [...warnings, ...infos]) for (const secret of secrets) expect(line).not.toContain(secret);
      });
    }

    it('says nothing when all is well, and debug logs each answer with its status and source only', async () => {
      const customer = 'cus_well';
      await service.admin('PUT', `/tenants/acme/subscribers/${customer}`, { status: 'warning' });
      const hmac = computeHmac(acme.hmac_secret, customer);
      const quiet = await open('react', {
        baseUrl: service.running.url,
        tenant: 'acme',
        key: acme.publishable_key,
        customer,
        hmac,
      });
      await expect.poll(() => billing(quiet.page)).toBe('warning from service');
      expect(quiet.warnings).toEqual([]);
      expect(quiet.infos).toEqual([]);
      await context?.close();

      const loud = await open('react', {
        baseUrl: service.running.url,
        tenant: 'acme',
        key: acme.publishable_key,
        customer,
        hmac,
        debug: true,
      });
      await expect.poll(() => billing(loud.page)).toBe('warning from service');
      await expect.poll(() => loud.infos.at(-1)).toBe('[dunwall] warning service');
      expect(loud.warnings).toEqual([]);
      for (const line of loud.infos)
        for (const secret of [acme.publishable_key, hmac, customer]) expect(line).not.toContain(secret);
    });
  });
});
