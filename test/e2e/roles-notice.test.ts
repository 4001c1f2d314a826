/**
 * Who reads, and what an active answer tells, in Chromium, for each drawer of the shared view:
 * the snippet, @dunwall/react, and @dunwall/react-native through react-native-web.
 * - A member (`data-role="member"`, the provider's `role`) is shown the member's texts (the
 *   branding's, else the built-in ones) and no pay or card link, in the banner and the gate;
 *   an unknown role is shown as a member and said in the console.
 * - A billing admin (the default) is shown the ways to pay.
 * - An http link to this machine (a service tried locally) is shown; one to another host is not.
 * - An active answer's card-expiring notice is a soft banner with the card link, dismissable,
 *   never a gate; a member reads the member's text there, without the link.
 * The service is the lookup stand-in (test/helpers/lookup-standin.ts), so that each answer
 * (a loopback pay link, a notice) is the one a test needs, over a real socket.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_TEXTS } from '@dunwall/core';
import { computeHmac } from '../../src/domain/hmac.js';
import { snippetPath } from '../../src/http/snippet-asset.js';
import { appPage, HMAC_SECRET, PUBLISHABLE_KEY, startStandIn, TENANT } from '../helpers/lookup-standin.js';
import type { StandIn } from '../helpers/lookup-standin.js';
import { haveBrowser, launchChromium } from '../helpers/snippet-browser.js';

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));
const PAY_URL = 'https://pay.acme.test/i/in_1';
const CARD_URL = 'https://billing.acme.test/card';
const NOTICE_CARD_URL = 'https://billing.acme.test/card/tok_notice';
const MEMBER_GATE = 'Ask Dana, your billing admin, to update the payment method.';
const BRANDING = { texts: { default: { member_gate_body: MEMBER_GATE } } };

/** The app of the React packages: the provider with the role the page's address names, the banner and the gate. */
const APP = `
import { createRoot } from 'react-dom/client';
import { BillingBanner, BillingGate, DunwallProvider, useBillingStatus } from '@dunwall/under-test';

/** Marks the page once the service's answer is drawn. */
function Answered() {
  const { source } = useBillingStatus();
  return source === 'service' ? <p data-answered="">answered</p> : null;
}

const q = new URLSearchParams(location.search);
const root = document.getElementById('root');
if (root)
  createRoot(root).render(
    <DunwallProvider baseUrl={location.origin} tenant={q.get('tenant')} publishableKey={q.get('key')}
      customer={q.get('customer')} hmac={q.get('hmac')} role={q.get('role')} storage={null}>
      <BillingBanner />
      <main><h1>Acme</h1><Answered /></main>
      <BillingGate />
    </DunwallProvider>,
  );
`;

async function bundle(entry: string): Promise<string> {
  const out = await build({
    stdin: { contents: APP, loader: 'tsx', resolveDir: here('.'), sourcefile: 'app.tsx' },
    bundle: true,
    write: false,
    format: 'iife',
    target: 'es2022',
    jsx: 'automatic',
    alias: { '@dunwall/under-test': entry, 'react-native': 'react-native-web' },
    define: { 'process.env.NODE_ENV': '"production"' },
    logLevel: 'warning',
  });
  const [file] = out.outputFiles;
  if (!file) throw new Error(`esbuild wrote nothing for ${entry}`);
  return file.text;
}

type Drawer = 'snippet' | 'react' | 'react-native';
/** Where each drawer puts the warning banner and the notice. */
const WHERE: Record<Drawer, { banner: string; notice: string }> = {
  snippet: { banner: 'dunwall-enforcement [role="alert"]', notice: 'dunwall-enforcement [role="status"]' },
  react: { banner: '.dunwall-banner[data-status="warning"]', notice: '.dunwall-banner[data-status="notice"]' },
  'react-native': { banner: '[data-testid="dunwall-banner"]', notice: '[data-testid="dunwall-notice"]' },
};

describe.skipIf(!haveBrowser)('roles, local links and the notice, in Chromium', () => {
  let standIn: StandIn;
  let browser: Browser;
  let context: BrowserContext | undefined;
  let localPayUrl = '';
  const bundles = new Map<Drawer, string>();

  beforeAll(async () => {
    standIn = await startStandIn(BRANDING);
    // The service tried on this machine: DUNWALL_PUBLIC_URL=http://127.0.0.1:PORT.
    localPayUrl = `${standIn.url}/pay/tok_local`;
    standIn.answers.set('cus_warn', { status: 'warning', pay_url: PAY_URL, card_update_url: CARD_URL });
    standIn.answers.set('cus_lock', { status: 'lockout', pay_url: PAY_URL });
    standIn.answers.set('cus_local', {
      status: 'warning',
      pay_url: localPayUrl,
      card_update_url: 'http://billing.acme.test/card',
    });
    standIn.answers.set('cus_notice', {
      status: 'active',
      card_update_url: NOTICE_CARD_URL,
      notice: { kind: 'card_expiring', expires: '2027-04' },
    });
    bundles.set('snippet', readFileSync(snippetPath(), 'utf8'));
    bundles.set('react', await bundle(here('../../packages/react/src/index.ts')));
    bundles.set('react-native', await bundle(here('../../packages/react-native/src/index.ts')));
    browser = await launchChromium();
  });
  afterEach(async () => {
    await context?.close();
    context = undefined;
  });
  afterAll(async () => {
    await browser?.close();
    await standIn?.close();
  });

  /** The drawer's page for a customer and a role (none: the default), in a new browser session unless `same`. */
  async function open(
    drawer: Drawer,
    customer: string,
    role?: string,
    same = false,
  ): Promise<{ page: Page; warned: string[] }> {
    if (!same) {
      await context?.close();
      context = await browser.newContext({ viewport: { width: 1000, height: 700 }, locale: 'en-US' });
    }
    const hmac = computeHmac(HMAC_SECRET, customer);
    const query = new URLSearchParams({
      tenant: TENANT,
      key: PUBLISHABLE_KEY,
      customer,
      hmac,
      ...(role ? { role } : {}),
    });
    const html =
      drawer === 'snippet'
        ? `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Acme</title></head><body><h1>Acme</h1>
<script>document.addEventListener('dunwall:status', () => document.body.setAttribute('data-answered', ''));</script>
<script src="/app.js" data-tenant="${TENANT}" data-key="${PUBLISHABLE_KEY}" data-customer="${customer}" data-hmac="${hmac}"${role ? ` data-role="${role}"` : ''} async></script></body></html>`
        : appPage('Acme');
    standIn.setPage(html, bundles.get(drawer) ?? '');
    const page = await (context as BrowserContext).newPage();
    const warned: string[] = [];
    page.on('console', (m) => m.type() === 'warning' && warned.push(m.text()));
    page.on('pageerror', (err) => process.stderr.write(`page error: ${err.message}\n`));
    await page.goto(`${standIn.url}/?${query}`);
    return { page, warned };
  }

  const visible = (l: Locator) => expect.poll(() => l.isVisible(), { timeout: 10_000 }).toBe(true);
  /** Each link's label (an anchor's text, a pressable's accessible label) and where it goes (null: opened by Linking). */
  const linksOf = (l: Locator) =>
    l
      .getByRole('link')
      .evaluateAll((all) => all.map((e) => [e.getAttribute('aria-label') ?? e.textContent, e.getAttribute('href')]));
  /** The page a link opens apart (a new tab, or Linking's window). */
  async function opens(link: Locator): Promise<string> {
    const popup = (context as BrowserContext).waitForEvent('page');
    await link.click();
    return (await popup).url();
  }

  describe.each(['snippet', 'react', 'react-native'] as const)('%s', (drawer) => {
    const where = WHERE[drawer];
    const href = (url: string) => (drawer === 'react-native' ? null : url);

    it('a member sees the member texts and no pay or card link, in the banner and the gate', async () => {
      let { page } = await open(drawer, 'cus_warn', 'member');
      const banner = page.locator(where.banner);
      await visible(banner);
      expect(await banner.textContent()).toContain(DEFAULT_TEXTS.member);
      expect(await banner.textContent()).not.toContain(DEFAULT_TEXTS.warning);
      expect(await linksOf(banner)).toEqual([]);
      // Still a banner a member can put away.
      await visible(banner.getByRole('button', { name: 'Dismiss' }));

      ({ page } = await open(drawer, 'cus_lock', 'member'));
      const gate = page.getByRole('dialog');
      await visible(gate.getByText('Your account is on hold'));
      expect(await gate.textContent()).toContain(MEMBER_GATE);
      expect(await gate.textContent()).not.toContain(DEFAULT_TEXTS.lockout);
      expect(await gate.textContent()).not.toContain(DEFAULT_TEXTS.noLink);
      expect(await linksOf(gate)).toEqual([]);

      // A role this code does not know is a member's display, and said in the console.
      const unknown = await open(drawer, 'cus_warn', 'owner');
      const shown = unknown.page.locator(where.banner);
      await visible(shown);
      expect(await linksOf(shown)).toEqual([]);
      expect(unknown.warned.join('\n')).toContain('unknown_role: "owner"');
    });

    it('a billing admin (the default, or named) sees the ways to pay', async () => {
      let { page } = await open(drawer, 'cus_warn');
      const banner = page.locator(where.banner);
      await visible(banner);
      expect(await banner.textContent()).toContain(DEFAULT_TEXTS.warning);
      expect(await linksOf(banner)).toEqual([
        ['Pay now', href(PAY_URL)],
        ['Update card', href(CARD_URL)],
      ]);

      ({ page } = await open(drawer, 'cus_lock', 'billing_admin'));
      const gate = page.getByRole('dialog');
      await visible(gate.getByText('Your account is on hold'));
      expect(await gate.textContent()).toContain(DEFAULT_TEXTS.lockout);
      expect(await linksOf(gate)).toEqual([['Pay now', href(PAY_URL)]]);
    });

    it('shows an http link to this machine, and drops an http link to another host', async () => {
      const { page } = await open(drawer, 'cus_local');
      const banner = page.locator(where.banner);
      await visible(banner);
      expect(await linksOf(banner)).toEqual([['Pay now', href(localPayUrl)]]);
      expect(await opens(banner.getByRole('link', { name: 'Pay now' }))).toBe(localPayUrl);
    });

    it("shows an active answer's card-expiring notice as a soft banner with the card link, dismissable, never a gate", async () => {
      let { page } = await open(drawer, 'cus_notice');
      const notice = page.locator(where.notice);
      await visible(notice);
      expect(await notice.textContent()).toContain(
        'Your card expires 04/2027. Update it to keep your subscription running.',
      );
      expect(await linksOf(notice)).toEqual([['Update card', href(NOTICE_CARD_URL)]]);
      // Soft: no alert, no gate.
      expect(await page.locator(where.banner).count()).toBe(0);
      expect(await page.getByRole('dialog').count()).toBe(0);

      await notice.getByRole('button', { name: 'Dismiss' }).click();
      await expect.poll(() => notice.count()).toBe(0);
      if (drawer !== 'react-native') {
        // Remembered as a warning's dismissal is: for the browser session.
        ({ page } = await open(drawer, 'cus_notice', undefined, true));
        await page.locator('[data-answered]').waitFor({ state: 'attached' });
        expect(await page.locator(where.notice).count()).toBe(0);
      }

      // A member is told whom to ask, without the link.
      ({ page } = await open(drawer, 'cus_notice', 'member'));
      const told = page.locator(where.notice);
      await visible(told);
      expect(await told.textContent()).toContain(DEFAULT_TEXTS.member);
      expect(await linksOf(told)).toEqual([]);
    });
  });
});
