import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { appPage, bundleApp, startStandIn } from '../helpers/lookup-standin.js';
import type { StandIn } from '../helpers/lookup-standin.js';

/**
 * `@dunwall/react-native`'s provider and hooks in a real React tree, rendered by React DOM
 * in Chromium through react-native-web, with the platform's signals faked where a browser
 * has none: an `AppState` the test moves, a NetInfo-shaped source, an AsyncStorage-shaped
 * storage (asynchronous, its reads held when the test says), and Android's back button (the
 * Modal's `onRequestClose`). Every question goes over a socket to a stand-in of the lookup;
 * time is the page's fake clock, moved by the test.
 */
const CHROMIUM = '/usr/bin/chromium';
const haveBrowser = existsSync(CHROMIUM);
if (!haveBrowser && process.env.CI === 'true') throw new Error(`${CHROMIUM} is required in CI (.ci/run installs it)`);
if (!haveBrowser) process.stderr.write(`\n*** ${CHROMIUM} not found: the React Native hooks suite is SKIPPED. ***\n\n`);

const APP = fileURLToPath(new URL('./react-native/app.tsx', import.meta.url));
const SHIM = fileURLToPath(new URL('./react-native/shim.ts', import.meta.url));
const T0 = Date.parse('2026-03-02T09:00:00Z');
/** More than the store's one second between two questions. */
const GAP_MS = 1_500;

interface Config {
  customer: string;
  hmac?: string;
  preview?: 'warning' | 'lockout';
  bootstrap?: { status: 'active' | 'warning' | 'lockout'; at?: number };
  stored?: Record<string, string>;
  slowStorage?: boolean;
}

type AppStateStatus = 'active' | 'background' | 'inactive';

describe.skipIf(!haveBrowser)('@dunwall/react-native: the provider and hooks on a device', () => {
  let standIn: StandIn;
  let browser: Browser;
  let context: BrowserContext | undefined;

  beforeAll(async () => {
    standIn = await startStandIn({ payment_url: 'https://pay.acme.test/link' });
    standIn.setPage(appPage('hooks'), await bundleApp(APP, { 'react-native': SHIM }));
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
  });
  afterEach(async () => {
    await context?.close();
    context = undefined;
  });
  afterAll(async () => {
    await browser?.close();
    await standIn?.close();
  });

  async function launch(config: Config): Promise<Page> {
    context = await browser.newContext({ viewport: { width: 375, height: 667 }, locale: 'en-US' });
    const page = await context.newPage();
    page.on('pageerror', (err) => process.stderr.write(`page error: ${err.message}\n`));
    await page.clock.install({ time: T0 });
    await page.clock.pauseAt(T0 + 1_000);
    await page.goto(`${standIn.url}/?config=${encodeURIComponent(JSON.stringify(config))}`);
    return page;
  }
  const visible = (locator: Locator) => expect.poll(() => locator.isVisible(), { timeout: 10_000 }).toBe(true);
  const shown = (page: Page, expected: string) =>
    expect.poll(() => page.getByTestId('probe').textContent(), { timeout: 10_000 }).toBe(expected);
  const setAppState = (page: Page, state: AppStateStatus) =>
    page.evaluate(
      (s) => (window as unknown as { native: { setAppState(s: string): void } }).native.setAppState(s),
      state,
    );
  const setConnected = (page: Page, connected: boolean | null) =>
    page.evaluate(
      (c) => (window as unknown as { app: { setConnected(c: boolean | null): void } }).app.setConnected(c),
      connected,
    );
  const seen = (page: Page) => page.evaluate(() => (window as unknown as { app: { seen: string[] } }).app.seen);
  const writes = (page: Page) =>
    page.evaluate(() => (window as unknown as { app: { writes: [string, string][] } }).app.writes);
  const lockoutAt = new Date(T0 + 3 * 86_400_000).toISOString().replace(/\.\d{3}Z$/, 'Z');

  it('asks again when AppState becomes active, and not when the app goes to the background', async () => {
    standIn.answers.set('cus_app', { status: 'active' });
    const page = await launch({ customer: 'cus_app' });
    await shown(page, 'active|service');
    expect(standIn.count('cus_app')).toBe(1);

    standIn.answers.set('cus_app', { status: 'warning', lockout_at: lockoutAt });
    await page.clock.runFor(GAP_MS);
    await setAppState(page, 'inactive');
    await setAppState(page, 'background');
    await page.clock.runFor(GAP_MS);
    expect(standIn.count('cus_app')).toBe(1);
    await expect(page.getByTestId('probe').textContent()).resolves.toBe('active|service');

    // Back in the foreground: the service is asked, and the banner follows its answer.
    await setAppState(page, 'active');
    await shown(page, 'warning|service');
    expect(standIn.count('cus_app')).toBe(2);
    await expect(page.getByRole('alert').textContent()).resolves.toContain('Access will be paused in 3 days.');
  });

  it('asks again when connectivity comes back (offline or unknown, then online), not while it stays online', async () => {
    standIn.answers.set('cus_net', { status: 'active' });
    const page = await launch({ customer: 'cus_net' });
    await shown(page, 'active|service');
    expect(standIn.count('cus_net')).toBe(1);

    // NetInfo said "online" when the provider subscribed, and says it again: nothing came back.
    await page.clock.runFor(GAP_MS);
    await setConnected(page, true);
    await page.clock.runFor(GAP_MS);
    expect(standIn.count('cus_net')).toBe(1);

    await setConnected(page, false);
    await page.clock.runFor(GAP_MS);
    expect(standIn.count('cus_net')).toBe(1);
    await setConnected(page, true);
    await expect.poll(() => standIn.count('cus_net')).toBe(2);

    await page.clock.runFor(GAP_MS);
    await setConnected(page, null);
    await page.clock.runFor(GAP_MS);
    expect(standIn.count('cus_net')).toBe(2);
    standIn.answers.set('cus_net', { status: 'warning' });
    await setConnected(page, true);
    await shown(page, 'warning|service');
    expect(standIn.count('cus_net')).toBe(3);
  });

  it('relaunched with the lookup failing, shows the banner from the persisted copy (a copied lockout too), never the gate', async () => {
    standIn.answers.set('cus_down', { fail: 503 });
    const noGate = async (page: Page) => {
      expect(await page.getByRole('dialog').count()).toBe(0);
      expect(
        await page.evaluate(() => (window as unknown as { native: { modal(): unknown } }).native.modal()),
      ).toBeNull();
    };

    for (const status of ['warning', 'lockout']) {
      const copy = JSON.stringify({ status, card_update_url: null, entitlements: {}, at: T0 - 60_000 });
      const page = await launch({ customer: 'cus_down', stored: { 'dunwall:v1:acme:cus_down': copy } });
      await shown(page, 'warning|fallback');
      await expect
        .poll(() => page.evaluate(() => (window as unknown as { app: { reads(): number } }).app.reads()))
        .toBe(1);
      expect((await seen(page)).filter((s) => s.startsWith('lockout'))).toEqual([]);
      await visible(page.getByRole('alert'));
      await noGate(page);
      await context?.close();
    }

    // A copy older than maxAgeMs (24 h) is not used: nothing is shown.
    const old = JSON.stringify({ status: 'warning', card_update_url: null, entitlements: {}, at: T0 - 25 * 3_600_000 });
    const stale = await launch({ customer: 'cus_down', stored: { 'dunwall:v1:acme:cus_down': old } });
    await shown(stale, 'active|fallback');
    await expect
      .poll(() => stale.evaluate(() => (window as unknown as { app: { reads(): number } }).app.reads()))
      .toBe(1);
    expect(await stale.getByRole('alert').count()).toBe(0);
    await context?.close();

    // A lockout the app's backend got for it: a warning until the service says lockout itself.
    const second = await launch({ customer: 'cus_down', bootstrap: { status: 'lockout', at: T0 - 60_000 } });
    await shown(second, 'warning|fallback');
    expect(await seen(second)).toEqual(['warning|bootstrap', 'warning|fallback']);
    await visible(second.getByRole('alert'));
    await noGate(second);
  });

  it('never lets a persisted copy read after a fresh answer make things worse, and keeps the answer without its pay link', async () => {
    standIn.answers.set('cus_fresh', { status: 'active' });
    const copy = JSON.stringify({ status: 'warning', card_update_url: null, entitlements: {}, at: T0 - 60_000 });
    const page = await launch({
      customer: 'cus_fresh',
      stored: { 'dunwall:v1:acme:cus_fresh': copy },
      slowStorage: true,
    });
    await shown(page, 'active|service');
    // The storage answers only now, with a worse copy.
    await page.evaluate(() => (window as unknown as { app: { releaseStorage(): void } }).app.releaseStorage());
    await expect
      .poll(() => page.evaluate(() => (window as unknown as { app: { reads(): number } }).app.reads()))
      .toBe(1);
    await page.evaluate(() => new Promise((resolve) => queueMicrotask(() => resolve(null))));
    await expect(page.getByTestId('probe').textContent()).resolves.toBe('active|service');
    expect((await seen(page)).filter((s) => s.startsWith('warning'))).toEqual([]);
    expect(await page.getByRole('alert').count()).toBe(0);
    expect((await writes(page)).map(([key, value]) => [key, (JSON.parse(value) as { status: string }).status])).toEqual(
      [['dunwall:v1:acme:cus_fresh', 'active']],
    );

    // A warning with its pay link (a signed lookup): kept, but never the link to the invoice.
    standIn.answers.set('cus_fresh', { status: 'warning', pay_url: 'https://pay.acme.test/i/1' });
    await page.clock.runFor(GAP_MS);
    await setAppState(page, 'active');
    await shown(page, 'warning|service');
    const [, value = ''] = (await writes(page))[1] ?? [];
    expect(JSON.parse(value)).toMatchObject({ status: 'warning', at: T0 + 1_000 + GAP_MS });
    expect(value).not.toContain('pay_url');
  });

  it('gates only on a fresh lockout, in a Modal that neither the back button nor Escape closes, until the service says otherwise', async () => {
    standIn.answers.set('cus_lock', { status: 'lockout' });
    const page = await launch({ customer: 'cus_lock' });
    await shown(page, 'lockout|service');
    const dialog = page.getByRole('dialog');
    await visible(dialog.getByRole('heading', { name: 'Your account is on hold' }));
    expect(await page.evaluate(() => (window as unknown as { native: { modal(): unknown } }).native.modal())).toEqual({
      visible: true,
      transparent: false,
      animationType: 'fade',
      statusBarTranslucent: true,
    });

    await page.evaluate(() => (window as unknown as { native: { back(): void } }).native.back());
    await page.keyboard.press('Escape');
    await page.clock.runFor(GAP_MS);
    await visible(dialog.getByRole('heading', { name: 'Your account is on hold' }));
    expect(await seen(page)).toEqual(['active|fallback', 'lockout|service']);

    // Paid elsewhere: back in the app, the service is asked and the gate lifts.
    standIn.answers.set('cus_lock', { status: 'active' });
    await setAppState(page, 'background');
    await setAppState(page, 'active');
    await shown(page, 'active|service');
    expect(await dialog.count()).toBe(0);
  });

  it('passes a preview through to the lookup, shows its gate, and never keeps it', async () => {
    const page = await launch({ customer: 'cus_preview', preview: 'lockout' });
    await shown(page, 'lockout|service');
    expect(
      standIn.asked.filter((q) => q.get('processor_customer_id') === 'cus_preview').map((q) => q.get('preview')),
    ).toEqual(['lockout']);
    const pay = page.getByRole('dialog').getByRole('link', { name: 'Pay now' });
    await pay.click();
    expect(await page.evaluate(() => (window as unknown as { native: { opened: string[] } }).native.opened)).toEqual([
      'https://pay.acme.test/link',
    ]);
    expect(await writes(page)).toEqual([]);
  });
});
