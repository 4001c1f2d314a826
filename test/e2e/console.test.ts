import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import {
  axeViolations,
  consolePage,
  DESKTOP,
  haveBrowser,
  launchChromium,
  PHONE,
  seedTenant,
  shot,
  signIn,
  startConsoleService,
} from '../helpers/console-browser.js';
import type { ConsoleService } from '../helpers/console-browser.js';

/**
 * The console in Chromium against the running service: signing in with a secret key and
 * with the admin token, what a key's scopes hide, the CSRF token every cookie write needs,
 * the session cookie's attributes and end, the overview with a known history, its
 * screenshots on a desktop and a phone, and axe-core's WCAG A/AA rules with no serious
 * violation. The pages of subscribers and settings have suites of their own.
 */

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A request on a real socket with the headers given as they are (fetch would add an Origin or drop a Cookie). */
function raw(url: string, method: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method,
        headers: {
          ...headers,
          ...(body ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } : {}),
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
    req.end(body);
  });
}

async function session(
  url: string,
  credential: string,
): Promise<{ cookie: string; csrf: string; setCookie: string; body: Record<string, unknown> }> {
  const res = await raw(`${url}/console/api/session`, 'POST', {}, JSON.stringify({ credential }));
  expect(res.status, res.body).toBe(201);
  const setCookie = String(res.headers['set-cookie']);
  const cookie = setCookie.split(';')[0] as string;
  const body = JSON.parse(res.body) as Record<string, unknown>;
  return { cookie, csrf: String(body.csrf_token), setCookie, body };
}

describe.skipIf(!haveBrowser)('the console', () => {
  let service: ConsoleService;
  let browser: Browser;
  let fullKey = '';
  let statusKey = '';

  beforeAll(async () => {
    [service, browser] = await Promise.all([startConsoleService(), launchChromium()]);
    await seedTenant(service, 'acme');
    fullKey = await service.key('acme', [
      'status:read',
      'subscribers:read',
      'subscribers:write',
      'settings:write',
      'webhooks:write',
      'keys:write',
    ]);
    statusKey = await service.key('acme', ['status:read']);
  });
  afterAll(async () => {
    await browser?.close();
    await service?.close();
  });

  it('serves its page under a CSP with no inline script, and its assets cached for good', async () => {
    const page = await raw(`${service.url}/console/subscribers`, 'GET', {});
    expect(page.status).toBe(200);
    const csp = String(page.headers['content-security-policy']);
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(csp).toContain("frame-ancestors 'none'");
    expect(page.body).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(page.body).not.toMatch(/<style|style="/);
    const script = /src="(\/console\/assets\/console-[^"]+\.js)"/.exec(page.body)?.[1];
    expect(script).toBeDefined();
    const asset = await raw(`${service.url}${script}`, 'GET', {});
    expect(asset.status).toBe(200);
    expect(asset.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect((await raw(`${service.url}/console/assets/nope.js`, 'GET', {})).status).toBe(404);
  });

  it('signs in with a secret key: its tenant, its figures, no tenant picker, and the key not kept by the page', async () => {
    const { page, problems, close } = await consolePage(browser);
    try {
      await signIn(page, service.url, fullKey);
      await page.getByRole('heading', { name: 'Overview' }).waitFor();
      await expect.poll(() => page.locator('.stat').first().innerText()).toContain('$');
      const atRisk = await page.locator('.stat').first().innerText();
      // Four open customers (three warnings and one lockout), each owing 29.00 USD.
      expect(atRisk).toContain('$116.00');
      expect(atRisk).toContain('4 customers in dunning');
      expect(await page.locator('.stat').nth(1).innerText()).toContain('$116.00');
      expect(await page.locator('.stat').nth(2).innerText()).toContain('100.0 %');
      expect(await page.getByRole('combobox', { name: 'Tenant' }).count()).toBe(0);
      expect(await page.getByRole('link', { name: 'Tenants' }).count()).toBe(0);
      const stored = await page.evaluate(
        () => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + document.cookie,
      );
      expect(stored).not.toContain(fullKey);
      // HttpOnly: the page's script cannot read the session cookie.
      expect(stored).not.toContain('dunwall_session');
      expect(problems).toEqual([]);
      await shot(page, 'overview');
      expect(await axeViolations(page)).toEqual([]);
    } finally {
      await close();
    }
  });

  it('shows the overview on a phone without horizontal scrolling of the page', async () => {
    const { page, problems, close } = await consolePage(browser, PHONE);
    try {
      await signIn(page, service.url, fullKey);
      await page.getByRole('heading', { name: 'Overview' }).waitFor();
      await expect.poll(() => page.locator('.stat').first().innerText()).toContain('$');
      const overflow = await page.evaluate(
        () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
      );
      expect(overflow).toBeLessThanOrEqual(0);
      await shot(page, 'overview');
      expect(JSON.stringify(await axeViolations(page))).toBe('[]');
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it("signs in with the admin token: every tenant, chosen in the header, and the operator's tenants page", async () => {
    const { page, problems, close } = await consolePage(browser);
    try {
      await signIn(page, service.url, service.adminToken);
      await page.getByRole('heading', { name: 'Choose a tenant' }).waitFor();
      await page.getByRole('combobox', { name: 'Tenant' }).selectOption('acme');
      await page.getByRole('heading', { name: 'Overview' }).waitFor();
      await expect.poll(() => page.locator('.stat').first().innerText()).toContain('$116.00');
      await page.getByRole('link', { name: 'Tenants' }).click();
      await page.getByRole('heading', { name: 'Tenants' }).waitFor();
      await page.getByRole('textbox', { name: 'Slug' }).fill('globex');
      await page.getByRole('button', { name: 'Create' }).click();
      await page.getByRole('heading', { name: 'globex: its keys, shown this once' }).waitFor();
      expect(await page.locator('.secret code').first().innerText()).toMatch(/^pk_/);
      await expect.poll(() => page.getByRole('row', { name: /globex/ }).count()).toBe(1);
      await shot(page, 'tenants');
      expect(await axeViolations(page)).toEqual([]);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('hides what a key may not touch: a status:read key sees no figures and no tenant management', async () => {
    const { page, problems, close } = await consolePage(browser);
    try {
      await signIn(page, service.url, statusKey);
      await page.getByRole('heading', { name: 'Overview' }).waitFor();
      await page.getByText('This needs the subscribers:read scope').waitFor();
      expect(await page.locator('.stat').count()).toBe(0);
      expect(await page.getByRole('combobox', { name: 'Period' }).count()).toBe(0);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
    // And the API behind the page says the same: the cookie holds the key's scopes, no more.
    const s = await session(service.url, statusKey);
    const figures = await raw(`${service.url}/v1/analytics/recovery`, 'GET', { cookie: s.cookie });
    expect(figures.status).toBe(403);
    expect(JSON.parse(figures.body).code).toBe('insufficient_scope');
    const operator = await raw(`${service.url}/admin/v1/tenants`, 'GET', { cookie: s.cookie });
    expect(operator.status).toBe(401);
    expect(JSON.parse(operator.body).code).toBe('invalid_session');
  });

  it('refuses a write made with the cookie but without its CSRF token, or with another session’s', async () => {
    const s = await session(service.url, fullKey);
    const other = await session(service.url, fullKey);
    const patch = (headers: Record<string, string>) =>
      raw(`${service.url}/v1/settings`, 'PATCH', headers, JSON.stringify({ hmac_required: false }));
    const none = await patch({ cookie: s.cookie });
    expect(none.status).toBe(403);
    expect(JSON.parse(none.body).code).toBe('csrf_token_invalid');
    const foreign = await patch({ cookie: s.cookie, 'x-csrf-token': other.csrf });
    expect(foreign.status).toBe(403);
    const admin = await session(service.url, service.adminToken);
    const operatorWrite = await raw(
      `${service.url}/admin/v1/tenants/acme`,
      'PATCH',
      { cookie: admin.cookie },
      JSON.stringify({ suspended: false }),
    );
    expect(operatorWrite.status).toBe(403);
    expect(JSON.parse(operatorWrite.body).code).toBe('csrf_token_invalid');
    const good = await patch({ cookie: s.cookie, 'x-csrf-token': s.csrf });
    expect(good.status, good.body).toBe(200);
    // Reads need no token.
    expect((await raw(`${service.url}/v1/settings`, 'GET', { cookie: s.cookie })).status).toBe(200);
  });

  it('sets an HttpOnly SameSite=Strict cookie, Secure and refused over plain HTTP off loopback, and refuses a sign-in from another site', async () => {
    const s = await session(service.url, fullKey);
    expect(s.setCookie).toMatch(/HttpOnly/);
    expect(s.setCookie).toMatch(/SameSite=Strict/);
    expect(s.setCookie).toMatch(/Max-Age=28800/);
    expect(s.setCookie).not.toMatch(/Secure/);
    expect(s.body).toMatchObject({ kind: 'tenant', tenant: { slug: 'acme' } });
    // A request a proxy on this machine passed on is not loopback, whatever its Host (test/routes/console-loopback.test.ts tries other addresses).
    const remote = await raw(
      `${service.url}/console/api/session`,
      'POST',
      { host: 'console.example.com', 'x-forwarded-for': '203.0.113.7' },
      JSON.stringify({ credential: fullKey }),
    );
    expect(remote.status).toBe(403);
    expect(JSON.parse(remote.body).code).toBe('insecure_transport');
    const crossSite = await raw(
      `${service.url}/console/api/session`,
      'POST',
      { origin: 'https://evil.example' },
      JSON.stringify({ credential: fullKey }),
    );
    expect(crossSite.status).toBe(403);
    const wrong = await raw(
      `${service.url}/console/api/session`,
      'POST',
      {},
      JSON.stringify({ credential: 'sk_test_wrongwrongwrongwrongwrongwrongwrongwrong' }),
    );
    expect(wrong.status).toBe(401);
    expect(JSON.parse(wrong.body).code).toBe('invalid_credentials');
  });

  it('ends a session when it signs out, and every session of a key when the key is revoked', async () => {
    const s = await session(service.url, fullKey);
    const out = await raw(`${service.url}/console/api/session`, 'DELETE', { cookie: s.cookie, 'x-csrf-token': s.csrf });
    expect(out.status).toBe(204);
    expect(String(out.headers['set-cookie'])).toMatch(/Max-Age=0/);
    const after = await raw(`${service.url}/v1/settings`, 'GET', { cookie: s.cookie });
    expect(after.status).toBe(401);
    expect(JSON.parse(after.body).code).toBe('invalid_session');

    const doomedKey = await service.key('acme', ['subscribers:read']);
    const doomed = await session(service.url, doomedKey);
    expect((await raw(`${service.url}/v1/subscribers`, 'GET', { cookie: doomed.cookie })).status).toBe(200);
    const keys = (await service.admin('GET', '/tenants/acme/keys')) as { data: { id: string; prefix: string }[] };
    const id = keys.data.find((k) => doomedKey.startsWith(k.prefix) && k.prefix.length > 8)?.id;
    expect(id).toBeDefined();
    const revoked = await raw(`${service.url}/admin/v1/tenants/acme/keys/${id}`, 'DELETE', {
      authorization: `Bearer ${service.adminToken}`,
    });
    expect(revoked.status).toBe(204);
    await expect
      .poll(async () => (await raw(`${service.url}/v1/subscribers`, 'GET', { cookie: doomed.cookie })).status)
      .toBe(401);
  });

  it('sends a page whose session has ended back to the sign-in', async () => {
    const { page, close } = await consolePage(browser, DESKTOP);
    try {
      await signIn(page, service.url, fullKey);
      await page.getByRole('heading', { name: 'Overview' }).waitFor();
      await page.context().clearCookies();
      await page.getByRole('link', { name: 'Overview' }).click();
      await page.getByRole('combobox', { name: 'Period' }).selectOption({ label: 'Last 30 days' });
      await page.getByLabel('Secret key or admin token').waitFor();
    } finally {
      await close();
    }
  });
});
