import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { computeHmac } from '../../src/domain/hmac.js';
import { appPage, bundleApp, HMAC_SECRET, PUBLISHABLE_KEY, startStandIn } from '../helpers/lookup-standin.js';
import type { StandIn } from '../helpers/lookup-standin.js';

/**
 * docs/react-native.md's example, docs/examples/react-native/App.tsx, as written: bundled
 * the way a React Native app is for the web (`react-native` is react-native-web, its other
 * imports the package's source and small in-page fakes of AsyncStorage and NetInfo), shown
 * in Chromium at a phone's size, asking a stand-in of the Dunwall service over a socket.
 */
const CHROMIUM = '/usr/bin/chromium';
const haveBrowser = existsSync(CHROMIUM);
if (!haveBrowser && process.env.CI === 'true') throw new Error(`${CHROMIUM} is required in CI (.ci/run installs it)`);
if (!haveBrowser) process.stderr.write(`\n*** ${CHROMIUM} not found: the React Native (web) suite is SKIPPED. ***\n\n`);

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));
const EXAMPLE = here('../../docs/examples/react-native/App.tsx');
const DOC = readFileSync(here('../../docs/react-native.md'), 'utf8');
const RESULTS = join(process.cwd(), 'test-results');
const T0 = Date.parse('2026-03-02T09:00:00Z');
const LOCKOUT_AT = new Date(T0 + 3 * 86_400_000 + 3_600_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
const PAY_URL = 'https://pay.acme.test/i/in_1';
const BRANDING = {
  payment_url: 'https://pay.acme.test/link',
  colors: { accent: '#0b5cad' },
  texts: {
    fr: {
      banner_body: 'Votre dernier paiement n’a pas abouti.',
      banner_countdown: 'Votre accès sera suspendu {time}.',
      pay_action: 'Payer maintenant',
      banner_action: 'Changer de carte',
    },
  },
};

describe('docs/react-native.md', () => {
  it('shows docs/examples/react-native/App.tsx exactly as it is', () => {
    const block = /<!-- docs\/examples\/react-native\/App\.tsx -->\n```tsx\n([\s\S]*?)```\n/.exec(DOC)?.[1];
    expect(block).toBe(readFileSync(EXAMPLE, 'utf8'));
  });
});

describe.skipIf(!haveBrowser)('the React Native example on react-native-web, in Chromium', () => {
  let standIn: StandIn;
  let browser: Browser;
  let context: BrowserContext | undefined;

  beforeAll(async () => {
    standIn = await startStandIn(BRANDING);
    const bundle = await bundleApp(
      here('./react-native-web/entry.tsx'),
      {
        '@dunwall/react-native': here('../../packages/react-native/src/index.ts'),
        '@react-native-async-storage/async-storage': here('./react-native-web/async-storage.ts'),
        '@react-native-community/netinfo': here('./react-native-web/netinfo.ts'),
      },
      // What Expo inlines from the app's environment.
      {
        'process.env.EXPO_PUBLIC_DUNWALL_URL': JSON.stringify(standIn.url),
        'process.env.EXPO_PUBLIC_DUNWALL_KEY': JSON.stringify(PUBLISHABLE_KEY),
      },
    );
    standIn.setPage(appPage('Acme'), bundle);
    standIn.answers.set('cus_warn', {
      status: 'warning',
      lockout_at: LOCKOUT_AT,
      pay_url: PAY_URL,
      card_update_url: 'https://billing.acme.test/card',
    });
    standIn.answers.set('cus_lock', { status: 'lockout', pay_url: PAY_URL });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    mkdirSync(RESULTS, { recursive: true });
  });
  afterEach(async () => {
    await context?.close();
    context = undefined;
  });
  afterAll(async () => {
    await browser?.close();
    await standIn?.close();
  });

  async function open(customer: string, locale = 'en-US'): Promise<Page> {
    context = await browser.newContext({ viewport: { width: 375, height: 667 }, locale, timezoneId: 'UTC' });
    // The invoice's page, opened by Linking: answered here, never fetched from the network.
    await context.route('https://pay.acme.test/**', (route) =>
      route.fulfill({ contentType: 'text/html', body: '<title>Invoice</title>' }),
    );
    const page = await context.newPage();
    page.on('pageerror', (err) => process.stderr.write(`page error: ${err.message}\n`));
    await page.clock.install({ time: T0 });
    await page.goto(`${standIn.url}/?customer=${customer}&hmac=${computeHmac(HMAC_SECRET, customer)}`);
    return page;
  }
  const visible = (locator: Locator) => expect.poll(() => locator.isVisible(), { timeout: 10_000 }).toBe(true);
  const labels = (locator: Locator) => locator.evaluateAll((all) => all.map((e) => e.getAttribute('aria-label')));

  it('shows a warning as a banner: the countdown, "Pay now" first, labelled controls, dismissed for the session', async () => {
    const page = await open('cus_warn');
    const banner = page.getByRole('alert');
    await visible(banner);
    expect(await banner.textContent()).toContain(
      'Your last payment did not go through. Please update your card to keep your access. Access will be paused in 3 days.',
    );
    expect(await labels(banner.getByRole('link'))).toEqual(['Pay now', 'Update card']);
    await visible(banner.getByRole('button', { name: 'Dismiss' }));
    expect(await page.getByRole('dialog').count()).toBe(0);
    // The example's AsyncStorage keeps the answer.
    await expect
      .poll(() =>
        page.evaluate(() => [...(window as unknown as { asyncStorage: Map<string, string> }).asyncStorage.keys()]),
      )
      .toEqual(['dunwall:v1:acme:cus_warn']);
    await page.screenshot({ path: join(RESULTS, 'react-native-banner.png') });

    // "Pay now" opens the invoice's page apart from the app.
    const opened = context?.waitForEvent('page');
    await banner.getByRole('link', { name: 'Pay now' }).click();
    const invoice = await opened;
    await invoice?.waitForLoadState();
    expect(invoice?.url()).toBe(PAY_URL);
    await invoice?.close();

    // Dismissed: gone, and it stays gone when the app asks again (back online) in this session.
    await banner.getByRole('button', { name: 'Dismiss' }).click();
    await expect.poll(() => banner.count()).toBe(0);
    const asked = standIn.count('cus_warn');
    await page.clock.runFor(2_000);
    await context?.setOffline(true);
    await context?.setOffline(false);
    await expect.poll(() => standIn.count('cus_warn')).toBeGreaterThan(asked);
    await page.clock.runFor(2_000);
    expect(await banner.count()).toBe(0);
    // A new session (the app launched again) shows it again.
    await page.reload();
    await visible(page.getByRole('alert'));
  });

  it('shows a lockout as a modal gate: Escape does not close it, its title and links are labelled, "Pay now" first', async () => {
    const page = await open('cus_lock');
    const gate = page.getByRole('dialog');
    await visible(gate.getByRole('heading', { name: 'Your account is on hold' }));
    expect(await gate.getAttribute('aria-modal')).toBe('true');
    expect(await labels(gate.getByRole('link'))).toEqual(['Pay now', 'Contact support']);
    expect(await page.getByRole('alert').count()).toBe(0);
    await page.screenshot({ path: join(RESULTS, 'react-native-gate.png') });

    await page.keyboard.press('Escape');
    await page.clock.runFor(1_000);
    await visible(gate.getByRole('heading', { name: 'Your account is on hold' }));
    expect(await gate.textContent()).toContain('We could not collect your last payment.');
  });

  it("speaks the device's language: the branding's French texts and a French countdown", async () => {
    const page = await open('cus_warn', 'fr-FR');
    const banner = page.getByRole('alert');
    await visible(banner);
    expect(await banner.textContent()).toContain(
      'Votre dernier paiement n’a pas abouti. Votre accès sera suspendu dans 3 jours.',
    );
    expect(await labels(banner.getByRole('link'))).toEqual(['Payer maintenant', 'Changer de carte']);
  });
});
