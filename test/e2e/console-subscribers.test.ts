import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { computeHmac } from '../../src/domain/hmac.js';
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
import type { ConsoleService, Tenant } from '../helpers/console-browser.js';
import { Receiver } from '../helpers/receiver.js';
import { event, invoice, signed } from '../helpers/stripe-fixtures.js';

/**
 * The console's subscribers, a customer's page and health in Chromium, against the running
 * service with a tenant whose history was replayed while it had a webhook endpoint (a real
 * receiver on loopback): the list with its filters in the address, paging and search, the
 * timeline of changes and webhooks with their causes, an override set and cleared through
 * the page and seen by the lookup on a socket, what a read-only key is shown, and health.
 * Screenshots on a desktop and a phone; axe-core's WCAG A/AA rules with no serious violation.
 */

const WEBHOOK_SECRET = 'whsec_console_subscribers_0123456789abcdef';
const DAY_S = 86_400;

describe.skipIf(!haveBrowser)('the console: subscribers, a customer, health', () => {
  let service: ConsoleService;
  let browser: Browser;
  let receiver: Receiver;
  let tenant: Tenant;
  let endpointId = '';
  let fullKey = '';
  let fullKeyId = '';
  let readKey = '';
  let seeded: { recovered: string[]; open: string[]; locked: string };

  /** The lookup as a tenant's page makes it, on a socket: publishable key and hmac. */
  async function lookup(customer: string): Promise<string> {
    const url = `${service.url}/api/subscriber-status/acme?processor_customer_id=${customer}&hmac=${computeHmac(tenant.hmac_secret, customer)}`;
    const res = await fetch(url, {
      headers: { authorization: `Bearer ${tenant.publishable_key}` },
      signal: AbortSignal.timeout(10_000),
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as { status: string }).status;
  }

  async function v1<T>(path: string): Promise<{ status: number; body: T }> {
    const res = await fetch(`${service.url}/v1${path}`, {
      headers: { authorization: `Bearer ${fullKey}` },
      signal: AbortSignal.timeout(10_000),
    });
    return { status: res.status, body: (await res.json()) as T };
  }

  /** Stripe's delivery on a socket, signed with `secret`. */
  async function stripe(fixture: ReturnType<typeof event>, secret: string): Promise<number> {
    const { payload, signature } = signed(fixture, secret, Math.floor(Date.now() / 1000));
    const res = await fetch(`${service.url}/webhooks/stripe/acme`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'stripe-signature': signature },
      body: payload,
      signal: AbortSignal.timeout(10_000),
    });
    await res.arrayBuffer();
    return res.status;
  }

  async function noSeriousViolation(page: Page): Promise<void> {
    expect(JSON.stringify(await axeViolations(page), null, 1)).toBe('[]');
  }

  /** The rows' customer ids, as the table shows them. */
  const rows = (page: Page) => page.locator('tbody th[scope="row"] a').allInnerTexts();

  beforeAll(async () => {
    [service, browser, receiver] = await Promise.all([
      startConsoleService({
        DUNWALL_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true',
        DUNWALL_WEBHOOK_ALLOWED_NETWORKS: '127.0.0.0/8',
      }),
      launchChromium(),
      Receiver.start(),
    ]);
    const made = await seedTenant(
      service,
      'acme',
      { recovered: 4, open: 8 },
      {
        tier: 'scale',
        beforeEvents: async () => {
          endpointId = (
            (await service.admin('POST', '/tenants/acme/webhook-endpoints', { url: receiver.url() })) as { id: string }
          ).id;
        },
      },
    );
    tenant = made.tenant;
    seeded = made;
    await service.admin('PATCH', '/tenants/acme', { stripe_webhook_secret: WEBHOOK_SECRET });
    fullKey = await service.key('acme', ['status:read', 'subscribers:read', 'subscribers:write']);
    readKey = await service.key('acme', ['subscribers:read']);
    const keys = (await service.admin('GET', '/tenants/acme/keys')) as { data: { id: string; prefix: string }[] };
    fullKeyId = keys.data.find((k) => fullKey.startsWith(k.prefix))?.id ?? '';
  });
  afterAll(async () => {
    await browser?.close();
    await service?.close();
    await receiver?.close();
  });

  it('lists the subscribers with filters kept in the address, pages through them, on a desktop and a phone', async () => {
    const { page, problems, close } = await consolePage(browser);
    try {
      await signIn(page, service.url, fullKey);
      await page.getByRole('link', { name: 'Subscribers' }).click();
      await page.getByRole('heading', { name: 'Subscribers', level: 1 }).waitFor();
      await expect.poll(() => rows(page)).toEqual([seeded.locked, ...seeded.open, ...seeded.recovered]);
      // Answered warning or lockout: the open and the locked customers, not the recovered.
      const answered = page.getByRole('group', { name: 'Answered status' });
      await answered.getByRole('checkbox', { name: 'warning' }).check();
      await answered.getByRole('checkbox', { name: 'lockout' }).check();
      await expect.poll(() => rows(page)).toEqual([seeded.locked, ...seeded.open]);
      expect(new URL(page.url()).searchParams.get('status')).toBe('warning,lockout');
      // Derived lockout alone.
      await answered.getByRole('checkbox', { name: 'warning' }).uncheck();
      await answered.getByRole('checkbox', { name: 'lockout' }).uncheck();
      await page.getByRole('group', { name: 'Derived status' }).getByRole('checkbox', { name: 'lockout' }).check();
      await expect.poll(() => rows(page)).toEqual([seeded.locked]);
      expect(await page.locator('tbody tr').first().innerText()).toMatch(/lockout\s+lockout\s+retries exhausted/);
      // A reload (or a shared link) keeps the filters.
      await page.reload();
      await expect.poll(() => rows(page)).toEqual([seeded.locked]);
      expect(
        await page
          .getByRole('group', { name: 'Derived status' })
          .getByRole('checkbox', { name: 'lockout' })
          .isChecked(),
      ).toBe(true);
      expect(
        await page
          .getByRole('group', { name: 'Answered status' })
          .getByRole('checkbox', { name: 'lockout' })
          .isChecked(),
      ).toBe(false);

      // Pages of ten, by the cursor the service gives.
      await page.goto(`${service.url}/console/t/acme/subscribers`);
      await page.getByRole('combobox', { name: 'Rows per page' }).selectOption('10');
      const firstTen = [seeded.locked, ...seeded.open, ...seeded.recovered].slice(0, 10);
      await expect.poll(() => rows(page)).toEqual(firstTen);
      expect(await page.getByRole('link', { name: 'First page' }).count()).toBe(0);
      await page.getByRole('link', { name: 'Next page' }).click();
      await expect.poll(() => rows(page)).toEqual(seeded.recovered.slice(1));
      expect(new URL(page.url()).searchParams.get('cursor')).toBe(seeded.recovered[0]);
      expect(await page.getByRole('link', { name: 'Next page' }).count()).toBe(0);
      await page.getByRole('link', { name: 'First page' }).click();
      await expect.poll(() => rows(page)).toEqual(firstTen);

      await page.goto(`${service.url}/console/t/acme/subscribers?status=warning,lockout`);
      await expect.poll(() => rows(page)).toHaveLength(1 + seeded.open.length);
      await shot(page, 'subscribers');
      await noSeriousViolation(page);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
    const phone = await consolePage(browser, PHONE);
    try {
      await signIn(phone.page, service.url, fullKey);
      await phone.page.goto(`${service.url}/console/t/acme/subscribers?status=warning,lockout`);
      await expect.poll(() => rows(phone.page)).toHaveLength(1 + seeded.open.length);
      const overflow = await phone.page.evaluate(
        () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
      );
      expect(overflow).toBeLessThanOrEqual(0);
      await shot(phone.page, 'subscribers');
      await noSeriousViolation(phone.page);
      expect(phone.problems).toEqual([]);
    } finally {
      await phone.close();
    }
  });

  it('finds a customer by its exact id, and says so when there is no such subscriber', async () => {
    const { page, problems, close } = await consolePage(browser);
    try {
      await signIn(page, service.url, fullKey);
      await page.goto(`${service.url}/console/t/acme/subscribers`);
      const box = page.getByRole('textbox', { name: 'Customer id' });
      await box.fill('cus_nobody_here');
      await page.getByRole('button', { name: 'Find' }).click();
      await page.getByText('No such subscriber: this tenant has no record or history of cus_nobody_here.').waitFor();
      expect(page.url()).toBe(`${service.url}/console/t/acme/subscribers`);
      await box.fill('not a customer');
      await box.press('Enter');
      await page.getByText('A customer id is cus_ followed by').waitFor();
      await box.fill(` ${seeded.open[2]} `);
      await box.press('Enter');
      await page.getByRole('heading', { name: seeded.open[2], level: 1 }).waitFor();
      expect(page.url()).toBe(`${service.url}/console/t/acme/subscribers/${seeded.open[2]}`);
      // A link to a customer the tenant does not know says so too.
      await page.goto(`${service.url}/console/t/acme/subscribers/cus_nobody_here`);
      await page.getByText('No such subscriber').waitFor();
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it("shows a customer's timeline: the Stripe event that locked it out with its cause, and the webhook it raised with its delivery", async () => {
    const shown = (
      await v1<{ history: { event_id: string | null; event_type: string | null }[] }>(`/subscribers/${seeded.locked}`)
    ).body;
    const failed = shown.history.find((h) => h.event_type === 'invoice.payment_failed')?.event_id;
    expect(failed).toMatch(/^evt_/);
    // The receiver got the customer's message: its id is the one the page must show.
    await expect
      .poll(() =>
        receiver.received.find(
          (r) =>
            (JSON.parse(r.body) as { data: { processor_customer_id: string } }).data.processor_customer_id ===
            seeded.locked,
        ),
      )
      .toBeDefined();
    const sent = receiver.received.find(
      (r) =>
        (JSON.parse(r.body) as { data: { processor_customer_id: string } }).data.processor_customer_id ===
        seeded.locked,
    );
    const messageId = String(sent?.headers['webhook-id']);
    expect(messageId).toMatch(/^msg_/);
    await expect
      .poll(
        async () =>
          (await v1<{ data: { deliveries: { state: string }[] }[] }>(`/subscribers/${seeded.locked}/webhooks`)).body
            .data[0]?.deliveries[0]?.state,
      )
      .toBe('delivered');

    for (const viewport of [DESKTOP, PHONE]) {
      const { page, problems, close } = await consolePage(browser, viewport);
      try {
        await signIn(page, service.url, fullKey);
        await page.goto(`${service.url}/console/t/acme/subscribers?derived_status=lockout`);
        await page.getByRole('link', { name: seeded.locked }).click();
        await page.getByRole('heading', { name: seeded.locked, level: 1 }).waitFor();
        const timeline = page.locator('ol.timeline');
        await timeline.locator('li.tl-webhook').first().waitFor();
        const change = timeline.locator('li.tl-change', { hasText: failed ?? 'missing' });
        expect(await change.innerText()).toContain(`Stripe invoice.payment_failed ${failed}`);
        expect(await change.innerText()).toMatch(/Now\s+lockout/);
        const webhook = timeline.locator('li.tl-webhook', { hasText: messageId });
        expect(await webhook.innerText()).toContain('Webhook subscriber.status_changed');
        expect(await webhook.innerText()).toMatch(
          new RegExp(`${endpointId}: delivered after 1 attempt, last .+ \\(HTTP 200\\)`),
        );
        // Newest first: the webhook the change raised sits above it.
        const order = await timeline.locator(':scope > li').evaluateAll((items) => items.map((li) => li.className));
        expect(order).toEqual(['tl-webhook', 'tl-change']);
        const summary = await page.locator('.stats').innerText();
        expect(summary).toMatch(/Answered status\s+lockout/);
        expect(summary).toContain('retries exhausted');
        expect(await page.getByRole('table', { name: /Episodes/ }).innerText()).toContain('$29.00');
        if (viewport === PHONE) {
          const overflow = await page.evaluate(
            () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
          );
          expect(overflow).toBeLessThanOrEqual(0);
        }
        await shot(page, 'subscriber');
        await noSeriousViolation(page);
        expect(problems).toEqual([]);
      } finally {
        await close();
      }
    }
  });

  it('sets a lockout override through the page, confirmed first, which the lookup answers on a socket; clearing it gives back the derived status', async () => {
    const customer = seeded.open[1] as string;
    expect(await lookup(customer)).toBe('warning');
    const { page, problems, close } = await consolePage(browser);
    try {
      await signIn(page, service.url, fullKey);
      await page.goto(`${service.url}/console/t/acme/subscribers/${customer}`);
      await page.getByRole('heading', { name: customer, level: 1 }).waitFor();
      await page.getByText('No override stands now.').waitFor();
      await page.getByRole('combobox', { name: 'Status' }).selectOption('lockout');
      await page.getByRole('textbox', { name: 'Reason (optional)' }).fill('chargeback');
      await page.getByRole('button', { name: 'Set override' }).click();
      // Nothing is sent before the confirmation, and the confirmation has the keyboard's focus.
      const confirm = page.getByRole('button', { name: 'Yes, lock out' });
      await confirm.waitFor();
      await expect.poll(() => page.evaluate(() => document.activeElement?.textContent)).toBe('Yes, lock out');
      expect(await lookup(customer)).toBe('warning');
      // Escape takes the question back; asked again, Enter answers it.
      await page.keyboard.press('Escape');
      await expect.poll(() => page.evaluate(() => document.activeElement?.textContent)).toBe('Set override');
      expect(await confirm.count()).toBe(0);
      await page.keyboard.press('Enter');
      await expect.poll(() => page.evaluate(() => document.activeElement?.textContent)).toBe('Yes, lock out');
      expect(await lookup(customer)).toBe('warning');
      await page.keyboard.press('Enter');
      await page
        .getByRole('status')
        .filter({ hasText: `Override set: ${customer} is answered lockout.` })
        .waitFor();
      await expect.poll(() => lookup(customer)).toBe('lockout');
      await expect.poll(() => page.locator('.stats').innerText()).toMatch(/Answered status\s+lockout\s+chargeback/);
      const set = page.locator('li.tl-change', { hasText: `override by key ${fullKeyId}` });
      await set.waitFor();
      expect(await set.innerText()).toMatch(/Now\s+lockout/);

      await page.getByRole('button', { name: 'Clear override' }).click();
      await page
        .getByRole('status')
        .filter({ hasText: `Override cleared: ${customer}` })
        .waitFor();
      await expect.poll(() => lookup(customer)).toBe('warning');
      await page.locator('li.tl-change', { hasText: `override cleared by key ${fullKeyId}` }).waitFor();
      await expect.poll(() => page.locator('.stats').innerText()).toMatch(/Answered status\s+warning/);
      expect(await page.getByText('No override stands now.').count()).toBe(1);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('says clearly when a Stripe event dated later keeps precedence over an override (409 stale_change)', async () => {
    const customer = 'cus_future_0';
    const now = Math.floor(Date.now() / 1000);
    // Dated four minutes ahead (a clock ahead of ours; Stripe's tolerance is five).
    const ahead = event('invoice.payment_failed', invoice(customer, { next_payment_attempt: now + 3 * DAY_S }), {
      created: now + 240,
    });
    const replayed = (await service.admin('POST', '/tenants/acme/stripe-events', { events: [ahead] })) as {
      invalid: unknown[];
    };
    expect(replayed.invalid).toEqual([]);
    const { page, problems, close } = await consolePage(browser);
    try {
      await signIn(page, service.url, fullKey);
      await page.goto(`${service.url}/console/t/acme/subscribers/${customer}`);
      await page.getByRole('heading', { name: customer, level: 1 }).waitFor();
      await page.getByRole('combobox', { name: 'Status' }).selectOption('active');
      await page.getByRole('button', { name: 'Set override' }).click();
      await page
        .getByRole('alert')
        .filter({ hasText: 'Not applied: a Stripe event dated later than now has already set this customer' })
        .waitFor();
      expect(await page.getByRole('alert').innerText()).toContain('stale_change');
      expect(await lookup(customer)).toBe('warning');
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('shows a key with subscribers:read alone the timeline, and no override form', async () => {
    const { page, problems, close } = await consolePage(browser);
    try {
      await signIn(page, service.url, readKey);
      await page.goto(`${service.url}/console/t/acme/subscribers/${seeded.open[0]}`);
      await page.getByRole('heading', { name: seeded.open[0], level: 1 }).waitFor();
      await page.locator('ol.timeline li').first().waitFor();
      await page.getByText('This needs the subscribers:write scope').waitFor();
      expect(await page.getByRole('button', { name: 'Set override' }).count()).toBe(0);
      expect(await page.getByRole('button', { name: 'Clear override' }).count()).toBe(0);
      expect(await page.getByRole('combobox', { name: 'Status' }).count()).toBe(0);
      await noSeriousViolation(page);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('shows health: its figures and verdicts', async () => {
    for (const viewport of [DESKTOP, PHONE]) {
      const { page, problems, close } = await consolePage(browser, viewport);
      try {
        await signIn(page, service.url, fullKey);
        await page.getByRole('link', { name: 'Health' }).click();
        await page.getByRole('heading', { name: 'Health', level: 1 }).waitFor();
        await page.getByRole('heading', { name: 'Stripe events, last 7 days' }).waitFor();
        await shot(page, 'health');
        await noSeriousViolation(page);
        expect(problems).toEqual([]);
      } finally {
        await close();
      }
    }
  });

  it("shows health's figures as the API answers them, with a verdict for refused deliveries", async () => {
    // Stripe's deliveries on a socket: one good, one with another secret, and one of the test
    // mode, whose own signing secret is not set (one mode's secret never verifies the other's).
    const now = Math.floor(Date.now() / 1000);
    const failing = (customer: string, livemode = true) =>
      event('invoice.payment_failed', invoice(customer, { next_payment_attempt: now + 3 * DAY_S }), {
        created: now,
        livemode,
      });
    expect(await stripe(failing('cus_health_0'), WEBHOOK_SECRET)).toBe(200);
    expect(await stripe(failing('cus_health_1'), 'whsec_not_the_one_0123456789abcdef')).toBe(400);
    expect(await stripe(failing('cus_health_2', false), WEBHOOK_SECRET)).toBe(400);
    // The counts are written every few seconds; this writes them now.
    await service.running.flushCounters();
    type Answer = {
      stripe: { received: number; refused_signature: number; refused_livemode: number; days: unknown[] };
      deliveries: { endpoints: number };
    };
    const health = (await v1<Answer>('/health')).body;
    expect(health.stripe.refused_signature).toBeGreaterThanOrEqual(1);
    expect(health.deliveries.endpoints).toBe(1);
    const { page, problems, close } = await consolePage(browser);
    try {
      await signIn(page, service.url, fullKey);
      await page.goto(`${service.url}/console/health`);
      await page.getByRole('heading', { name: 'Stripe events, last 7 days' }).waitFor();
      await page.getByText('Refused deliveries: check the signing secret.').waitFor();
      const stats = await page.locator('#stripe-title ~ .stats').innerText();
      expect(stats).toMatch(new RegExp(`Received\\s+${health.stripe.received}\\b`));
      expect(stats).toMatch(new RegExp(`Refused: bad signature\\s+${health.stripe.refused_signature}\\b`));
      expect(await page.getByRole('table', { name: 'Stripe events by day' }).locator('tbody tr').count()).toBe(
        health.stripe.days.length,
      );
      await page.getByText('dunwall stripe sync').waitFor();
      // With its figures: the desktop screenshot the docs show.
      await shot(page, 'health');
      await noSeriousViolation(page);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });

  it('flags a secret key sent from a browser, with the advice to rotate it', async () => {
    const { page, problems, close } = await consolePage(browser);
    try {
      await signIn(page, service.url, fullKey);
      await page.getByRole('link', { name: 'Health' }).click();
      await page.getByText('No secret key has been sent from a browser.').waitFor();
      // A page that ships the secret key: its lookup carries Origin, and is refused.
      const leaked = await fetch(`${service.url}/api/subscriber-status/acme?processor_customer_id=cus_open_0`, {
        headers: { authorization: `Bearer ${fullKey}`, origin: 'https://shop.example' },
        signal: AbortSignal.timeout(10_000),
      });
      expect(leaked.status).toBe(401);
      // The mark is written once the refusal is answered; this waits for it.
      await service.running.flushCounters();
      await page.reload();
      const flag = page.locator('.verdict-bad', { hasText: 'Rotate the secret key' });
      await flag.waitFor();
      expect(await flag.innerText()).toContain(fullKey.slice(0, 12));
      expect(await flag.innerText()).not.toContain(fullKey.slice(0, 13));
      await page.getByText('Treat it as leaked').waitFor();
      await noSeriousViolation(page);
      expect(problems).toEqual([]);
    } finally {
      await close();
    }
  });
});
