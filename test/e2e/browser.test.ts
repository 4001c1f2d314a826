import { mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { computeHmac } from '../../src/domain/hmac.js';
import type { Running } from '../../src/runtime/server.js';
import { loadSnippet, snippetPath } from '../../src/http/snippet-asset.js';
import { buildAppWithModel } from '../helpers/harness.js';
import { haveBrowser, launchChromium, snippetTag, startService } from '../helpers/snippet-browser.js';
import type { Service, Tenant } from '../helpers/snippet-browser.js';
import { seedDemo } from '../../src/demo/index.js';
import { openStore } from '../../src/store/index.js';

const RESULTS = join(process.cwd(), 'test-results');
const HOSTILE_CSS = `* { color: rgb(255, 0, 0) !important; font-size: 40px !important; font-family: serif !important; }
div, p, a, button { display: inline !important; background: lime !important; }`;

describe.skipIf(!haveBrowser)('the snippet in a real browser', () => {
  let service: Service;
  let running: Running;
  let pageServer: Server;
  let pageOrigin = '';
  let browser: Browser;
  let context: BrowserContext;
  let acme: Tenant;
  let scale: Tenant;
  let frozen: Tenant;
  const CARD_URL = 'https://billing.acme.test/card';
  const admin = (method: string, path: string, body?: unknown) => service.admin(method, path, body);

  beforeAll(async () => {
    service = await startService();
    running = service.running;
    acme = (await admin('POST', '/tenants', { slug: 'acme', card_update_url: CARD_URL })) as Tenant;
    scale = (await admin('POST', '/tenants', { slug: 'scale-co', tier: 'scale', card_update_url: CARD_URL })) as Tenant;
    frozen = (await admin('POST', '/tenants', { slug: 'frozen' })) as Tenant;
    await admin('PATCH', '/tenants/frozen', { suspended: true });
    for (const [slug, id, status] of [
      ['acme', 'cus_warn', 'warning'],
      ['acme', 'cus_lock', 'lockout'],
      ['acme', 'cus_ok', 'active'],
      ['scale-co', 'cus_lock', 'lockout'],
      ['frozen', 'cus_lock', 'lockout'],
    ]) {
      await admin('PUT', `/tenants/${slug}/subscribers/${id}`, { status });
    }

    // The tenant's app, on another origin; it can also serve its own copy of the snippet.
    const snippetCopy = readFileSync(snippetPath());
    pageServer = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://page.test');
      if (url.pathname === '/snippet.js') {
        res.writeHead(200, { 'content-type': 'text/javascript' }).end(snippetCopy);
        return;
      }
      const tag = url.searchParams.get('tag');
      const css = url.searchParams.get('hostile') === '1' ? HOSTILE_CSS : '';
      const headers: Record<string, string> = { 'content-type': 'text/html; charset=utf-8' };
      // A strict policy: no inline style anywhere, scripts only from here, the service and this page.
      if (url.searchParams.get('csp') === '1') {
        headers['content-security-policy'] =
          `default-src 'self'; script-src 'self' ${running.url} 'unsafe-inline'; style-src 'self'; connect-src ${running.url}`;
      }
      // An app with a fixed header, its content padded below it, and a slot of its own.
      const header =
        url.searchParams.get('header') === '1'
          ? '<header id="app-header" style="position:fixed;top:0;left:0;right:0;height:64px;background:#223;color:#fff;z-index:1000">Nav</header><div id="slot"></div>'
          : '';
      const bodyStyle = url.searchParams.get('header') === '1' ? ' style="margin:0;padding-top:64px"' : '';
      res.writeHead(200, headers)
        .end(`<!doctype html><html><head><meta name="viewport" content="width=device-width, initial-scale=1"><style>${css}</style></head><body${bodyStyle}>${header}
<script>window.__events = []; document.addEventListener('dunwall:status', (e) => window.__events.push(e.detail));</script>
<h1>Host app</h1><button id="own">Own button</button> <a id="own-link" href="#x">Own link</a>
<div style="height: 3000px">A long page.</div>
${tag ?? ''}
</body></html>`);
    });
    await new Promise<void>((resolve) => pageServer.listen(0, '127.0.0.1', resolve));
    pageOrigin = `http://localhost:${(pageServer.address() as AddressInfo).port}`;

    browser = await launchChromium();
    context = await browser.newContext({ viewport: { width: 1000, height: 700 } });
    mkdirSync(RESULTS, { recursive: true });
  });

  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => pageServer?.close(resolve));
    await service?.close();
  });

  function tag(
    t: Tenant,
    customer: string,
    extra: Record<string, string> = {},
    src = `${running.url}/snippet.js`,
  ): string {
    return snippetTag(src, t, customer, extra);
  }

  /** Opens the host page and waits for the snippet's answer (its dunwall:status event). */
  async function open(
    scriptTag: string,
    opts: {
      hostile?: boolean;
      csp?: boolean;
      in?: BrowserContext;
      header?: boolean;
      before?: (page: Page) => Promise<void>;
    } = {},
  ): Promise<{ page: Page; status: { status: string; source: string } }> {
    const page = await (opts.in ?? context).newPage();
    await opts.before?.(page);
    const url = `${pageOrigin}/app?${new URLSearchParams({ tag: scriptTag, ...(opts.hostile ? { hostile: '1' } : {}), ...(opts.csp ? { csp: '1' } : {}), ...(opts.header ? { header: '1' } : {}) })}`;
    await page.goto(url);
    await page.waitForFunction(() => (window as unknown as { __events: unknown[] }).__events.length > 0, undefined, {
      timeout: 10_000,
    });
    const status = await page.evaluate(
      () => (window as unknown as { __events: { status: string; source: string }[] }).__events[0],
    );
    return { page, status: status ?? { status: '', source: '' } };
  }

  it('shows the warning banner with the card update link, untouched by the page CSS', async () => {
    const { page, status } = await open(tag(acme, 'cus_warn'), { hostile: true });
    expect(status).toMatchObject({ status: 'warning', source: 'service', card_update_url: CARD_URL });
    const banner = page.locator('dunwall-enforcement [role="alert"]');
    await expect.poll(() => banner.isVisible()).toBe(true);
    expect(await banner.locator('a').getAttribute('href')).toBe(CARD_URL);
    expect(await banner.locator('a').textContent()).toBe('Update card');
    expect(await banner.textContent()).toContain('Powered by Dunwall');
    const style = await banner.locator('p').evaluate((p) => {
      const s = getComputedStyle(p);
      return { color: s.color, fontSize: s.fontSize, display: getComputedStyle(p.parentElement as Element).display };
    });
    expect(style).toEqual({ color: 'rgb(29, 41, 57)', fontSize: '15px', display: 'flex' });
    // The page's own elements did get the hostile styles: the test would notice if they had not.
    expect(await page.locator('h1').evaluate((h) => getComputedStyle(h).color)).toBe('rgb(255, 0, 0)');
    await page.screenshot({ path: join(RESULTS, 'banner.png') });
    await page.close();
  });

  it('remembers a dismissal for the browser session, across a reload', async () => {
    const session = await browser.newContext();
    const { page } = await open(tag(acme, 'cus_warn'), { in: session });
    await page.locator('dunwall-enforcement button[aria-label="Dismiss"]').click();
    expect(await page.locator('dunwall-enforcement').count()).toBe(0);
    await page.reload();
    await page.waitForFunction(() => (window as unknown as { __events: unknown[] }).__events.length > 0);
    expect(await page.locator('dunwall-enforcement').count()).toBe(0);
    // Another tab of the same browser session remembers it too.
    const tab = await open(tag(acme, 'cus_warn'), { in: session });
    expect(await tab.page.locator('dunwall-enforcement').count()).toBe(0);
    await session.close();
    // A new browser session shows it again.
    const fresh = await browser.newContext();
    const again = await open(tag(acme, 'cus_warn'), { in: fresh });
    expect(await again.page.locator('dunwall-enforcement [role="alert"]').isVisible()).toBe(true);
    await fresh.close();
  });

  it('gates a lockout: a modal dialog that keeps the focus, locks the scroll and cannot be dismissed', async () => {
    const { page, status } = await open(
      tag(acme, 'cus_lock', { 'data-support-url': 'https://acme.test/support', 'data-card-update-url': CARD_URL }),
    );
    expect(status.status).toBe('lockout');
    const dialog = page.locator('dunwall-enforcement [role="dialog"]');
    expect(await dialog.isVisible()).toBe(true);
    expect(await dialog.getAttribute('aria-modal')).toBe('true');
    expect(await dialog.locator('a').evaluateAll((as) => as.map((a) => a.getAttribute('href')))).toEqual([
      CARD_URL,
      'https://acme.test/support',
    ]);
    expect(await dialog.textContent()).toContain('Powered by Dunwall');

    const focusIsInDialog = () =>
      page.evaluate(() => {
        const host = document.querySelector('dunwall-enforcement');
        const inner = host?.shadowRoot?.activeElement;
        return (
          document.activeElement === host &&
          inner !== null &&
          inner !== undefined &&
          inner.closest('[role="dialog"]') !== null
        );
      });
    expect(await focusIsInDialog()).toBe(true);
    for (let i = 0; i < 6; i += 1) {
      await page.keyboard.press(i % 2 === 0 ? 'Tab' : 'Shift+Tab');
      expect(await focusIsInDialog()).toBe(true);
    }
    // The page's own controls cannot take the focus, and Escape changes nothing.
    await page.evaluate(() => (document.getElementById('own') as HTMLButtonElement).focus());
    expect(await focusIsInDialog()).toBe(true);
    await page.keyboard.press('Escape');
    expect(await dialog.isVisible()).toBe(true);
    expect(await page.evaluate(() => getComputedStyle(document.documentElement).overflow)).toBe('hidden');
    await page.mouse.wheel(0, 2000);
    expect(await page.evaluate(() => window.scrollY)).toBe(0);
    await page.screenshot({ path: join(RESULTS, 'gate.png') });
    await page.close();
  });

  const overflow = (page: Page) => page.evaluate(() => getComputedStyle(document.documentElement).overflow);
  const checkFrom = (page: Page, t: Tenant, customer: string) =>
    page.evaluate(
      async (o) =>
        (await (window as unknown as { Dunwall: { check(o: unknown): Promise<{ status: string }> } }).Dunwall.check(o))
          .status,
      {
        tenant: t.slug,
        key: t.publishable_key,
        customer,
        hmac: computeHmac(t.hmac_secret, customer),
        baseUrl: running.url,
      },
    );

  it('keeps the focus in the gate when the page adds a frame later, or the backdrop is clicked', async () => {
    const { page } = await open(tag(acme, 'cus_lock', { 'data-card-update-url': CARD_URL }));
    await page.evaluate(() => {
      const frame = document.createElement('iframe');
      frame.id = 'late';
      frame.srcdoc = '<button>chat</button>';
      document.body.appendChild(frame);
    });
    const late = page.locator('#late');
    await expect.poll(() => late.evaluate((f) => (f as HTMLElement).inert)).toBe(true);
    await late.evaluate((f) => (f as HTMLIFrameElement).focus());
    const inDialog = () =>
      page.evaluate(
        () =>
          document.querySelector('dunwall-enforcement')?.shadowRoot?.activeElement?.closest('[role="dialog"]') != null,
      );
    expect(await inDialog()).toBe(true);
    await page.mouse.click(5, 5);
    expect(await inDialog()).toBe(true);
    await page.close();
  });

  it("shows the tenant's branding from the admin configuration alone, in the browser's language", async () => {
    const branded = (await admin('POST', '/tenants', {
      slug: 'branded-co',
      branding: {
        payment_url: 'https://pay.branded.test/now',
        support_url: 'https://branded.test/help',
        colors: { accent: '#0a7cff' },
        texts: {
          default: { gate_title: 'Your plan is paused', gate_action: 'Pay now' },
          fr: { gate_title: 'Votre abonnement est suspendu', gate_action: 'Payer' },
          'fr-CA': { gate_action: 'Payer maintenant' },
        },
      },
    })) as Tenant;
    await admin('PUT', '/tenants/branded-co/subscribers/cus_lock', { status: 'lockout' });
    await admin('PUT', '/tenants/branded-co/subscribers/cus_ok', { status: 'active' });
    for (const [locale, title, action] of [
      ['fr-CA', 'Votre abonnement est suspendu', 'Payer maintenant'],
      ['fr-FR', 'Votre abonnement est suspendu', 'Payer'],
      ['de-DE', 'Your plan is paused', 'Pay now'],
    ] as const) {
      const localized = await browser.newContext({ locale, viewport: { width: 1000, height: 700 } });
      try {
        const { page } = await open(tag(branded, 'cus_lock'), { in: localized });
        const dialog = page.locator('dunwall-enforcement [role="dialog"]');
        expect(await dialog.locator('h2').textContent(), locale).toBe(title);
        // The lookup names no link for a lockout: the gate's link is the one the admin set.
        const pay = dialog.locator('a.go');
        expect([await pay.textContent(), await pay.getAttribute('href')], locale).toEqual([
          action,
          'https://pay.branded.test/now',
        ]);
        expect(await dialog.locator('a[href="https://branded.test/help"]').count()).toBe(1);
        await page.screenshot({ path: join(RESULTS, `gate-branded-${locale}.png`) });
        await page.close();
      } finally {
        await localized.close();
      }
    }
    // Nothing to show: the branding is not even asked for.
    const asked: string[] = [];
    const page = await context.newPage();
    page.on('request', (r) => asked.push(r.url()));
    await page.goto(`${pageOrigin}/app?${new URLSearchParams({ tag: tag(branded, 'cus_ok') })}`);
    await page.waitForFunction(() => (window as unknown as { __events: unknown[] }).__events.length > 0);
    expect(asked.some((u) => u.includes('/api/subscriber-status/branded-co'))).toBe(true);
    expect(asked.some((u) => u.includes('/api/branding/'))).toBe(false);
    await page.close();
    // The page's own attributes still win.
    const { page: own } = await open(
      tag(branded, 'cus_lock', {
        'data-lockout-title': 'Page title',
        'data-card-update-url': 'https://page.branded.test/card',
      }),
    );
    const dialog = own.locator('dunwall-enforcement [role="dialog"]');
    expect(await dialog.locator('h2').textContent()).toBe('Page title');
    expect(await dialog.locator('a.go').getAttribute('href')).toBe('https://page.branded.test/card');
    await own.close();
  });

  for (const viewport of [
    { width: 1280, height: 800 },
    { width: 375, height: 667 },
  ]) {
    it(`places the banner where it hides none of the app at ${viewport.width}x${viewport.height}: pushed, mounted, or at the bottom`, async () => {
      const sized = await browser.newContext({ viewport });
      try {
        type Box = { x: number; y: number; width: number; height: number };
        const boxes = async (page: Page) =>
          page.evaluate(() => {
            const r = (e: Element | null | undefined) => (e ? e.getBoundingClientRect().toJSON() : null);
            const host = document.querySelector('dunwall-enforcement');
            const bar = host?.shadowRoot?.querySelector('.bar');
            const close = host?.shadowRoot?.querySelector('.x');
            return {
              header: r(document.getElementById('app-header')),
              bar: r(bar),
              close: r(close),
              inSlot: !!document.querySelector('#slot dunwall-enforcement'),
              barScroll: bar ? bar.scrollWidth - bar.clientWidth : -1,
            };
          }) as Promise<{ header: Box; bar: Box; close: Box; inSlot: boolean; barScroll: number }>;
        const intersects = (a: Box, b: Box) =>
          a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
        for (const [mode, attrs] of [
          ['push', {}],
          ['mount', { 'data-mount': '#slot' }],
          ['bottom', { 'data-position': 'bottom' }],
          ['bottom-overlay', { 'data-position': 'bottom', 'data-mode': 'overlay' }],
        ] as const) {
          const { page } = await open(tag(acme, 'cus_warn', attrs), { in: sized, header: true });
          await page.locator('dunwall-enforcement').waitFor({ state: 'attached' });
          const b = await boxes(page);
          expect(intersects(b.bar, b.header), `${mode}: the banner covers the header`).toBe(false);
          if (mode === 'mount') expect(b.inSlot).toBe(true);
          if (mode.startsWith('bottom')) expect(Math.round(b.bar.y + b.bar.height)).toBe(viewport.height);
          // Nothing cut off, the close button a thumb's size and inside the bar, on the right.
          expect(b.barScroll, mode).toBeLessThanOrEqual(0);
          expect(b.close.width).toBeGreaterThanOrEqual(44);
          expect(b.close.height).toBeGreaterThanOrEqual(44);
          expect(b.close.x + b.close.width).toBeLessThanOrEqual(b.bar.x + b.bar.width + 0.5);
          expect(b.close.x).toBeGreaterThan(b.bar.x + b.bar.width / 2);
          await page.screenshot({ path: join(RESULTS, `banner-${mode}-${viewport.width}x${viewport.height}.png`) });
          await page.close();
        }
      } finally {
        await sized.close();
      }
    });
  }

  it('follows dark mode with its own colours, unless the tenant or the page chose some', async () => {
    const dark = await browser.newContext({
      colorScheme: 'dark',
      reducedMotion: 'reduce',
      viewport: { width: 375, height: 667 },
    });
    try {
      const colorsOf = async (page: Page) =>
        page.evaluate(() => {
          const box = document.querySelector('dunwall-enforcement')?.shadowRoot?.querySelector('.box');
          const title = box?.querySelector('h2');
          return {
            background: box ? getComputedStyle(box).backgroundColor : '',
            text: title ? getComputedStyle(title).color : '',
          };
        });
      const { page } = await open(tag(acme, 'cus_lock'), { in: dark });
      expect(await colorsOf(page)).toEqual({ background: 'rgb(28, 34, 48)', text: 'rgb(231, 233, 238)' });
      // The gate fits the phone's width.
      const width = await page.evaluate(
        () =>
          document.querySelector('dunwall-enforcement')?.shadowRoot?.querySelector('.box')?.getBoundingClientRect()
            .right ?? 0,
      );
      expect(width).toBeLessThanOrEqual(375);
      await page.screenshot({ path: join(RESULTS, 'gate-dark-375x667.png') });
      await page.close();
      const { page: chosen } = await open(tag(acme, 'cus_lock', { 'data-text-color': '#112233' }), { in: dark });
      expect((await colorsOf(chosen)).text).toBe('rgb(17, 34, 51)');
      await chosen.close();
    } finally {
      await dark.close();
    }
  });

  it('fits a phone 320 px wide, texts wrapping rather than cut off', async () => {
    const narrow = await browser.newContext({ viewport: { width: 320, height: 568 } });
    try {
      const { page } = await open(
        tag(acme, 'cus_warn', {
          'data-warning-text':
            'A rather long warning text that has to wrap onto several lines on a narrow phone screen.',
        }),
        { in: narrow, header: true },
      );
      await page.locator('dunwall-enforcement').waitFor();
      const fit = await page.evaluate(() => {
        const bar = document.querySelector('dunwall-enforcement')?.shadowRoot?.querySelector('.bar');
        const r = bar?.getBoundingClientRect();
        return {
          overflow: bar ? bar.scrollWidth - bar.clientWidth : -1,
          right: r ? r.right : 0,
          pageOverflow: document.documentElement.scrollWidth - document.documentElement.clientWidth,
        };
      });
      expect(fit.overflow).toBeLessThanOrEqual(0);
      expect(fit.right).toBeLessThanOrEqual(320);
      expect(fit.pageOverflow).toBeLessThanOrEqual(0);
      await page.screenshot({ path: join(RESULTS, 'banner-320.png') });
      await page.close();
    } finally {
      await narrow.close();
    }
  });

  it('shows a way out on a gate with no links configured', async () => {
    const { page } = await open(tag(acme, 'cus_lock'));
    expect(await page.locator('dunwall-enforcement [role="dialog"]').textContent()).toContain(
      'Please contact the support team',
    );
    await page.close();
  });

  it('renders only the latest check: a slow answer for the last user never gates the next', async () => {
    const { page } = await open(tag(acme, 'cus_ok'));
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    await page.route('**/api/subscriber-status/**', async (route) => {
      if (route.request().url().includes('cus_lock')) await held;
      await route.continue();
    });
    await page.evaluate(
      (o) => {
        const w = window as unknown as { Dunwall: { check(o: unknown): Promise<unknown> }; pending: Promise<unknown> };
        w.pending = w.Dunwall.check(o);
      },
      {
        tenant: 'acme',
        key: acme.publishable_key,
        customer: 'cus_lock',
        hmac: computeHmac(acme.hmac_secret, 'cus_lock'),
        baseUrl: running.url,
      },
    );
    expect(await checkFrom(page, acme, 'cus_ok')).toBe('active');
    release();
    await page.evaluate(() => (window as unknown as { pending: Promise<unknown> }).pending);
    expect(await page.locator('dunwall-enforcement').count()).toBe(0);
    expect(await overflow(page)).not.toBe('hidden');
    await page.close();
  });

  it('lets a customer in on the next check once paid: no answer is cached in the page', async () => {
    await admin('PUT', '/tenants/acme/subscribers/cus_paying', { status: 'lockout' });
    const { page } = await open(tag(acme, 'cus_paying'));
    expect(await page.locator('dunwall-enforcement [role="dialog"]').isVisible()).toBe(true);
    await admin('PUT', '/tenants/acme/subscribers/cus_paying', { status: 'active', reason: 'paid' });
    expect(await checkFrom(page, acme, 'cus_paying')).toBe('active');
    expect(await page.locator('dunwall-enforcement').count()).toBe(0);
    await page.close();
  });

  it('gives the page back when something else removes the gate', async () => {
    const { page } = await open(tag(acme, 'cus_lock'));
    expect(await overflow(page)).toBe('hidden');
    // As a framework swapping the body on navigation would.
    await page.evaluate(() =>
      document.body.replaceChildren(
        Object.assign(document.createElement('button'), { id: 'fresh', textContent: 'fresh' }),
      ),
    );
    await expect.poll(() => overflow(page)).not.toBe('hidden');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('fresh');
    await page.close();
  });

  it('keeps its look under a strict Content-Security-Policy', async () => {
    const { page, status } = await open(tag(acme, 'cus_lock'), { csp: true });
    expect(status.status).toBe('lockout');
    const position = await page.locator('dunwall-enforcement .veil').evaluate((v) => getComputedStyle(v).position);
    expect(position).toBe('fixed');
    await page.close();
  });

  it('shows one gate when the snippet is loaded twice', async () => {
    // The service's copy and the page's own copy: whichever runs first serves both tags, each
    // with the base of its own script.
    const { page } = await open(
      `${tag(acme, 'cus_lock')}${tag(acme, 'cus_lock', { 'data-base-url': running.url }, `${pageOrigin}/snippet.js`)}`,
    );
    // Both copies have run once the page is idle; a check superseded by the other renders nothing.
    await page.waitForLoadState('networkidle');
    expect(await page.locator('dunwall-enforcement').count()).toBe(1);
    await page.evaluate(() => (window as unknown as { Dunwall: { clear(): void } }).Dunwall.clear());
    expect(await page.locator('dunwall-enforcement').count()).toBe(0);
    expect(await overflow(page)).not.toBe('hidden');
    await page.close();
  });

  it('shows no watermark when the tier does not call for it', async () => {
    const { page } = await open(tag(scale, 'cus_lock'));
    expect(await page.locator('dunwall-enforcement [role="dialog"]').isVisible()).toBe(true);
    expect(await page.locator('dunwall-enforcement [role="dialog"]').textContent()).not.toContain('Powered by Dunwall');
    await page.close();
  });

  it.each([
    ['a known active subscriber', () => tag(acme, 'cus_ok'), 'service'],
    ['an unknown subscriber', () => tag(acme, 'cus_nobody'), 'service'],
    [
      'a wrong key (401)',
      () => tag({ ...acme, publishable_key: 'pk_wrongwrongwrongwrongwrong1' }, 'cus_lock'),
      'fallback',
    ],
    ['a wrong hmac (403)', () => tag(acme, 'cus_lock', { 'data-hmac': 'f'.repeat(64) }), 'fallback'],
    ['a suspended tenant (402)', () => tag(frozen, 'cus_lock'), 'fallback'],
    [
      'a service that is down',
      () => tag(acme, 'cus_lock', { 'data-base-url': 'http://127.0.0.1:9' }, `${pageOrigin}/snippet.js`),
      'fallback',
    ],
  ])('shows nothing for %s', async (_name, makeTag, source) => {
    const { page, status } = await open(makeTag());
    expect(status).toMatchObject({ status: 'active', source });
    expect(await page.locator('dunwall-enforcement').count()).toBe(0);
    expect(await page.evaluate(() => getComputedStyle(document.documentElement).overflow)).not.toBe('hidden');
    await page.close();
  });

  it("works from the tenant's own domain (a copy of the file), pointed at the service", async () => {
    const { page, status } = await open(
      tag(acme, 'cus_warn', { 'data-base-url': running.url }, `${pageOrigin}/snippet.js`),
    );
    expect(status.status).toBe('warning');
    expect(await page.locator('dunwall-enforcement [role="alert"]').isVisible()).toBe(true);
    await page.close();
  });

  it('Dunwall.check for single-page apps: checks again on login, and clears for the next user', async () => {
    const { page } = await open(tag(acme, 'cus_ok'));
    const check = (customer: string) =>
      page.evaluate(
        async (o) =>
          (
            await (window as unknown as { Dunwall: { check(o: unknown): Promise<{ status: string }> } }).Dunwall.check(
              o,
            )
          ).status,
        {
          tenant: 'acme',
          key: acme.publishable_key,
          customer,
          hmac: computeHmac(acme.hmac_secret, customer),
          baseUrl: running.url,
        },
      );
    expect(await check('cus_lock')).toBe('lockout');
    expect(await page.locator('dunwall-enforcement [role="dialog"]').isVisible()).toBe(true);
    expect(await check('cus_ok')).toBe('active');
    expect(await page.locator('dunwall-enforcement').count()).toBe(0);
    expect(await page.evaluate(() => getComputedStyle(document.documentElement).overflow)).not.toBe('hidden');
    expect(await page.evaluate(() => (document.getElementById('own') as HTMLButtonElement).inert)).toBe(false);
    await page.close();
  });

  describe('pay now, the countdown to a lockout, and asking again on return', () => {
    const PAY_URL = 'https://invoice.stripe.com/i/acct_1Test/test_YWNjdF8xVGVzdCxfUGF5TWU';
    const NOW = new Date('2026-11-30T12:00:00Z');
    const LOCKOUT_AT = '2026-12-03T12:00:00Z';
    const HOUR_MS = 3_600_000;
    let paysCo: Tenant;

    beforeAll(async () => {
      paysCo = (await admin('POST', '/tenants', {
        slug: 'pays-co',
        branding: {
          payment_url: 'https://pay.pays.test/now',
          texts: {
            fr: { banner_countdown: "L'accès sera suspendu {time} (le {date}).", pay_action: 'Payer la facture' },
          },
        },
      })) as Tenant;
      for (const [id, status] of [
        ['cus_warn', 'warning'],
        ['cus_lock', 'lockout'],
      ]) {
        await admin('PUT', `/tenants/pays-co/subscribers/${id}`, { status });
      }
    });

    /**
     * The service's real answer, with the two keys the contract (docs/reference.md#the-lookup) adds to a known
     * subscriber's body after `entitlements`: `lockout_at` and `pay_url`. It stands for the
     * service's own fields while they are built; everything else (the request, its checks,
     * its headers and status) is the running service's.
     */
    const addFields = (fields: () => { lockout_at?: string; pay_url?: string }) => async (page: Page) => {
      await page.route('**/api/subscriber-status/**', async (route) => {
        if (route.request().method() !== 'GET') return route.continue();
        const response = await route.fetch();
        const real = (await response.json()) as { status: string; entitlements?: object };
        const known = real.entitlements !== undefined && real.status !== 'active';
        const extra = fields();
        await route.fulfill({
          response,
          json: known
            ? {
                ...real,
                ...(real.status === 'warning' && extra.lockout_at ? { lockout_at: extra.lockout_at } : {}),
                ...(extra.pay_url ? { pay_url: extra.pay_url } : {}),
              }
            : real,
        });
      });
    };
    const linksOf = (page: Page, selector: string) =>
      page
        .locator(`dunwall-enforcement ${selector} a`)
        .evaluateAll((as) =>
          as.map((a) => [
            a.textContent,
            a.getAttribute('href'),
            a.getAttribute('target'),
            a.getAttribute('rel'),
            a.className,
          ]),
        );
    const lookups = (page: Page) => {
      const seen: string[] = [];
      page.on('request', (r) => {
        if (r.url().includes('/api/subscriber-status/') && r.method() === 'GET') seen.push(r.url());
      });
      return seen;
    };
    /** Lookups the page has started, counted in the page as they start (before any network). */
    const countLookups = async (page: Page) =>
      page.addInitScript(() => {
        const w = window as unknown as { __lookups: number; fetch: typeof fetch };
        const real = w.fetch.bind(window);
        w.__lookups = 0;
        w.fetch = (input, init) => {
          if (String(input instanceof Request ? input.url : input).includes('/api/subscriber-status/'))
            w.__lookups += 1;
          return real(input, init);
        };
      });
    const started = (page: Page) => page.evaluate(() => (window as unknown as { __lookups: number }).__lookups);
    const both =
      (...steps: ((page: Page) => Promise<unknown>)[]) =>
      async (page: Page) => {
        for (const step of steps) await step(page);
      };

    it('leads the gate with "Pay now" to the invoice page, in a new tab, before the card update and support links', async () => {
      const { page } = await open(
        tag(acme, 'cus_lock', { 'data-support-url': 'https://acme.test/support', 'data-card-update-url': CARD_URL }),
        {
          before: addFields(() => ({ pay_url: PAY_URL })),
        },
      );
      expect(await linksOf(page, '[role="dialog"]')).toEqual([
        ['Pay now', PAY_URL, '_blank', 'noopener', 'go'],
        ['Update card', CARD_URL, null, 'noopener', ''],
        ['Contact support', 'https://acme.test/support', null, 'noopener', ''],
      ]);
      // The first thing the keyboard reaches is the way to pay (the dialog holds the focus on load).
      await page.keyboard.press('Tab');
      expect(
        await page.evaluate(
          () => document.querySelector('dunwall-enforcement')?.shadowRoot?.activeElement?.textContent,
        ),
      ).toBe('Pay now');
      await page.screenshot({ path: join(RESULTS, 'gate-pay-now.png') });
      await page.close();
    });

    it('falls back to the card update page, then to the branding payment link; an unsafe pay_url is never linked', async () => {
      const cases: [string, Tenant, string, Record<string, string>, string | null, string[][]][] = [
        [
          'banner: pay_url, then the card update URL of the answer',
          acme,
          'cus_warn',
          {},
          PAY_URL,
          [
            ['Pay now', PAY_URL],
            ['Update card', CARD_URL],
          ],
        ],
        ['banner: no pay_url', acme, 'cus_warn', {}, null, [['Update card', CARD_URL]]],
        [
          'gate: no pay_url, the page attribute',
          acme,
          'cus_lock',
          { 'data-card-update-url': CARD_URL },
          null,
          [['Update card', CARD_URL]],
        ],
        [
          'gate: no pay_url, no card update URL, the branding link',
          paysCo,
          'cus_lock',
          {},
          null,
          [['Update card', 'https://pay.pays.test/now']],
        ],
        ['gate: pay_url wins over the branding link', paysCo, 'cus_lock', {}, PAY_URL, [['Pay now', PAY_URL]]],
        [
          'gate: http pay_url',
          paysCo,
          'cus_lock',
          {},
          'http://invoice.stripe.com/i/acct_1/test_x',
          [['Update card', 'https://pay.pays.test/now']],
        ],
        [
          'gate: javascript pay_url',
          acme,
          'cus_lock',
          { 'data-card-update-url': CARD_URL },
          'javascript:alert(document.domain)',
          [['Update card', CARD_URL]],
        ],
        [
          'banner: data pay_url',
          acme,
          'cus_warn',
          {},
          'data:text/html,<script>alert(1)</script>',
          [['Update card', CARD_URL]],
        ],
      ];
      for (const [name, t, customer, attrs, payUrl, expected] of cases) {
        const { page } = await open(tag(t, customer, attrs), {
          before: addFields(() => (payUrl ? { pay_url: payUrl } : {})),
        });
        const links = await linksOf(page, customer === 'cus_warn' ? '[role="alert"]' : '[role="dialog"]');
        expect(
          links.map(([text, href]) => [text, href]),
          name,
        ).toEqual(expected);
        expect(
          links.every(([, href]) => typeof href === 'string' && href.startsWith('https:')),
          name,
        ).toBe(true);
        await page.close();
      }
    });

    it('counts down to lockout_at in the words of the reader, moves on with time, and asks again when it comes', async () => {
      for (const [locale, t, words, date] of [
        ['en-US', acme, 'Access will be paused in 3 days.', 'Dec 3, 2026, 12:00 PM'],
        // No French sentence from the tenant: the snippet's English, in English.
        ['fr-FR', acme, 'Access will be paused in 3 days.', 'Dec 3, 2026, 12:00 PM'],
        ['fr-FR', paysCo, "L'accès sera suspendu dans 3 jours (le 3 déc. 2026, 12:00).", '3 déc. 2026, 12:00'],
      ] as const) {
        const localized = await browser.newContext({
          locale,
          timezoneId: 'UTC',
          viewport: { width: 1000, height: 700 },
        });
        try {
          await localized.clock.install({ time: NOW });
          let status = 'warning';
          await admin('PUT', `/tenants/${t.slug}/subscribers/cus_countdown`, { status });
          const { page } = await open(tag(t, 'cus_countdown'), {
            in: localized,
            before: both(
              countLookups,
              addFields(() => ({ lockout_at: LOCKOUT_AT, pay_url: PAY_URL })),
            ),
          });
          const time = page.locator('dunwall-enforcement [role="alert"] p time');
          const label = `${locale} ${t.slug}`;
          expect((await time.textContent())?.replace(/\s/g, ' '), label).toBe(words);
          expect((await time.getAttribute('title'))?.replace(/\s/g, ' '), label).toBe(date);
          expect(await time.getAttribute('datetime')).toBe('2026-12-03T12:00:00.000Z');
          // Text, never markup: the host page's sentence stays one text node.
          expect(
            await time.evaluate((n) => n.childNodes.length === 1 && n.firstChild?.nodeType === Node.TEXT_NODE),
          ).toBe(true);
          if (t === paysCo) {
            expect(await linksOf(page, '[role="alert"]').then((l) => l[0]?.[0])).toBe('Payer la facture');
            await page.screenshot({ path: join(RESULTS, 'banner-countdown-fr-FR.png') });
          } else if (locale === 'en-US') {
            await page.screenshot({ path: join(RESULTS, 'banner-countdown.png') });
            // Days from two days on, then hours from two hours on, then minutes.
            await localized.clock.fastForward(23 * HOUR_MS);
            expect(await time.textContent()).toBe('Access will be paused in 2 days.');
            await localized.clock.fastForward(24 * HOUR_MS);
            expect(await time.textContent()).toBe('Access will be paused in 25 hours.');
            await localized.clock.fastForward(24 * HOUR_MS + 59 * 60_000);
            expect(await time.textContent()).toBe('Access will be paused in 1 minute.');
            // lockout_at comes: the service is asked again, and now answers lockout.
            expect(await started(page)).toBe(1);
            status = 'lockout';
            await admin('PUT', `/tenants/${t.slug}/subscribers/cus_countdown`, { status });
            await localized.clock.fastForward(61_000);
            await expect.poll(() => page.locator('dunwall-enforcement [role="dialog"]').isVisible()).toBe(true);
            expect(await started(page)).toBe(2);
          }
          await page.close();
        } finally {
          await localized.close();
        }
      }
    });

    it('lets the customer in on return from paying in another tab: focus or visibility asks again, once', async () => {
      const clocked = await browser.newContext({ viewport: { width: 1000, height: 700 } });
      try {
        await clocked.clock.install({ time: NOW });
        await admin('PUT', '/tenants/acme/subscribers/cus_returning', { status: 'lockout' });
        const { page } = await open(tag(acme, 'cus_returning'), {
          in: clocked,
          before: both(
            countLookups,
            addFields(() => ({ pay_url: PAY_URL })),
          ),
        });
        const asked = async () => (await started(page)) - 1;
        const dialog = page.locator('dunwall-enforcement [role="dialog"]');
        expect(await dialog.isVisible()).toBe(true);
        const inert = () => page.evaluate(() => (document.getElementById('own') as HTMLButtonElement).inert);
        expect(await inert()).toBe(true);
        const back = () =>
          page.evaluate(() => {
            window.dispatchEvent(new Event('focus'));
            document.dispatchEvent(new Event('visibilitychange'));
          });

        // Back too early, not paid yet: one question for both events, the gate stays as it was.
        await clocked.clock.fastForward(1_500);
        const before = await dialog.elementHandle();
        await back();
        expect(await asked()).toBe(1);
        await back();
        expect(await asked()).toBe(1);
        // Its answer is in (the snippet's event for it) before the payment lands.
        await page.waitForFunction(
          () => (window as unknown as { __events: unknown[] }).__events.length >= 2,
          undefined,
          { timeout: 10_000 },
        );
        expect(await dialog.evaluate((d, old) => d === old, before)).toBe(true);

        // invoice.paid arrives a moment later: the return is followed, without another event.
        await admin('PUT', '/tenants/acme/subscribers/cus_returning', { status: 'active', reason: 'paid' });
        await clocked.clock.fastForward(2_000);
        await expect.poll(() => page.locator('dunwall-enforcement').count()).toBe(0);
        expect(await asked()).toBe(2);
        expect(await inert()).toBe(false);
        expect(await overflow(page)).not.toBe('hidden');
        await page.keyboard.press('Tab');
        expect(await page.evaluate(() => document.activeElement?.id)).toBe('own');

        // Nothing shown: no more questions on focus.
        await clocked.clock.fastForward(5_000);
        await back();
        expect(await asked()).toBe(2);
        await page.close();

        // A banner goes the same way on visibilitychange alone; an error on return fails open.
        await admin('PUT', '/tenants/acme/subscribers/cus_returning', { status: 'warning' });
        const { page: bannered } = await open(tag(acme, 'cus_returning'), {
          in: clocked,
          before: addFields(() => ({ pay_url: PAY_URL })),
        });
        expect(await bannered.locator('dunwall-enforcement [role="alert"]').isVisible()).toBe(true);
        await bannered.route('**/api/subscriber-status/**', (route) =>
          route.fulfill({
            status: 503,
            contentType: 'application/problem+json',
            headers: { 'access-control-allow-origin': '*' },
            body: '{}',
          }),
        );
        await clocked.clock.fastForward(1_500);
        await bannered.evaluate(() => document.dispatchEvent(new Event('visibilitychange')));
        await expect.poll(() => bannered.locator('dunwall-enforcement').count()).toBe(0);
        await bannered.close();
      } finally {
        await clocked.close();
      }
    });

    it('shows a worse answer from a fresh lookup on return: a warning that became a lockout', async () => {
      const clocked = await browser.newContext({ viewport: { width: 1000, height: 700 } });
      try {
        await clocked.clock.install({ time: NOW });
        await admin('PUT', '/tenants/acme/subscribers/cus_worse', { status: 'warning' });
        const { page } = await open(tag(acme, 'cus_worse'), { in: clocked });
        expect(await page.locator('dunwall-enforcement [role="alert"]').isVisible()).toBe(true);
        await admin('PUT', '/tenants/acme/subscribers/cus_worse', { status: 'lockout' });
        await clocked.clock.fastForward(1_500);
        await page.evaluate(() => window.dispatchEvent(new Event('focus')));
        await expect.poll(() => page.locator('dunwall-enforcement [role="dialog"]').isVisible()).toBe(true);
        expect(await page.locator('dunwall-enforcement').count()).toBe(1);
        await page.close();
      } finally {
        await clocked.close();
      }
    });

    it('sends data-preview="warning" or "lockout" as the preview parameter, and nothing else', async () => {
      for (const [value, sent] of [
        ['warning', 'warning'],
        ['lockout', 'lockout'],
        ['active', null],
        ['lockout&hmac=x', null],
      ] as const) {
        const page = await context.newPage();
        const asked = lookups(page);
        await page.goto(
          `${pageOrigin}/app?${new URLSearchParams({ tag: tag(acme, 'cus_ok', { 'data-preview': value }) })}`,
        );
        await page.waitForFunction(() => (window as unknown as { __events: unknown[] }).__events.length > 0);
        expect(
          asked.map((u) => new URL(u).searchParams.getAll('preview')),
          value,
        ).toEqual([sent === null ? [] : [sent]]);
        await page.close();
      }
    });
  });

  it('serves the demo page with the three states and each placement of the banner', { timeout: 120_000 }, async () => {
    // The demo's own app, on an in-memory store seeded as a first run seeds it: a second
    // on-disk PGlite folder would cost an initdb on a box that is busy with other suites.
    const store = await openStore({ engine: 'embedded', dataDir: null });
    const seeded = await seedDemo(store, new Date());
    const demoApp = await buildAppWithModel({ store, adminToken: null, demo: seeded, snippet: loadSnippet() });
    const demoUrl = await demoApp.listen({ port: 0, host: '127.0.0.1' });
    try {
      const page = await context.newPage();
      await page.goto(`${demoUrl}/demo`);
      const frames = ['cus_demo_active', 'cus_demo_warning', 'cus_demo_lockout'].map((c) =>
        page.frameLocator(`iframe[title="${c}"]`),
      );
      await expect
        .poll(() => frames[1]?.locator('dunwall-enforcement [role="alert"]').isVisible(), { timeout: 15_000 })
        .toBe(true);
      await expect
        .poll(() => frames[2]?.locator('dunwall-enforcement [role="dialog"]').isVisible(), { timeout: 15_000 })
        .toBe(true);
      expect(await frames[0]?.locator('dunwall-enforcement').count()).toBe(0);
      // Each placement of the banner, in a frame of its own.
      for (const placement of ['push', 'overlay', 'bottom', 'mount']) {
        const f = page.frameLocator(`iframe[title="banner ${placement}"]`);
        await expect.poll(() => f.locator('dunwall-enforcement [role="alert"]').count(), { timeout: 15_000 }).toBe(1);
      }
      expect(
        await page.frameLocator('iframe[title="banner mount"]').locator('#billing-notice dunwall-enforcement').count(),
      ).toBe(1);
      await page.setViewportSize({ width: 1000, height: 1400 });
      await page.screenshot({ path: join(RESULTS, 'demo.png'), fullPage: true });
      await page.close();
    } finally {
      await demoApp.close();
      await store.close();
    }
  });
});
