/**
 * The snippet in Chromium, on pages shaped as tenants' apps are: a fixed or sticky header
 * with the padding on <main>, a phone's screen, a gate over the app's figures, a page that
 * hides itself until the answer, a misconfigured tag. The same service and browser as
 * browser.test.ts (test/helpers/snippet-browser.ts); each page is served as written here.
 */
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { haveBrowser, launchChromium, snippetTag, startService } from '../helpers/snippet-browser.js';
import type { Service, Tenant } from '../helpers/snippet-browser.js';

const RESULTS = join(process.cwd(), 'test-results');
const CARD_URL = 'https://billing.acme.test/card';
const SUPPORT_URL = 'https://acme.test/support';
const PAY_URL = 'https://invoice.stripe.com/i/acct_1Test/test_YWNjdF8xVGVzdCxfUGF5TWU';
type Box = {
  x: number;
  y: number;
  width: number;
  height: number;
  top: number;
  bottom: number;
  left: number;
  right: number;
};

describe.skipIf(!haveBrowser)('the snippet on real pages: findings', () => {
  let service: Service;
  let pageServer: Server;
  let pageOrigin = '';
  let browser: Browser;
  let acme: Tenant;
  /** Pages by path, as the tests write them. */
  const pages = new Map<string, { html: string; headers: Record<string, string> }>();
  let served = 0;

  beforeAll(async () => {
    service = await startService();
    acme = (await service.admin('POST', '/tenants', { slug: 'acme', card_update_url: CARD_URL })) as Tenant;
    for (const [id, status] of [
      ['cus_warn', 'warning'],
      ['cus_lock', 'lockout'],
      ['cus_ok', 'active'],
    ]) {
      await service.admin('PUT', `/tenants/acme/subscribers/${id}`, { status });
    }
    pageServer = createServer((req, res) => {
      const found = pages.get(new URL(req.url ?? '/', 'http://page.test').pathname);
      if (found === undefined) res.writeHead(404).end();
      else res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', ...found.headers }).end(found.html);
    });
    await new Promise<void>((resolve) => pageServer.listen(0, '127.0.0.1', resolve));
    pageOrigin = `http://localhost:${(pageServer.address() as AddressInfo).port}`;
    browser = await launchChromium();
    mkdirSync(RESULTS, { recursive: true });
  });

  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => pageServer?.close(resolve));
    await service?.close();
  });

  const tag = (t: Tenant, customer: string, extra: Record<string, string> = {}, sync = false) =>
    snippetTag(`${service.running.url}/snippet.js`, t, customer, extra, sync);

  /** A page of the tenant's app: `head` and `body` as given, the events of the snippet recorded. */
  function serve(body: string, head = '', headers: Record<string, string> = {}): string {
    const path = `/p/${(served += 1)}`;
    pages.set(path, {
      html: `<!doctype html><html><head><meta name="viewport" content="width=device-width, initial-scale=1">
<script>window.__events = []; document.addEventListener('dunwall:status', (e) => window.__events.push(e.detail));</script>${head}</head>
<body>${body}</body></html>`,
      headers,
    });
    return `${pageOrigin}${path}`;
  }

  const answered = (page: Page) =>
    page.waitForFunction(() => (window as unknown as { __events: unknown[] }).__events.length > 0, undefined, {
      timeout: 10_000,
    });

  async function open(ctx: BrowserContext, url: string, before?: (page: Page) => Promise<void>): Promise<Page> {
    const page = await ctx.newPage();
    await before?.(page);
    await page.goto(url);
    await answered(page);
    return page;
  }

  /**
   * The lookup's real answer with the contract's two optional fields of a known subscriber's
   * body: `pay_url` (for a signed lookup) and, for a warning, `lockout_at`.
   */
  const withFields =
    (fields: { pay_url?: string; lockout_at?: () => string } = {}) =>
    async (page: Page) => {
      await page.route('**/api/subscriber-status/**', async (route) => {
        if (route.request().method() !== 'GET') return route.continue();
        const response = await route.fetch();
        const real = (await response.json()) as { status: string };
        if (real.status === 'active') return route.fulfill({ response, json: real });
        const lockoutAt = real.status === 'warning' && fields.lockout_at ? { lockout_at: fields.lockout_at() } : {};
        await route.fulfill({ response, json: { ...real, ...lockoutAt, pay_url: fields.pay_url ?? PAY_URL } });
      });
    };
  const withPayUrl = withFields();

  const VIEWPORTS = [
    { width: 1280, height: 800 },
    { width: 375, height: 667 },
  ];
  const FILLER = '<div style="height:3000px">The rest of the app.</div>';

  describe('1. the pushed banner keeps clear of what the page fixes at the top', () => {
    const HEADER = 'id="hdr" style="top:0;left:0;right:0;height:64px;background:#223;color:#fff;z-index:1000;margin:0"';
    const LAYOUTS: [string, string][] = [
      [
        'a fixed header, the padding on <main>',
        `<header ${HEADER.replace('style="', 'style="position:fixed;')}>Nav</header><main style="padding-top:64px"><p id="first">First words of the app</p>${FILLER}</main>`,
      ],
      [
        'a fixed header, the padding on <body>',
        `<header ${HEADER.replace('style="', 'style="position:fixed;')}>Nav</header><main><p id="first">First words of the app</p>${FILLER}</main>`,
      ],
      [
        'a sticky header',
        `<div id="layout"><header ${HEADER.replace('style="', 'style="position:sticky;')}>Nav</header><main><p id="first">First words of the app</p>${FILLER}</main></div>`,
      ],
    ];
    const boxes = (page: Page) =>
      page.evaluate(() => {
        const r = (e: Element | null | undefined) => (e ? (e.getBoundingClientRect().toJSON() as Box) : null);
        return {
          header: r(document.getElementById('hdr')),
          bar: r(document.querySelector('dunwall-enforcement')?.shadowRoot?.querySelector('.bar')),
          first: r(document.getElementById('first')),
        };
      });

    for (const viewport of VIEWPORTS) {
      it(`at ${viewport.width}x${viewport.height}: below a fixed header (padding on main or body) or after a sticky one, covering none of the app`, async () => {
        const ctx = await browser.newContext({ viewport });
        try {
          for (const [name, body] of LAYOUTS) {
            const bodyStyle = name.includes('<body>') ? 'margin:0;padding-top:64px' : 'margin:0';
            const url = serve(`${body}${tag(acme, 'cus_warn')}`, `<style>body{${bodyStyle}}</style>`);
            const page = await open(ctx, url);
            const before = await boxes(page);
            const label = `${name} ${viewport.width}x${viewport.height}`;
            const { header, bar, first } = before;
            if (!header || !bar || !first) throw new Error(`${label}: missing ${JSON.stringify(before)}`);
            expect(bar.top, `${label}: the banner starts below the header`).toBeGreaterThanOrEqual(header.bottom - 0.5);
            expect(first.top, `${label}: the app's first words are below the banner`).toBeGreaterThanOrEqual(
              bar.bottom - 0.5,
            );
            expect(first.top, `${label}: the app's first words are below the header`).toBeGreaterThanOrEqual(
              header.bottom - 0.5,
            );
            await page.screenshot({
              path: join(RESULTS, `banner-under-header-${name.replace(/\W+/g, '-')}-${viewport.width}.png`),
            });
            if (name.startsWith('a fixed')) {
              // It follows the header's size, and the page's flow follows the banner's.
              await page.evaluate(() => ((document.getElementById('hdr') as HTMLElement).style.height = '96px'));
              await expect.poll(async () => Math.round((await boxes(page)).bar?.top ?? -1)).toBe(96);
              await page.evaluate(() => ((document.getElementById('hdr') as HTMLElement).style.height = '64px'));
              await expect.poll(async () => Math.round((await boxes(page)).bar?.top ?? -1)).toBe(64);
              // Scrolled, the banner stays below the header.
              await page.mouse.wheel(0, 400);
              await expect.poll(() => page.evaluate(() => window.scrollY)).toBeGreaterThan(0);
              expect(Math.round((await boxes(page)).bar?.top ?? -1)).toBe(64);
              await page.evaluate(() => window.scrollTo(0, 0));
            }
            // Cleared, the page is as it was without the snippet.
            await page.evaluate(() => (window as unknown as { Dunwall: { clear(): void } }).Dunwall.clear());
            const after = await boxes(page);
            expect(after.bar).toBeNull();
            expect(after.first?.top, label).toBeCloseTo(first.top - bar.height, 0);
            await page.close();
          }
        } finally {
          await ctx.close();
        }
      });
    }

    it('still goes first in the flow with nothing fixed at the top but a small button', async () => {
      const ctx = await browser.newContext({ viewport: VIEWPORTS[0] });
      try {
        const help =
          '<a id="help" href="#help" style="position:fixed;top:0;right:0;width:40px;height:40px;z-index:5">?</a>';
        const page = await open(
          ctx,
          serve(
            `${help}<main><p id="first">First words</p>${FILLER}</main>${tag(acme, 'cus_warn')}`,
            '<style>body{margin:0}</style>',
          ),
        );
        const { bar, first } = await boxes(page);
        expect(bar?.top).toBe(0);
        expect(first?.top).toBeGreaterThanOrEqual(bar?.bottom ?? Infinity);
        expect(await page.evaluate(() => document.body.firstElementChild?.localName)).toBe('dunwall-enforcement');
        await page.close();
      } finally {
        await ctx.close();
      }
    });
  });

  describe('2-4. the gate', () => {
    const FIGURES =
      '<h1 id="figures" style="margin:0;padding:8px;font:bold 48px sans-serif;color:#000;background:#fff">Revenue $1,234,567</h1>';
    const gateTag = () => tag(acme, 'cus_lock', { 'data-support-url': SUPPORT_URL, 'data-card-update-url': CARD_URL });

    /** The standard deviation of the luminance of a PNG's pixels (0-255), decoded by a canvas. */
    async function spread(ctx: BrowserContext, png: Buffer): Promise<number> {
      const blank = await ctx.newPage();
      try {
        return await blank.evaluate(async (b64) => {
          const img = new Image();
          img.src = `data:image/png;base64,${b64}`;
          await img.decode();
          const canvas = document.createElement('canvas');
          [canvas.width, canvas.height] = [img.width, img.height];
          const c2d = canvas.getContext('2d') as CanvasRenderingContext2D;
          c2d.drawImage(img, 0, 0);
          const { data } = c2d.getImageData(0, 0, img.width, img.height);
          const values: number[] = [];
          for (let i = 0; i < data.length; i += 4)
            values.push(0.2126 * (data[i] ?? 0) + 0.7152 * (data[i + 1] ?? 0) + 0.0722 * (data[i + 2] ?? 0));
          const mean = values.reduce((a, b) => a + b, 0) / values.length;
          return Math.sqrt(values.reduce((a, b) => a + (b - mean) ** 2, 0) / values.length);
        }, png.toString('base64'));
      } finally {
        await blank.close();
      }
    }

    it("2. hides the app's figures behind the veil: their pixels are one flat colour", async () => {
      const ctx = await browser.newContext({ viewport: { width: 1000, height: 700 }, reducedMotion: 'reduce' });
      try {
        const figuresOf = async (page: Page) => {
          const clip = await page.locator('#figures').boundingBox();
          if (!clip) throw new Error('no figures');
          return { clip, png: await page.screenshot({ clip }) };
        };
        // Without a gate the figures are there to read: the measure sees text.
        const open_ = await open(ctx, serve(`${FIGURES}${tag(acme, 'cus_ok')}`));
        const plain = await spread(ctx, (await figuresOf(open_)).png);
        expect(plain).toBeGreaterThan(40);
        await open_.close();
        for (const scheme of ['light', 'dark'] as const) {
          await ctx.newPage().then(async (p) => {
            await p.emulateMedia({ colorScheme: scheme });
            await p.goto(serve(`${FIGURES}${gateTag()}`));
            await answered(p);
            await p.locator('dunwall-enforcement .veil').waitFor();
            const { clip, png } = await figuresOf(p);
            // The figures are outside the dialog's box: what is measured is the veil alone.
            const box = await p.evaluate(
              () =>
                document
                  .querySelector('dunwall-enforcement')
                  ?.shadowRoot?.querySelector('.box')
                  ?.getBoundingClientRect()
                  .toJSON() as Box,
            );
            expect(clip.y + clip.height, scheme).toBeLessThanOrEqual(box.top);
            const veiled = await spread(ctx, png);
            expect(veiled, `${scheme}: the figures still show through the veil`).toBeLessThan(2);
            await p.screenshot({ path: join(RESULTS, `gate-veil-${scheme}.png`) });
            await p.close();
          });
        }
      } finally {
        await ctx.close();
      }
    });

    it('3. shows a focus ring only for the keyboard: the dialog takes the focus on load, Tab reaches the first link with its ring', async () => {
      const ctx = await browser.newContext({ viewport: { width: 1000, height: 700 } });
      try {
        const page = await open(ctx, serve(`${FIGURES}${gateTag()}`, ''), withPayUrl);
        await page.locator('dunwall-enforcement .veil').waitFor();
        const ringed = () =>
          page.evaluate(() => {
            const root = document.querySelector('dunwall-enforcement')?.shadowRoot;
            return Array.from(root?.querySelectorAll('*') ?? [])
              .filter((e) => {
                const s = getComputedStyle(e);
                return e.matches(':focus-visible') && s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0;
              })
              .map((e) => e.textContent);
          });
        const active = () =>
          page.evaluate(
            () =>
              document.querySelector('dunwall-enforcement')?.shadowRoot?.activeElement?.getAttribute('role') ??
              document.querySelector('dunwall-enforcement')?.shadowRoot?.activeElement?.textContent,
          );
        expect(await active()).toBe('dialog');
        expect(await ringed()).toEqual([]);
        await page.screenshot({ path: join(RESULTS, 'gate-focus-on-load.png') });
        await page.keyboard.press('Tab');
        expect(await active()).toBe('Pay now');
        expect(await ringed()).toEqual(['Pay now']);
        await page.keyboard.press('Tab');
        expect(await ringed()).toEqual(['Update card']);
        await page.keyboard.press('Shift+Tab');
        await page.keyboard.press('Shift+Tab');
        expect(await ringed()).toEqual(['Contact support']);
        await page.close();
        // Shift+Tab first goes to the last link.
        const again = await open(ctx, serve(gateTag()), withPayUrl);
        await again.locator('dunwall-enforcement .veil').waitFor();
        await again.keyboard.press('Shift+Tab');
        expect(
          await again.evaluate(
            () => document.querySelector('dunwall-enforcement')?.shadowRoot?.activeElement?.textContent,
          ),
        ).toBe('Contact support');
        await again.close();
      } finally {
        await ctx.close();
      }
    });

    for (const viewport of [
      { width: 320, height: 568 },
      { width: 375, height: 667 },
    ]) {
      it(`4. at ${viewport.width}x${viewport.height}: each link of the gate holds on one line, the row wrapping between links`, async () => {
        const ctx = await browser.newContext({ viewport });
        try {
          const page = await open(ctx, serve(gateTag()), withPayUrl);
          await page.locator('dunwall-enforcement .veil').waitFor();
          const links = await page.locator('dunwall-enforcement [role="dialog"] a').evaluateAll((as) =>
            as.map((a) => {
              const s = getComputedStyle(a);
              const oneLine =
                parseFloat(s.lineHeight) +
                parseFloat(s.paddingTop) +
                parseFloat(s.paddingBottom) +
                parseFloat(s.borderTopWidth) +
                parseFloat(s.borderBottomWidth);
              return {
                text: a.textContent,
                height: a.getBoundingClientRect().height,
                oneLine,
                rects: a.getClientRects().length,
                right: a.getBoundingClientRect().right,
              };
            }),
          );
          expect(links.map((l) => l.text)).toEqual(['Pay now', 'Update card', 'Contact support']);
          for (const l of links) {
            expect(l.rects, `${l.text} is broken in two`).toBe(1);
            expect(l.height, `${l.text} takes more than one line`).toBeLessThanOrEqual(l.oneLine + 0.5);
            expect(l.right).toBeLessThanOrEqual(viewport.width);
          }
          await page.screenshot({ path: join(RESULTS, `gate-links-${viewport.width}.png`) });
          await page.close();
          // A link wider than the row itself (a tenant's long text) wraps inside the dialog, never out of it.
          const long = await open(
            ctx,
            serve(
              tag(acme, 'cus_lock', {
                'data-support-url': SUPPORT_URL,
                'data-support-text': 'Write to the billing team of this service about your account',
              }),
            ),
          );
          const fit = await long.locator('dunwall-enforcement [role="dialog"]').evaluate((box) => ({
            box: box.getBoundingClientRect().right,
            link: Math.max(...Array.from(box.querySelectorAll('a'), (a) => a.getBoundingClientRect().right)),
          }));
          expect(fit.link).toBeLessThanOrEqual(fit.box);
          await long.close();
        } finally {
          await ctx.close();
        }
      });
    }
  });

  describe('5. the banner on a phone', () => {
    for (const viewport of [
      { width: 375, height: 667 },
      { width: 320, height: 568 },
    ]) {
      it(`at ${viewport.width}x${viewport.height}: under 15 % of the screen with a countdown and a pay link, nothing cut off`, async () => {
        const ctx = await browser.newContext({ viewport });
        try {
          const inThreeDays = () =>
            new Date(Date.now() + 3 * 86_400_000 + 3_600_000).toISOString().replace(/\.\d+Z$/, 'Z');
          const page = await open(
            ctx,
            serve(
              `<main><p id="first">First words</p></main>${tag(acme, 'cus_warn')}`,
              '<style>body{margin:0}</style>',
            ),
            withFields({ lockout_at: inThreeDays }),
          );
          const bar = page.locator('dunwall-enforcement [role="alert"]');
          expect(await bar.textContent()).toContain('Access will be paused in 3 days.');
          const fit = await bar.evaluate((b) => {
            const r = b.getBoundingClientRect();
            const inside = Array.from(b.querySelectorAll('p, time, a, small, button'), (e) => {
              const c = e.getBoundingClientRect();
              return (
                c.top >= r.top - 0.5 &&
                c.bottom <= r.bottom + 0.5 &&
                c.left >= r.left - 0.5 &&
                c.right <= r.right + 0.5 &&
                e.scrollWidth <= e.clientWidth + 1
              );
            });
            const links = Array.from(b.querySelectorAll('a'), (a) => a.textContent);
            return {
              height: r.height,
              overflow: b.scrollWidth - b.clientWidth,
              inside,
              links,
              mark: b.textContent?.includes('Powered by Dunwall'),
            };
          });
          expect(fit.links).toEqual(['Pay now', 'Update card']);
          expect(fit.mark).toBe(true);
          expect(fit.height, 'the banner takes 15 % of the screen or more').toBeLessThan(0.15 * viewport.height);
          expect(fit.overflow).toBeLessThanOrEqual(0);
          expect(fit.inside.every(Boolean), 'something sticks out of the banner').toBe(true);
          // The close button is still a thumb's size.
          const close = await bar.locator('button').boundingBox();
          expect(Math.min(close?.width ?? 0, close?.height ?? 0)).toBeGreaterThanOrEqual(44);
          await page.screenshot({ path: join(RESULTS, `banner-compact-${viewport.width}x${viewport.height}.png`) });
          await page.close();
        } finally {
          await ctx.close();
        }
      });
    }
  });

  describe('6. data-hide-page: no flash of the app before the gate', () => {
    const APP = '<main><h1 id="figures">Revenue $1,234,567</h1></main>';
    /** The page's clock stands still: only runFor moves it (a loaded box never lets a bound pass by itself). */
    const stopTime = async (page: Page) => {
      const t = Date.parse('2026-11-30T12:00:00Z');
      await page.clock.install({ time: t });
      await page.clock.pauseAt(t + 1_000);
    };
    const hidden = (page: Page) =>
      page.evaluate(() => getComputedStyle(document.documentElement).visibility === 'hidden');
    /** Holds every lookup until `release` (or forever); `asked` resolves once one has been made. */
    function holdLookups(page: Page) {
      let release: () => void = () => {};
      const held = new Promise<void>((resolve) => (release = resolve));
      let asked: () => void = () => {};
      const seen = new Promise<void>((resolve) => (asked = resolve));
      const ready = page.route('**/api/subscriber-status/**', async (route) => {
        if (route.request().method() !== 'GET') return route.continue();
        asked();
        await held;
        await route.continue().catch(() => undefined);
      });
      return { ready, seen, release: () => release() };
    }

    it('hides the page until the gate is shown, under a strict Content-Security-Policy', async () => {
      const ctx = await browser.newContext({ viewport: { width: 1000, height: 700 } });
      try {
        const page = await ctx.newPage();
        await stopTime(page);
        const lookups = holdLookups(page);
        await lookups.ready;
        const csp = {
          'content-security-policy': `default-src 'self'; script-src 'self' ${service.running.url} 'unsafe-inline'; style-src 'self'; connect-src ${service.running.url}`,
        };
        await page.goto(serve(APP, tag(acme, 'cus_lock', { 'data-hide-page': '' }, true), csp));
        await lookups.seen;
        expect(await hidden(page), 'the page shows before the answer').toBe(true);
        lookups.release();
        await answered(page);
        expect(await page.locator('dunwall-enforcement [role="dialog"]').isVisible()).toBe(true);
        expect(await hidden(page)).toBe(false);
        // The gate is there at once, not faded in over the app (as it is on a page never hidden).
        const fade = (p: Page) =>
          p.locator('dunwall-enforcement .veil').evaluate((v) => getComputedStyle(v).animationName);
        expect(await fade(page)).toBe('none');
        await page.close();
        const unhidden = await open(ctx, serve(APP, tag(acme, 'cus_lock')));
        expect(await fade(unhidden)).toBe('dw-in');
        await unhidden.close();
        // An answer with nothing to show (a paying customer) shows the page at once, as an error does.
        for (const [customer, attrs] of [
          ['cus_ok', {}],
          ['cus_lock', { 'data-key': 'pk_wrongwrongwrongwrongwrong1' }],
        ] as const) {
          const other = await ctx.newPage();
          await stopTime(other);
          await other.goto(serve(APP, tag(acme, customer, { 'data-hide-page': '', ...attrs }, true)));
          await answered(other);
          expect(await hidden(other), customer).toBe(false);
          expect(await other.locator('dunwall-enforcement').count()).toBe(0);
          await other.close();
        }
      } finally {
        await ctx.close();
      }
    });

    it("finds the page's header for a banner although the page was hidden until then", async () => {
      const ctx = await browser.newContext({ viewport: { width: 375, height: 667 } });
      try {
        const page = await ctx.newPage();
        await stopTime(page);
        const header =
          '<header id="hdr" style="position:fixed;top:0;left:0;right:0;height:64px;background:#223">Nav</header>';
        await page.goto(
          serve(
            `${header}<main style="padding-top:64px"><p>First words</p></main>`,
            `<style>body{margin:0}</style>${tag(acme, 'cus_warn', { 'data-hide-page': '' }, true)}`,
          ),
        );
        await answered(page);
        expect(await hidden(page)).toBe(false);
        const top = await page.evaluate(
          () =>
            document.querySelector('dunwall-enforcement')?.shadowRoot?.querySelector('.bar')?.getBoundingClientRect()
              .top,
        );
        expect(top).toBe(64);
        await page.close();
      } finally {
        await ctx.close();
      }
    });

    for (const [name, attrs, boundMs] of [
      ['the default bound, 1.5 s', {}, 1_500],
      ['data-hide-page-ms="300"', { 'data-hide-page-ms': '300' }, 300],
      ['a bound over 5 s, clamped to 5 s', { 'data-hide-page-ms': '60000' }, 5_000],
    ] as const) {
      it(`shows the page when the lookup never answers: ${name}`, async () => {
        const ctx = await browser.newContext({ viewport: { width: 1000, height: 700 } });
        try {
          const page = await ctx.newPage();
          await stopTime(page);
          const lookups = holdLookups(page);
          await lookups.ready;
          await page.goto(
            serve(APP, tag(acme, 'cus_lock', { 'data-hide-page': '', 'data-timeout-ms': '10000', ...attrs }, true)),
          );
          await lookups.seen;
          expect(await hidden(page)).toBe(true);
          await page.clock.runFor(boundMs - 50);
          expect(await hidden(page), 'shown before the bound').toBe(true);
          await page.clock.runFor(100);
          expect(await hidden(page), 'still hidden after the bound').toBe(false);
          expect(await page.locator('dunwall-enforcement').count()).toBe(0);
          lookups.release();
          await page.close();
        } finally {
          await ctx.close();
        }
      });
    }
  });

  describe('7. a misconfigured tag shows nothing, and says why once', () => {
    let strict: Tenant;
    let guarded: Tenant;
    beforeAll(async () => {
      strict = (await service.admin('POST', '/tenants', { slug: 'strict-co', hmac_required: true })) as Tenant;
      guarded = (await service.admin('POST', '/tenants', {
        slug: 'guarded-co',
        allowed_origins: ['https://app.guarded.test'],
      })) as Tenant;
      for (const slug of ['strict-co', 'guarded-co'])
        await service.admin('PUT', `/tenants/${slug}/subscribers/cus_lock`, { status: 'lockout' });
    });

    /** The snippet's warnings in the console, as they come. */
    const warnings = (page: Page) => {
      const seen: string[] = [];
      page.on('console', (m) => {
        if (m.type() === 'warning' && m.text().startsWith('[dunwall]')) seen.push(m.text());
      });
      return seen;
    };
    const checkAgain = (page: Page, o: Record<string, string | null>) =>
      page.evaluate(async (opts) => {
        const w = window as unknown as { Dunwall: { check(o: unknown): Promise<{ status: string; source: string }> } };
        return w.Dunwall.check(opts);
      }, o);

    const CASES: [string, () => { t: Tenant; attrs: Record<string, string> }, string, RegExp][] = [
      [
        'a wrong key',
        () => ({ t: acme, attrs: { 'data-key': 'pk_wrongwrongwrongwrongwrong1' } }),
        'invalid_publishable_key',
        /not a publishable key of tenant "acme"/,
      ],
      ['a wrong slug', () => ({ t: acme, attrs: { 'data-tenant': 'acme-typo' } }), 'tenant_not_found', /acme-typo/],
      [
        'a wrong hmac',
        () => ({ t: acme, attrs: { 'data-hmac': 'f'.repeat(64) } }),
        'hmac_mismatch',
        /hmac does not match/,
      ],
      [
        'a missing hmac the tenant requires',
        () => ({ t: strict, attrs: { 'data-hmac': '' } }),
        'hmac_required',
        /tenant "strict-co" requires data-hmac/,
      ],
      [
        "an origin not in the tenant's allowed_origins",
        () => ({ t: guarded, attrs: {} }),
        'origin_not_allowed',
        /allowed_origins/,
      ],
      [
        'a service that cannot be reached',
        () => ({ t: acme, attrs: { 'data-base-url': 'http://127.0.0.1:9' } }),
        'network',
        /could not be reached/,
      ],
    ];
    for (const [name, make, code, sentence] of CASES) {
      it(`${name}: one console warning with ${code}, data-debug on the tag, nothing shown`, async () => {
        const ctx = await browser.newContext({ viewport: { width: 1000, height: 700 } });
        try {
          const { t, attrs } = make();
          const page = await ctx.newPage();
          const said = warnings(page);
          await page.goto(serve(`<main>App</main>${tag(t, 'cus_lock', attrs)}`));
          await answered(page);
          expect(
            await page.evaluate(() => (window as unknown as { __events: { source: string }[] }).__events[0]?.source),
          ).toBe('fallback');
          // Said once the reason is known (after the answer, which it does not hold up).
          const debugOf = () => page.locator('script[data-tenant]').getAttribute('data-debug');
          await expect.poll(debugOf).not.toBeNull();
          expect(said, name).toHaveLength(1);
          expect(said[0]).toMatch(new RegExp(`^\\[dunwall\\] ${code}: `));
          expect(said[0]).toMatch(sentence);
          expect(said[0]).toMatch(/nothing is shown$/);
          const debug = await page.locator('script[data-tenant]').getAttribute('data-debug');
          expect(debug).toBe(said[0]?.replace('[dunwall] ', ''));
          expect(await page.locator('dunwall-enforcement').count()).toBe(0);
          // No secret, key or customer id in what is said.
          const key = attrs['data-key'] ?? t.publishable_key;
          for (const secret of [key, t.hmac_secret, 'cus_lock', 'f'.repeat(64)]) expect(said[0]).not.toContain(secret);

          // The same problem again, from Dunwall.check (no tag): not said again; noted on <html>.
          const opts = {
            tenant: attrs['data-tenant'] ?? t.slug,
            key,
            customer: 'cus_lock',
            hmac: await page.locator('script[data-tenant]').getAttribute('data-hmac'),
            baseUrl: attrs['data-base-url'] ?? service.running.url,
          };
          expect(await checkAgain(page, opts)).toMatchObject({ status: 'active', source: 'fallback' });
          await expect.poll(() => page.evaluate(() => document.documentElement.dataset.dunwallDebug)).toBe(debug);
          expect(said).toHaveLength(1);
          await page.close();
        } finally {
          await ctx.close();
        }
      });
    }

    it('still gates from a tag a framework marked with its own properties (circular ones included)', async () => {
      const ctx = await browser.newContext({ viewport: { width: 1000, height: 700 } });
      try {
        const mark = `<script>const s = document.querySelector('script[data-tenant]'); const fiber = { node: s }; s.__reactFiber$x = fiber;</script>`;
        const page = await open(ctx, serve(`<main>App</main>${tag(acme, 'cus_lock')}${mark}`));
        expect(
          await page.evaluate(
            () =>
              (document.querySelector('script[data-tenant]') as unknown as Record<string, unknown>)[
                '__reactFiber$x'
              ] !== undefined,
          ),
        ).toBe(true);
        expect(await page.locator('dunwall-enforcement [role="dialog"]').isVisible()).toBe(true);
        expect(await page.locator('script[data-tenant]').getAttribute('data-debug')).toBeNull();
        await page.close();
      } finally {
        await ctx.close();
      }
    });

    it('a lookup that times out: said once (timeout), and an answer later clears the note', async () => {
      const ctx = await browser.newContext({ viewport: { width: 1000, height: 700 } });
      try {
        const page = await ctx.newPage();
        const said = warnings(page);
        const t = Date.parse('2026-11-30T12:00:00Z');
        await page.clock.install({ time: t });
        await page.clock.pauseAt(t + 1_000);
        let hold = true;
        await page.route('**/api/subscriber-status/**', async (route) => {
          if (hold && route.request().method() === 'GET') return; // never answered
          await route.continue();
        });
        await page.goto(serve(`<main>App</main>${tag(acme, 'cus_ok')}`));
        await page.clock.runFor(3_100);
        await answered(page);
        await expect.poll(() => said.length).toBe(1);
        expect(said).toEqual(['[dunwall] timeout: no answer within 3000 ms; nothing is shown']);
        const opts = {
          tenant: 'acme',
          key: acme.publishable_key,
          customer: 'cus_ok',
          hmac: await page.locator('script[data-tenant]').getAttribute('data-hmac'),
          baseUrl: service.running.url,
        };
        const again = page.evaluate(
          async (o) =>
            (window as unknown as { Dunwall: { check(o: unknown): Promise<{ source: string }> } }).Dunwall.check(o),
          opts,
        );
        await page.clock.runFor(3_100);
        expect(await again).toMatchObject({ source: 'fallback' });
        await expect
          .poll(() => page.evaluate(() => document.documentElement.dataset.dunwallDebug))
          .toMatch(/^timeout: /);
        expect(said).toHaveLength(1);
        // The service answers again: the note goes.
        hold = false;
        expect(await checkAgain(page, opts)).toMatchObject({ source: 'service' });
        expect(await page.evaluate(() => document.documentElement.dataset.dunwallDebug)).toBeUndefined();
        await page.close();
      } finally {
        await ctx.close();
      }
    });
  });
});
