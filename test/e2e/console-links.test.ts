import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import {
  axeViolations,
  consolePage,
  haveBrowser,
  launchChromium,
  seedTenant,
  signIn,
  signInAt,
  startConsoleService,
} from '../helpers/console-browser.js';
import type { ConsoleService } from '../helpers/console-browser.js';

/**
 * The console's addresses in Chromium: every page of a tenant's carries the tenant
 * (/console/t/:slug/...), so a link copied from one browser opens the same page in a fresh
 * one after its sign-in, for the operator and for the tenant's own key; another tenant's
 * key is told the page is not its tenant's and asks the service for nothing of it. The
 * addresses of before (/console/subscribers/...) lead to the new ones.
 */

describe.skipIf(!haveBrowser)('the console: the tenant in every address', () => {
  let service: ConsoleService;
  let browser: Browser;
  let acmeKey = '';
  let globexKey = '';
  let locked = '';
  let open: string[] = [];

  /** The calls a page made to the tenant API or the operator's, as paths. */
  function apiCalls(page: Page): string[] {
    const calls: string[] = [];
    page.on('request', (r) => {
      const path = new URL(r.url()).pathname;
      if (path.startsWith('/v1/') || path.startsWith('/admin/v1/')) calls.push(path);
    });
    return calls;
  }

  beforeAll(async () => {
    [service, browser] = await Promise.all([startConsoleService(), launchChromium()]);
    // Two tenants with the same customer ids: a page that asked the wrong one would show a customer all the same.
    const acme = await seedTenant(service, 'acme', { recovered: 1, open: 2 });
    await seedTenant(service, 'globex', { recovered: 1, open: 2 });
    locked = acme.locked;
    open = acme.open;
    acmeKey = await service.key('acme', ['subscribers:read']);
    globexKey = await service.key('globex', [
      'status:read',
      'subscribers:read',
      'subscribers:write',
      'settings:write',
      'webhooks:write',
      'keys:write',
    ]);
  });
  afterAll(async () => {
    await browser?.close();
    await service?.close();
  });

  it("opens a copied link to a customer's page, in a fresh browser after its sign-in, on the same page", async () => {
    // The operator finds the customer and copies the address.
    let copied: string;
    {
      const { page, problems, close } = await consolePage(browser);
      try {
        await signIn(page, service.url, service.adminToken);
        await page.getByRole('combobox', { name: 'Tenant' }).selectOption('acme');
        await page.getByRole('heading', { name: 'Overview' }).waitFor();
        expect(new URL(page.url()).pathname).toBe('/console/t/acme');
        await page.getByRole('link', { name: 'Subscribers' }).click();
        await page.getByRole('link', { name: locked }).click();
        await page.getByRole('heading', { name: locked, level: 1 }).waitFor();
        copied = page.url();
        expect(copied).toBe(`${service.url}/console/t/acme/subscribers/${locked}`);
        expect(problems).toEqual([]);
      } finally {
        await close();
      }
    }
    // Each in a fresh context: no cookie, no storage of the first.
    for (const credential of [acmeKey, service.adminToken]) {
      const { page, problems, close } = await consolePage(browser);
      try {
        await signInAt(page, copied, credential);
        await page.getByRole('heading', { name: locked, level: 1 }).waitFor();
        expect(page.url()).toBe(copied);
        await expect.poll(() => page.locator('.stats').innerText()).toMatch(/Answered status\s+lockout/);
        // The navigation stays with the tenant of the address.
        expect(await page.getByRole('link', { name: 'Settings' }).getAttribute('href')).toBe(
          '/console/t/acme/settings',
        );
        expect(await axeViolations(page)).toEqual([]);
        expect(problems).toEqual([]);
      } finally {
        await close();
      }
    }
  });

  it("tells another tenant's key the page is not its tenant's, and asks the service nothing of it", async () => {
    const { page, problems, close } = await consolePage(browser);
    const calls = apiCalls(page);
    try {
      await signInAt(page, `${service.url}/console/t/acme/subscribers/${locked}`, globexKey);
      await page.getByRole('heading', { name: 'Not your tenant', level: 1 }).waitFor();
      const text = await page.locator('main').innerText();
      expect(text).toContain(
        'This address is a page of the tenant acme, and this session was opened with a key of globex',
      );
      expect(text).not.toContain(locked);
      expect(await page.locator('.stats').count()).toBe(0);
      expect(calls).toEqual([]);
      // Its own tenant is one link away, under its own address.
      await page.getByRole('link', { name: 'The overview of globex' }).click();
      await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
      expect(new URL(page.url()).pathname).toBe('/console/t/globex');
      await expect.poll(() => page.locator('.stat').first().innerText()).toContain('$');
      expect(calls.length).toBeGreaterThan(0);
      calls.length = 0;
      // Every other page of acme's too.
      for (const rest of ['', '/subscribers', '/settings', '/health']) {
        await page.goto(`${service.url}/console/t/acme${rest}`);
        await page.getByRole('heading', { name: 'Not your tenant', level: 1 }).waitFor();
      }
      expect(calls).toEqual([]);
      expect(await axeViolations(page)).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('takes the addresses of before to the same page under the tenant: at once for a key, after the choice for the operator', async () => {
    const { page, problems, close } = await consolePage(browser);
    try {
      await signIn(page, service.url, acmeKey);
      await page.waitForURL(`${service.url}/console/t/acme`);
      const moves: [string, string][] = [
        ['/console/subscribers?status=warning,lockout', '/console/t/acme/subscribers?status=warning,lockout'],
        [`/console/subscribers/${open[0]}`, `/console/t/acme/subscribers/${open[0]}`],
        ['/console/settings', '/console/t/acme/settings'],
        ['/console/health', '/console/t/acme/health'],
        ['/console/', '/console/t/acme'],
      ];
      for (const [from, to] of moves) {
        await page.goto(`${service.url}${from}`);
        await page.waitForURL(`${service.url}${to}`);
      }
      await page.goto(`${service.url}/console/subscribers?status=warning,lockout`);
      await expect.poll(() => page.locator('tbody th[scope="row"] a').allInnerTexts()).toEqual([locked, ...open]);
      expect(await page.locator('tbody th[scope="row"] a').first().getAttribute('href')).toBe(
        `/console/t/acme/subscribers/${locked}`,
      );
      // The history's way back leads to the page shown before, not to the address of before.
      await page.goBack();
      await page.waitForURL(`${service.url}/console/t/acme`);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }

    const operator = await consolePage(browser);
    try {
      await signInAt(operator.page, `${service.url}/console/subscribers/${open[1]}`, service.adminToken);
      await operator.page.getByRole('heading', { name: 'Choose a tenant' }).waitFor();
      await operator.page.getByRole('combobox', { name: 'Tenant' }).selectOption('acme');
      await operator.page.getByRole('heading', { name: open[1], level: 1 }).waitFor();
      expect(operator.page.url()).toBe(`${service.url}/console/t/acme/subscribers/${open[1]}`);
      // Another tenant, chosen on a customer's page: the same section of that tenant.
      await operator.page.getByRole('combobox', { name: 'Tenant' }).selectOption('globex');
      await operator.page.getByRole('heading', { name: 'Subscribers', level: 1 }).waitFor();
      expect(operator.page.url()).toBe(`${service.url}/console/t/globex/subscribers`);
      // An address of a tenant that does not exist says so, from the service's own refusal.
      await operator.page.goto(`${service.url}/console/t/nobody/subscribers`);
      await operator.page.getByRole('alert').filter({ hasText: 'tenant_not_found' }).waitFor();
      expect(operator.problems).toEqual([]);
    } finally {
      await operator.close();
    }
  });
});
