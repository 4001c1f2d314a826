import { computeHmac } from '../../src/domain/hmac.js';
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { build } from 'esbuild';
import type { Branding } from '../../src/domain/branding.js';

/**
 * A stand-in for the Dunwall service, for the app packages' tests in Chromium: the lookup
 * (`GET /api/subscriber-status/:slug`) and the branding (`GET /api/branding/:slug`) as the
 * reference (docs/reference.md#the-lookup) describes them, for one test tenant, with the answers a test sets
 * per customer; every lookup is recorded. The real service is tested on its own; here the
 * test decides each answer (a failure, a change between two questions) without a database.
 * It also serves the page and the app's bundle, from the same origin.
 *
 * Checks, in the contract's order: the bearer key, the tenant, the customer id, the `hmac`
 * (when sent; it gives `pay_url`, and an active answer's `notice` with its `card_update_url`);
 * a test tenant's `preview=warning|lockout` answers that status with the branding's payment
 * link as `pay_url` and `lockout_at` a week ahead.
 */
export type Answer =
  | {
      status: 'active' | 'warning' | 'lockout';
      lockout_at?: string;
      pay_url?: string;
      card_update_url?: string | null;
      entitlements?: Record<string, boolean>;
      /** With `active`: told only to a signed lookup, as `pay_url` is, with `card_update_url`. */
      notice?: { kind: 'card_expiring'; expires: string };
    }
  | { fail: number };

export interface StandIn {
  url: string;
  /** The answer per customer id; none: the unknown subscriber's `{"status":"active"}`. */
  answers: Map<string, Answer>;
  /** Every lookup's query, in order. */
  asked: URLSearchParams[];
  /** How many lookups named this customer. */
  count(customer: string): number;
  setPage(html: string, bundle: string): void;
  close(): Promise<void>;
}

export const TENANT = 'acme';
export const PUBLISHABLE_KEY = 'pk_test_standin';
export const HMAC_SECRET = 'standin-hmac-secret';
const ENTITLEMENTS = { powered_by_watermark: false, custom_domain: true, downstream_webhooks: true };
const CUSTOMER_RE = /^cus_[A-Za-z0-9_]{1,251}$/;
const WEEK_MS = 7 * 86_400_000;

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  503: 'Service Unavailable',
};

function problem(res: ServerResponse, status: number, code: string, headers: Record<string, string> = {}): void {
  res
    .writeHead(status, { 'content-type': 'application/problem+json', 'access-control-allow-origin': '*', ...headers })
    .end(
      JSON.stringify({
        type: 'about:blank',
        title: REASONS[status] ?? 'Error',
        status,
        code,
        detail: code.replace(/_/g, ' '),
      }),
    );
}

export async function startStandIn(branding: Branding): Promise<StandIn> {
  const answers = new Map<string, Answer>();
  const asked: URLSearchParams[] = [];
  let page = { html: '', bundle: '' };

  const lookup = (req: IncomingMessage, res: ServerResponse, url: URL, slug: string) => {
    const auth = req.headers.authorization;
    if (!auth) return problem(res, 401, 'missing_publishable_key', { 'www-authenticate': 'Bearer' });
    if (slug !== TENANT) return problem(res, 404, 'tenant_not_found');
    if (auth !== `Bearer ${PUBLISHABLE_KEY}`)
      return problem(res, 401, 'invalid_publishable_key', { 'www-authenticate': 'Bearer' });
    const ids = url.searchParams.getAll('processor_customer_id');
    const customer = ids[0] ?? '';
    if (ids.length === 0) return problem(res, 400, 'missing_processor_customer_id');
    if (ids.length > 1 || !CUSTOMER_RE.test(customer)) return problem(res, 400, 'invalid_processor_customer_id');
    asked.push(url.searchParams);
    const preview = url.searchParams.get('preview');
    const hmac = url.searchParams.getAll('hmac');
    if (
      preview !== 'warning' &&
      preview !== 'lockout' &&
      hmac.length > 0 &&
      (hmac.length > 1 || hmac[0]?.toLowerCase() !== computeHmac(HMAC_SECRET, customer))
    )
      return problem(res, 403, 'hmac_mismatch');
    const answer: Answer | undefined =
      preview === 'warning' || preview === 'lockout'
        ? {
            status: preview,
            ...(preview === 'warning'
              ? { lockout_at: new Date(Date.now() + WEEK_MS).toISOString().replace(/\.\d{3}Z$/, 'Z') }
              : {}),
            ...(branding.payment_url ? { pay_url: branding.payment_url } : {}),
          }
        : answers.get(customer);
    if (answer && 'fail' in answer) return problem(res, answer.fail, 'service_unavailable');
    const signed = hmac.length === 1;
    const notice = answer && !('fail' in answer) && answer.status === 'active' && signed ? answer.notice : undefined;
    const body = !answer
      ? { status: 'active' }
      : {
          status: answer.status,
          card_update_url: answer.status === 'warning' || notice ? (answer.card_update_url ?? null) : null,
          ...(notice ? { notice } : {}),
          entitlements: answer.entitlements ?? ENTITLEMENTS,
          ...(answer.status === 'warning' && answer.lockout_at ? { lockout_at: answer.lockout_at } : {}),
          // The invoice's page goes only to a signed lookup (or a preview).
          ...(answer.status !== 'active' && answer.pay_url && (signed || preview) ? { pay_url: answer.pay_url } : {}),
        };
    res
      .writeHead(200, {
        'content-type': 'application/json',
        'cache-control': 'no-store',
        'access-control-allow-origin': '*',
      })
      .end(JSON.stringify(body));
  };

  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://standin.test');
    const route = /^\/api\/(subscriber-status|branding)\/([^/]+)$/.exec(url.pathname);
    if (req.method === 'OPTIONS' && route) {
      res
        .writeHead(204, {
          'access-control-allow-origin': '*',
          'access-control-allow-methods': 'GET, OPTIONS',
          'access-control-allow-headers': 'Authorization',
          'access-control-max-age': '7200',
        })
        .end();
      return;
    }
    if (req.method !== 'GET') return problem(res, 404, 'not_found');
    if (route?.[1] === 'subscriber-status') return lookup(req, res, url, decodeURIComponent(route[2] ?? ''));
    if (route?.[1] === 'branding') {
      if (route[2] !== TENANT) return problem(res, 404, 'tenant_not_found');
      res
        .writeHead(200, {
          'content-type': 'application/json',
          'cache-control': 'public, max-age=60',
          'access-control-allow-origin': '*',
        })
        .end(JSON.stringify(branding));
      return;
    }
    if (url.pathname === '/')
      return void res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(page.html);
    if (url.pathname === '/app.js')
      return void res.writeHead(200, { 'content-type': 'text/javascript' }).end(page.bundle);
    problem(res, 404, 'not_found');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  server.unref();
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    answers,
    asked,
    count: (customer) => asked.filter((q) => q.get('processor_customer_id') === customer).length,
    setPage(html, bundle) {
      page = { html, bundle };
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** An app's entry, bundled for Chromium as a React Native app is for the web: `react-native` is `react-native-web` (or the test's own module). */
export async function bundleApp(
  entry: string,
  alias: Record<string, string>,
  define: Record<string, string> = {},
): Promise<string> {
  const out = await build({
    entryPoints: [entry],
    bundle: true,
    write: false,
    format: 'iife',
    target: 'es2022',
    jsx: 'automatic',
    alias: { 'react-native': 'react-native-web', ...alias },
    define: { 'process.env.NODE_ENV': '"production"', ...define },
    logLevel: 'warning',
  });
  const [file] = out.outputFiles;
  if (!file) throw new Error(`esbuild wrote nothing for ${entry}`);
  return file.text;
}

/** The page: a full-height root the app renders into, then the bundle. */
export function appPage(title: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${title}</title>
<style>html,body,#root{height:100%;margin:0}#root{display:flex}</style></head><body><div id="root"></div><script src="/app.js"></script></body></html>`;
}
