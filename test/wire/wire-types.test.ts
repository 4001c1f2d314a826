import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openApiDocument } from '../../src/http/openapi.js';
// @ts-expect-error: a script of the build, plain JavaScript without declarations.
import { formattedWireModule, WIRE_TARGETS } from '../../scripts/wire-types.mjs';
import { availableEngines } from '../helpers/engines.js';
import { ADMIN_TOKEN, computeHmac, harness } from '../helpers/harness.js';
import type { Harness } from '../helpers/harness.js';
import type { Endpoint, SecretKeyWithSecret, StatusChangesPage, StatusesPage, TenantWithKeys } from '@dunwall/wire';
import { event, invoice, paymentIds } from '../helpers/stripe-fixtures.js';

/**
 * The console and the packages take their wire types from one module generated from the
 * OpenAPI document (scripts/wire-types.mjs). Two checks hold them to the server: every
 * committed copy is what the routes' schemas generate now, and the server's real answers,
 * written as object literals of those types, typecheck (so a field the types lack, or one
 * they require and the server does not send, fails here).
 */

const ROOT = resolve(import.meta.dirname, '../..');
/** The generated types that are answers (the others are bodies sent, or parts of these). */
const ANSWER_TYPES = [
  'CustomerMessageList',
  'DeliveryAttemptList',
  'EndpointList',
  'EndpointMessageList',
  'EndpointWithSecret',
  'KnownLookupAnswer',
  'LookupAnswer',
  'PolicyImpact',
  'Problem',
  'RecoveryAnalytics',
  'ReplayAnswer',
  'SecretKeyList',
  'SecretKeyWithSecret',
  'Settings',
  'StatusChangesPage',
  'StatusesPage',
  'StripeReplayAnswer',
  'StripeWebhookSecretState',
  'Subscriber',
  'SubscriberPage',
  'TenantHealth',
  'TenantList',
  'TenantWithKeys',
  'UnknownLookupAnswer',
];

describe('the wire module', () => {
  it('is, in every copy, what the OpenAPI document of the routes generates', async () => {
    const expected = (await formattedWireModule(await openApiDocument())) as string;
    for (const target of WIRE_TARGETS as string[]) {
      const committed = readFileSync(join(ROOT, target), 'utf8');
      // On a difference: `npm run build` writes the copies from the document.
      expect(committed, `${target} differs from the OpenAPI document: run npm run build`).toBe(expected);
    }
  });

  describe("accepts the server's real answers", () => {
    let h: Harness;
    /** Each answer, with the wire type it must satisfy. */
    const answers: { type: string; where: string; body: unknown }[] = [];
    const SLUG = 'wire-types';
    const CUSTOMER = 'cus_wire_warning';

    beforeAll(async () => {
      const engines = await availableEngines();
      const engine = engines.find((e) => e.name === 'embedded') ?? engines[0];
      if (!engine) throw new Error('no store engine');
      h = await harness(engine, {}, {}, { fromTemplate: true });
    });
    afterAll(async () => {
      await h?.close();
    });

    /** One call, its answer kept as the wire type given; the status must be `status`. */
    async function take(
      type: string,
      method: string,
      url: string,
      opts: { status?: number; body?: unknown; headers?: Record<string, string> } = {},
    ): Promise<unknown> {
      const res = await h.app.inject({
        method: method as 'GET',
        url,
        headers: {
          ...(opts.body === undefined ? {} : { 'content-type': 'application/json' }),
          ...opts.headers,
        },
        ...(opts.body === undefined ? {} : { payload: JSON.stringify(opts.body) }),
      });
      expect(res.statusCode, `${method} ${url}: ${res.body}`).toBe(opts.status ?? 200);
      const body = res.json() as unknown;
      answers.push({ type, where: `${method} ${url}`, body });
      return body;
    }

    it('of the operator, the tenant and the status feed, written as literals of the generated types', async () => {
      const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
      // A tier with downstream messages, so that the endpoints answer.
      const tier = await h.admin('PUT', '/tiers/wire', {
        entitlements: { powered_by_watermark: false, custom_domain: true, downstream_webhooks: true },
      });
      expect(tier.statusCode, tier.body).toBe(200);
      const tenant = (await take('TenantWithKeys', 'POST', '/admin/v1/tenants', {
        status: 201,
        headers: admin,
        body: { slug: SLUG, tier: 'wire', livemode: false },
      })) as TenantWithKeys;
      await take('TenantList', 'GET', '/admin/v1/tenants', { headers: admin });
      const base = `/admin/v1/tenants/${SLUG}`;

      // A Stripe event puts a customer in warning: an episode, a history, an invoice.
      const ids = paymentIds();
      const failed = event('invoice.payment_failed', invoice(CUSTOMER, { ids }), {
        created: Math.floor(h.clock.now() / 1000),
      });
      await take('StripeReplayAnswer', 'POST', `${base}/stripe-events`, { headers: admin, body: { events: [failed] } });
      await h.setSubscriber(SLUG, 'cus_wire_lockout', 'lockout', 'manual_check');

      const key = (await take('SecretKeyWithSecret', 'POST', `${base}/keys`, {
        status: 201,
        headers: admin,
        body: { name: 'Everything', scopes: ['status:read', 'subscribers:read', 'settings:write', 'webhooks:write'] },
      })) as SecretKeyWithSecret;
      const tenantApi = { authorization: `Bearer ${key.secret_key}` };
      await take('SecretKeyList', 'GET', `${base}/keys`, { headers: admin });

      await take('SubscriberPage', 'GET', '/v1/subscribers', { headers: tenantApi });
      await take('Subscriber', 'GET', `/v1/subscribers/${CUSTOMER}`, { headers: tenantApi });
      await take('LookupAnswer', 'GET', `/v1/subscribers/${CUSTOMER}/status`, { headers: tenantApi });
      await take('Settings', 'GET', '/v1/settings', { headers: tenantApi });
      await take('Settings', 'PATCH', '/v1/settings', {
        headers: tenantApi,
        body: {
          policy: { grace_days: 3 },
          branding: { colors: { accent: '#112233' }, texts: { fr: { gate_title: 'Payer' } } },
        },
      });
      await take('StripeWebhookSecretState', 'PUT', `${base}/settings/stripe-webhook-secret`, {
        headers: admin,
        body: { secret: 'whsec_wiretypes0123456789' },
      });
      await take('RecoveryAnalytics', 'GET', '/v1/analytics/recovery', { headers: tenantApi });
      await take('PolicyImpact', 'GET', '/v1/analytics/policy-impact?grace_days=0', { headers: tenantApi });
      await take('TenantHealth', 'GET', '/v1/health', { headers: tenantApi });

      const endpoint = (await take('EndpointWithSecret', 'POST', '/v1/webhook-endpoints', {
        status: 201,
        headers: tenantApi,
        body: { url: 'https://receiver.example.com/dunwall', description: 'Wire' },
      })) as Endpoint;
      await take('EndpointList', 'GET', '/v1/webhook-endpoints', { headers: tenantApi });
      await take('DeliveryAttemptList', 'GET', `/v1/webhook-endpoints/${endpoint.id}/attempts`, { headers: tenantApi });
      await take('EndpointMessageList', 'GET', `/v1/webhook-endpoints/${endpoint.id}/messages`, { headers: tenantApi });
      await take('ReplayAnswer', 'POST', `/v1/webhook-endpoints/${endpoint.id}/replay`, {
        status: 202,
        headers: tenantApi,
        body: { since: '2025-12-01T00:00:00Z' },
      });
      await take('CustomerMessageList', 'GET', `/v1/subscribers/${CUSTOMER}/webhooks`, { headers: tenantApi });

      const list = (await take('StatusesPage', 'GET', '/v1/statuses', { headers: tenantApi })) as StatusesPage;
      expect(list.data.length).toBeGreaterThan(0);
      await h.setSubscriber(SLUG, 'cus_wire_later', 'warning', 'manual_check');
      const after = encodeURIComponent(list.feed_cursor);
      const changes = (await take('StatusChangesPage', 'GET', `/v1/status-changes?after=${after}`, {
        headers: tenantApi,
      })) as StatusChangesPage;
      expect(changes.data.length).toBeGreaterThan(0);

      const lookup = `/api/subscriber-status/${SLUG}`;
      const hmac = computeHmac(tenant.hmac_secret, CUSTOMER);
      for (const [type, customer, query] of [
        ['KnownLookupAnswer', CUSTOMER, `&hmac=${hmac}`],
        ['UnknownLookupAnswer', 'cus_wire_unknown', ''],
      ] as const) {
        const res = await h.lookup(SLUG, { key: tenant.publishable_key, customerId: customer, query: query.slice(1) });
        expect(res.statusCode, `${lookup}: ${res.body}`).toBe(200);
        answers.push({ type, where: `GET ${lookup} (${customer})`, body: res.json() });
      }
      await take('Problem', 'GET', '/v1/subscribers/cus_nobody', { status: 404, headers: tenantApi });

      // The answers as literals of the generated types, checked by the compiler.
      const dir = mkdtempSync(join(tmpdir(), 'dunwall-wire-'));
      try {
        const file = join(dir, 'answers.ts');
        const wire = join(ROOT, 'packages', 'wire', 'src', 'index.ts');
        writeFileSync(
          file,
          [
            `import type * as W from ${JSON.stringify(wire)};`,
            ...answers.map(
              (a, i) => `// ${a.where}\nexport const answer${i}: W.${a.type} = ${JSON.stringify(a.body, null, 2)};`,
            ),
          ].join('\n'),
        );
        const program = ts.createProgram([file], {
          strict: true,
          noEmit: true,
          allowImportingTsExtensions: true,
          module: ts.ModuleKind.ESNext,
          moduleResolution: ts.ModuleResolutionKind.Bundler,
          target: ts.ScriptTarget.ES2022,
          types: [],
          skipLibCheck: true,
        });
        const problems = ts.getPreEmitDiagnostics(program).map((d) => {
          const at = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : null;
          const line = at ? (d.file?.text.split('\n')[at.line] ?? '') : '';
          return `${at ? `line ${at.line + 1}: ${line.trim()}: ` : ''}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
        });
        expect(problems).toEqual([]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
      // Every answer type of the module was met (a new one is added here with a call that answers it).
      expect([...new Set(answers.map((a) => a.type))].sort()).toEqual(ANSWER_TYPES);
    });
  });
});
