import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import {
  axeViolations,
  consolePage,
  haveBrowser,
  launchChromium,
  shot,
  signInAt,
  startConsoleService,
} from '../helpers/console-browser.js';
import type { ConsoleService } from '../helpers/console-browser.js';
import { event, invoice, paymentIds } from '../helpers/stripe-fixtures.js';

/**
 * The console's test-mode switch in Chromium: a tenant with customers in its live mode only
 * and others in its test mode only. The operator's console shows the live mode; switched to
 * test, it shows the test mode's subscribers and figures, marked, with every call to the
 * tenant's resources in the test mode; the address carries the mode, so a reload and a
 * copied link keep it. A secret key's session shows its key's mode, which it cannot switch.
 */

const DAY_S = 86_400;
const LIVE_OPEN = 'cus_live_only';
const LIVE_PAID = 'cus_live_paid';
const TEST_OPEN = ['cus_test_only_0', 'cus_test_only_1', 'cus_test_only_2'];

describe.skipIf(!haveBrowser)('the console: the test-mode switch', () => {
  let service: ConsoleService;
  let browser: Browser;

  /** The calls a page made to a tenant's resources under the operator's API, path and query. */
  function tenantCalls(page: Page): string[] {
    const calls: string[] = [];
    page.on('request', (r) => {
      const url = new URL(r.url());
      if (url.pathname.startsWith('/admin/v1/tenants/acme/') || url.pathname.startsWith('/v1/'))
        calls.push(`${url.pathname}${url.search}`);
    });
    return calls;
  }

  const switchOf = (page: Page) => page.getByRole('switch', { name: 'Test mode' });
  const band = (page: Page) => page.getByRole('note').filter({ hasText: 'Test mode' });
  const mainText = (page: Page) => page.locator('main').innerText();

  beforeAll(async () => {
    [service, browser] = await Promise.all([startConsoleService(), launchChromium()]);
    await service.admin('POST', '/tenants', { slug: 'acme' });
    const now = Math.floor(Date.now() / 1000);
    const ids = paymentIds();
    const failedAt = now - 10 * DAY_S;
    // The live mode: one customer failing now, one who failed and paid two days later.
    const live = [
      event('invoice.payment_failed', invoice(LIVE_OPEN, { next_payment_attempt: now + 3 * DAY_S }), {
        created: now - 3600,
      }),
      event('invoice.payment_failed', invoice(LIVE_PAID, { ids, next_payment_attempt: failedAt + 3 * DAY_S }), {
        created: failedAt,
      }),
      event('invoice.paid', invoice(LIVE_PAID, { ids, status: 'paid' }), { created: failedAt + 2 * DAY_S }),
    ];
    // The test mode: three customers failing now, none of them the live mode's.
    const test = TEST_OPEN.map((customer, i) =>
      event('invoice.payment_failed', invoice(customer, { next_payment_attempt: now + 3 * DAY_S }), {
        created: now - (i + 1) * 3600,
        livemode: false,
      }),
    );
    for (const [path, events] of [
      ['/tenants/acme/stripe-events', live],
      ['/tenants/acme/stripe-events?mode=test', test],
    ] as const) {
      const replayed = (await service.admin('POST', path, { events })) as { invalid: unknown[] };
      expect(replayed.invalid).toEqual([]);
    }
  });
  afterAll(async () => {
    await browser?.close();
    await service?.close();
  });

  it('shows the live mode, then the test mode switched on, marked, in the address, kept by a reload and a copied link', async () => {
    let copied: string;
    {
      const { page, problems, close } = await consolePage(browser);
      const calls = tenantCalls(page);
      try {
        await signInAt(page, `${service.url}/console/t/acme/subscribers`, service.adminToken);
        // Live: the live mode's subscribers only, no band, the switch off.
        await page.getByRole('link', { name: LIVE_OPEN }).waitFor();
        expect(await mainText(page)).toContain(LIVE_PAID);
        for (const c of TEST_OPEN) expect(await mainText(page)).not.toContain(c);
        expect(await switchOf(page).isChecked()).toBe(false);
        expect(await band(page).count()).toBe(0);
        await page.getByRole('link', { name: 'Overview' }).click();
        await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
        await expect.poll(() => page.locator('.stats').innerText()).toContain('1 customers in dunning');
        expect(await page.locator('.stats').innerText()).toContain('1 of 1 ended runs');
        expect(calls.length).toBeGreaterThan(0);
        expect(calls.filter((c) => c.includes('mode='))).toEqual([]);

        // Switched on: the same page, of the test mode, marked, and the mode in the address.
        calls.length = 0;
        await switchOf(page).check();
        await band(page).waitFor();
        expect(new URL(page.url()).search).toBe('?mode=test');
        expect(new URL(page.url()).pathname).toBe('/console/t/acme');
        await expect.poll(() => page.locator('.stats').innerText()).toContain('3 customers in dunning');
        expect(await page.locator('.stats').innerText()).toContain('0 of 0 ended runs');
        expect(await page.locator('header.top').getAttribute('class')).toContain('test');
        // The links of the frame keep the mode.
        expect(await page.getByRole('link', { name: 'Subscribers', exact: true }).getAttribute('href')).toBe(
          '/console/t/acme/subscribers?mode=test',
        );
        await page.getByRole('link', { name: 'Subscribers', exact: true }).click();
        await page.getByRole('link', { name: TEST_OPEN[0] as string }).waitFor();
        const listed = await mainText(page);
        for (const c of TEST_OPEN) expect(listed).toContain(c);
        expect(listed).not.toContain(LIVE_OPEN);
        expect(listed).not.toContain(LIVE_PAID);
        // A filter of the list keeps the mode beside it.
        await page.getByRole('group', { name: 'Answered status' }).getByRole('checkbox', { name: 'warning' }).check();
        await expect.poll(() => new URL(page.url()).search).toMatch(/^\?status=warning&mode=test$/);
        await page.getByRole('link', { name: TEST_OPEN[0] as string }).waitFor();

        // The settings and health pages load in the test mode too, without an error.
        for (const [link, section] of [
          ['Settings', 'Integration'],
          ['Health', 'Stripe events, last 7 days'],
        ] as const) {
          await page.getByRole('link', { name: link, exact: true }).click();
          await page.getByRole('heading', { name: section, level: 2 }).waitFor();
          expect(new URL(page.url()).search).toBe('?mode=test');
          expect(await page.locator('main [role=alert]').count()).toBe(0);
        }
        await page.goBack();
        await page.goBack();
        await page.getByRole('link', { name: TEST_OPEN[0] as string }).waitFor();

        // A reload keeps the test mode.
        await page.reload();
        await page.getByRole('link', { name: TEST_OPEN[1] as string }).waitFor();
        expect(await switchOf(page).isChecked()).toBe(true);
        expect(await band(page).count()).toBe(1);
        expect(await mainText(page)).not.toContain(LIVE_OPEN);

        // A customer of the test mode has a page, in the test mode.
        await page.getByRole('link', { name: TEST_OPEN[2] as string }).click();
        await page.getByRole('heading', { name: TEST_OPEN[2] as string, level: 1 }).waitFor();
        await expect.poll(() => page.locator('.stats').innerText()).toMatch(/Answered status\s+warning/);
        copied = page.url();
        expect(copied).toBe(`${service.url}/console/t/acme/subscribers/${TEST_OPEN[2]}?mode=test`);
        // Every call to the tenant's resources in test mode said so.
        expect(calls.length).toBeGreaterThan(2);
        expect(calls.filter((c) => !/[?&]mode=test(&|$)/.test(c))).toEqual([]);

        expect(await axeViolations(page)).toEqual([]);
        await shot(page, 'test-mode');

        // Switched off on a test customer's page: the live mode's list (that customer is not one of the live mode's).
        await switchOf(page).uncheck();
        await page.getByRole('link', { name: LIVE_OPEN }).waitFor();
        expect(new URL(page.url()).pathname).toBe('/console/t/acme/subscribers');
        expect(new URL(page.url()).search).toBe('');
        expect(await band(page).count()).toBe(0);
        expect(await mainText(page)).not.toContain(TEST_OPEN[0]);
        expect(problems).toEqual([]);
      } finally {
        await close();
      }
    }
    // The copied link, in a fresh browser, after its sign-in: the same customer, in the test mode.
    const { page, problems, close } = await consolePage(browser);
    try {
      await signInAt(page, copied, service.adminToken);
      await page.getByRole('heading', { name: TEST_OPEN[2] as string, level: 1 }).waitFor();
      expect(page.url()).toBe(copied);
      expect(await switchOf(page).isChecked()).toBe(true);
      await band(page).waitFor();
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it("shows a secret key's session its key's mode, which it cannot switch", async () => {
    const scopes = ['subscribers:read'];
    const testKey = (
      (await service.admin('POST', '/tenants/acme/keys?mode=test', { name: 'console test', scopes })) as {
        secret_key: string;
      }
    ).secret_key;
    const liveKey = await service.key('acme', scopes);
    expect(testKey).toMatch(/^sk_test_/);
    expect(liveKey).toMatch(/^sk_live_/);
    for (const [key, mode] of [
      [testKey, 'test'],
      [liveKey, 'live'],
    ] as const) {
      const { page, problems, close } = await consolePage(browser);
      const calls = tenantCalls(page);
      try {
        // A key's session ignores a mode its address asks for: its key decides.
        await signInAt(
          page,
          `${service.url}/console/t/acme/subscribers?mode=${mode === 'test' ? 'live' : 'test'}`,
          key,
        );
        const shown = mode === 'test' ? TEST_OPEN[0] : LIVE_OPEN;
        const hidden = mode === 'test' ? LIVE_OPEN : TEST_OPEN[0];
        await page.getByRole('link', { name: shown as string }).waitFor();
        expect(await mainText(page)).not.toContain(hidden);
        expect(await switchOf(page).isChecked()).toBe(mode === 'test');
        expect(await switchOf(page).isDisabled()).toBe(true);
        expect(await band(page).count()).toBe(mode === 'test' ? 1 : 0);
        // Its calls go to its own API, which its key's mode decides.
        expect(calls.length).toBeGreaterThan(0);
        expect(calls.filter((c) => !c.startsWith('/v1/') || c.includes('mode='))).toEqual([]);
        expect(problems).toEqual([]);
      } finally {
        await close();
      }
    }
  });
});
