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
type Box = { x: number; y: number; width: number; height: number; top: number; bottom: number; left: number; right: number };

describe.skipIf(!haveBrowser)('the snippet on real pages: findings', () => {
  let service: Service;
  let pageServer: Server;
  let pageOrigin = '';
  let browser: Browser;
  let acme: Tenant;
  /** Pages by path, as the tests write them. */
  const pages = new Map<string, string>();
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
      const html = pages.get(new URL(req.url ?? '/', 'http://page.test').pathname);
      if (html === undefined) res.writeHead(404).end();
      else res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html);
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
  function serve(body: string, head = ''): string {
    const path = `/p/${(served += 1)}`;
    pages.set(
      path,
      `<!doctype html><html><head><meta name="viewport" content="width=device-width, initial-scale=1">
<script>window.__events = []; document.addEventListener('dunwall:status', (e) => window.__events.push(e.detail));</script>${head}</head>
<body>${body}</body></html>`,
    );
    return `${pageOrigin}${path}`;
  }

  const answered = (page: Page) =>
    page.waitForFunction(() => (window as unknown as { __events: unknown[] }).__events.length > 0, undefined, { timeout: 10_000 });

  async function open(ctx: BrowserContext, url: string, before?: (page: Page) => Promise<void>): Promise<Page> {
    const page = await ctx.newPage();
    await before?.(page);
    await page.goto(url);
    await answered(page);
    return page;
  }

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
            expect(first.top, `${label}: the app's first words are below the banner`).toBeGreaterThanOrEqual(bar.bottom - 0.5);
            expect(first.top, `${label}: the app's first words are below the header`).toBeGreaterThanOrEqual(header.bottom - 0.5);
            await page.screenshot({ path: join(RESULTS, `banner-under-header-${name.replace(/\W+/g, '-')}-${viewport.width}.png`) });
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
        const help = '<a id="help" href="#help" style="position:fixed;top:0;right:0;width:40px;height:40px;z-index:5">?</a>';
        const page = await open(
          ctx,
          serve(`${help}<main><p id="first">First words</p>${FILLER}</main>${tag(acme, 'cus_warn')}`, '<style>body{margin:0}</style>'),
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
});
