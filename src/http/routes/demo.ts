import type { App } from '../app-instance.js';
import type { DemoPage } from '../../demo/index.js';
import { DEMO_SLUG } from '../../demo/index.js';
import { sendProblem } from '../problems.js';
import type { ReadModel } from '../../readmodel/index.js';

const STATES: [string, string][] = [
  ['cus_demo_active', 'active: nothing is shown'],
  ['cus_demo_warning', 'warning: a dismissable banner'],
  ['cus_demo_lockout', 'lockout: a full-screen gate'],
];

/** Where a banner goes: the snippet's placement attributes, shown side by side. */
const PLACEMENTS: [string, string, string][] = [
  ['push', 'pushed (the default): the page moves down, under the fixed header', ''],
  ['overlay', 'overlay at the top', 'data-mode="overlay"'],
  ['bottom', 'at the bottom, the page given room', 'data-position="bottom"'],
  ['mount', "in the app's own container", 'data-mount="#billing-notice"'],
];

function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const PAGE_CSS = `body{font-family:system-ui,sans-serif;margin:0;background:#f2f4f7;color:#101828}
header{padding:20px 24px;background:#101828;color:#fff}header h1{margin:0 0 4px;font-size:20px}header p{margin:0;opacity:.8}
main{display:grid;grid-template-columns:repeat(auto-fit,minmax(320px,1fr));gap:16px;padding:16px}
figure{margin:0;background:#fff;border-radius:10px;overflow:hidden;box-shadow:0 1px 3px rgba(0,0,0,.1)}
figcaption{padding:10px 14px;font-weight:600;border-bottom:1px solid #eaecf0}iframe{width:100%;height:420px;border:0;display:block}`;

/** A newcomer's tour: the three states side by side, each a page of a make-believe app. */
function overview(): string {
  const frames = STATES.map(
    ([customer, caption]) =>
      `<figure><figcaption>${escapeHtml(caption)} <code>${customer}</code></figcaption><iframe title="${customer}" src="/demo/frame?customer=${customer}"></iframe></figure>`,
  ).join('\n');
  const placements = PLACEMENTS.map(
    ([name, caption]) =>
      `<figure><figcaption>${escapeHtml(caption)}</figcaption><iframe title="banner ${name}" src="/demo/frame?customer=cus_demo_warning&amp;placement=${name}"></iframe></figure>`,
  ).join('\n');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Dunwall demo</title><style>${PAGE_CSS}</style></head><body>
<header><h1>Dunwall demo</h1><p>Each frame is a page of a tenant's app with the one-tag snippet, for one of the demo tenant's subscribers.</p></header>
<main>${frames}</main>
<header><h1>Where the banner goes</h1><p>The same warning, placed by the tag's <code>data-position</code>, <code>data-mode</code> and <code>data-mount</code>.</p></header>
<main>${placements}</main></body></html>`;
}

function frame(page: DemoPage, customer: string, placement: string): string {
  const hmac = page.hmacs[customer] ?? '';
  const attrs = PLACEMENTS.find(([name]) => name === placement)?.[2] ?? '';
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Acme Analytics</title><style>body{font-family:Georgia,serif;margin:0;padding:56px 24px 24px}nav{position:fixed;top:0;left:0;right:0;height:44px;display:flex;align-items:center;padding:0 24px;background:#1d2939}nav a{margin-right:12px;color:#fff}</style></head><body>
<nav><a href="#">Dashboard</a><a href="#">Reports</a><a href="#">Settings</a></nav>
<div id="billing-notice"></div>
<h1>Acme Analytics</h1><p>Signed in as <code>${escapeHtml(customer)}</code>.</p>
<button type="button">Export report</button>
<script src="/snippet.js" data-tenant="${DEMO_SLUG}" data-key="${escapeHtml(page.publishableKey)}" data-customer="${escapeHtml(customer)}"
  data-hmac="${escapeHtml(hmac)}" data-support-url="https://example.com/support" data-card-update-url="https://billing.example.com/update-card" ${attrs} async></script>
</body></html>`;
}

/** `GET /demo`, while the demo tenant exists (the embedded store's first run creates it). */
export async function demoRoutes(app: App, opts: { demo: DemoPage | null; model: ReadModel }): Promise<void> {
  const { demo, model } = opts;
  const available = async () => demo !== null && model.tenant(DEMO_SLUG) !== null;

  app.get('/demo', { schema: { hide: true } }, async (_req, reply) => {
    if (!(await available())) return sendProblem(reply, 'not_found', 'There is no demo tenant.');
    return reply
      .header('content-type', 'text/html; charset=utf-8')
      .header('cache-control', 'no-store')
      .send(overview());
  });

  app.get('/demo/frame', { schema: { hide: true } }, async (req, reply) => {
    const customer = (req.query as Record<string, unknown>).customer;
    if (demo === null || !(await available()) || typeof customer !== 'string' || !Object.hasOwn(demo.hmacs, customer)) {
      return sendProblem(reply, 'not_found', 'There is no such demo page.');
    }
    const placement = (req.query as Record<string, unknown>).placement;
    return reply
      .header('content-type', 'text/html; charset=utf-8')
      .header('cache-control', 'no-store')
      .send(frame(demo, customer, typeof placement === 'string' ? placement : 'push'));
  });
}
