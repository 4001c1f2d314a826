import type { App } from './app-instance.js';
import type { DemoPage } from '../demo/index.js';
import { DEMO_SLUG } from '../demo/index.js';
import { sendProblem } from './problems.js';
import type { ReadModel } from '../readmodel/index.js';

const STATES: [string, string][] = [
  ['cus_demo_active', 'active: nothing is shown'],
  ['cus_demo_warning', 'warning: a dismissable banner'],
  ['cus_demo_lockout', 'lockout: a full-screen gate'],
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
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Dunwall demo</title><style>${PAGE_CSS}</style></head><body>
<header><h1>Dunwall demo</h1><p>Each frame is a page of a tenant's app with the one-tag snippet, for one of the demo tenant's subscribers.</p></header>
<main>${frames}</main></body></html>`;
}

function frame(page: DemoPage, customer: string): string {
  const hmac = page.hmacs[customer] ?? '';
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Acme Analytics</title><style>body{font-family:Georgia,serif;margin:0;padding:72px 24px 24px}nav a{margin-right:12px}</style></head><body>
<nav><a href="#">Dashboard</a><a href="#">Reports</a><a href="#">Settings</a></nav>
<h1>Acme Analytics</h1><p>Signed in as <code>${escapeHtml(customer)}</code>.</p>
<button type="button">Export report</button>
<script src="/snippet.js" data-tenant="${DEMO_SLUG}" data-key="${escapeHtml(page.publishableKey)}" data-customer="${escapeHtml(customer)}"
  data-hmac="${escapeHtml(hmac)}" data-support-url="https://example.com/support" data-card-update-url="https://billing.example.com/update-card" async></script>
</body></html>`;
}

/** `GET /demo`, while the demo tenant exists (the embedded store's first run creates it). */
export async function demoRoutes(app: App, opts: { demo: DemoPage | null; model: ReadModel }): Promise<void> {
  const { demo, model } = opts;
  const available = async () => demo !== null && model.tenant(DEMO_SLUG) !== null;

  app.get('/demo', { schema: { hide: true } }, async (_req, reply) => {
    if (!(await available())) return sendProblem(reply, 'not_found', 'There is no demo tenant.');
    return reply.header('content-type', 'text/html; charset=utf-8').header('cache-control', 'no-store').send(overview());
  });

  app.get('/demo/frame', { schema: { hide: true } }, async (req, reply) => {
    const customer = (req.query as Record<string, unknown>).customer;
    if (demo === null || !(await available()) || typeof customer !== 'string' || !Object.hasOwn(demo.hmacs, customer)) {
      return sendProblem(reply, 'not_found', 'There is no such demo page.');
    }
    return reply.header('content-type', 'text/html; charset=utf-8').header('cache-control', 'no-store').send(frame(demo, customer));
  });
}
