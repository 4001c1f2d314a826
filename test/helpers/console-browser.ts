/**
 * What the console's browser suites share: the service (embedded store, its admin token),
 * a tenant with a history of Stripe events replayed through the operator's API, secret keys
 * with chosen scopes, a signed-in page, screenshots kept under test-results/ and an axe-core
 * pass that fails on a serious or critical violation.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { readAdminTokenFile } from '../../src/runtime/admin-token.js';
import { event, invoice, paymentIds } from './stripe-fixtures.js';
import { haveBrowser, launchChromium, startService } from './snippet-browser.js';
import type { Service, Tenant } from './snippet-browser.js';

export { haveBrowser, launchChromium };
export type { Service, Tenant };

export const DESKTOP = { width: 1280, height: 900 };
export const PHONE = { width: 390, height: 844 };
const SHOTS = join(process.cwd(), 'test-results');

export interface ConsoleService extends Service {
  url: string;
  adminToken: string;
  /** A secret key of `slug` with these scopes (shown once, as the API does). */
  key(slug: string, scopes: string[]): Promise<string>;
}

/** `env`: more settings of the service (webhooks to a loopback receiver, say). */
export async function startConsoleService(env: Record<string, string> = {}): Promise<ConsoleService> {
  const service = await startService(env);
  const adminToken = readAdminTokenFile(service.dataDir);
  if (adminToken === null) throw new Error('the service wrote no admin token');
  return {
    ...service,
    url: service.running.url,
    adminToken,
    async key(slug, scopes) {
      const created = (await service.admin('POST', `/tenants/${slug}/keys`, {
        name: scopes.join(' ') || 'none',
        scopes,
      })) as { secret_key: string };
      return created.secret_key;
    },
  };
}

const DAY_S = 86_400;

/**
 * A tenant with a known history, dated back from now: `recovered` customers who failed and
 * paid two days later, `open` customers still failing (warning, each with a next attempt),
 * and one locked out (no attempt left). Returns the customer ids and the tenant's keys.
 * `options.tier`: the tenant's tier; `options.beforeEvents`: what to do once the tenant
 * exists and before its history is replayed (add a webhook endpoint, say).
 */
export async function seedTenant(
  service: Service,
  slug: string,
  counts = { recovered: 4, open: 3 },
  options: { tier?: string; beforeEvents?: () => Promise<void> } = {},
): Promise<{ recovered: string[]; open: string[]; locked: string; tenant: Tenant }> {
  const tenant = (await service.admin('POST', '/tenants', {
    slug,
    livemode: false,
    ...(options.tier ? { tier: options.tier } : {}),
  })) as Tenant;
  await options.beforeEvents?.();
  const now = Math.floor(Date.now() / 1000);
  const events = [];
  const recovered: string[] = [];
  const open: string[] = [];
  for (let i = 0; i < counts.recovered; i++) {
    const customer = `cus_recovered_${i}`;
    const ids = paymentIds();
    const failedAt = now - (40 - i * 7) * DAY_S;
    events.push(
      event('invoice.payment_failed', invoice(customer, { ids, next_payment_attempt: failedAt + 3 * DAY_S }), {
        created: failedAt,
      }),
    );
    events.push(event('invoice.paid', invoice(customer, { ids, status: 'paid' }), { created: failedAt + 2 * DAY_S }));
    recovered.push(customer);
  }
  for (let i = 0; i < counts.open; i++) {
    const customer = `cus_open_${i}`;
    events.push(
      event('invoice.payment_failed', invoice(customer, { next_payment_attempt: now + 3 * DAY_S }), {
        created: now - (i + 1) * 3600,
      }),
    );
    open.push(customer);
  }
  const locked = 'cus_locked_0';
  events.push(
    event('invoice.payment_failed', invoice(locked, { next_payment_attempt: null }), { created: now - 5 * DAY_S }),
  );
  const replayed = (await service.admin('POST', `/tenants/${slug}/stripe-events`, { events })) as {
    invalid: unknown[];
  };
  if (replayed.invalid.length > 0) throw new Error(`seed: invalid events ${JSON.stringify(replayed.invalid)}`);
  return { recovered, open, locked, tenant };
}

/** Signs in through the console's own form. */
export async function signIn(page: Page, url: string, credential: string): Promise<void> {
  await signInAt(page, `${url}/console`, credential);
}

/** Opens an address of the console (a link someone copied, say), and signs in through the form it shows. */
export async function signInAt(page: Page, address: string, credential: string): Promise<void> {
  await page.goto(address);
  await page.getByLabel('Secret key or admin token').fill(credential);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
}

/** A page that records what the browser refused or threw: a CSP violation is a failure. */
export async function consolePage(
  browser: Browser,
  viewport = DESKTOP,
): Promise<{ page: Page; problems: string[]; close(): Promise<void> }> {
  const context = await browser.newContext({
    viewport,
    ...(viewport === PHONE ? { isMobile: true, hasTouch: true, deviceScaleFactor: 2 } : {}),
  });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/Failed to load resource: the server responded with a status of 4\d\d/.test(m.text()))
      problems.push(`console: ${m.text()}`);
  });
  return { page, problems, close: () => context.close() };
}

/** Keeps a screenshot as test-results/console-<name>-<desktop|phone>.png. */
export async function shot(page: Page, name: string): Promise<string> {
  mkdirSync(SHOTS, { recursive: true });
  const width = page.viewportSize()?.width ?? DESKTOP.width;
  const path = join(SHOTS, `console-${name}-${width < 600 ? 'phone' : 'desktop'}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/**
 * axe-core's WCAG 2.1 A and AA rules on the page as it is. Evaluated through the devtools
 * protocol, which the page's CSP does not govern: the page itself allows no inline script.
 */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const axe = (
      window as unknown as { axe: { run(ctx: Document, opts: unknown): Promise<{ violations: AxeViolation[] }> } }
    ).axe;
    const result = await axe.run(document, {
      runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] },
    });
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.map((n) => ({ target: n.target })),
    }));
  });
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}
