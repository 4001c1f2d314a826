#!/usr/bin/env node
/**
 * The wire module: TypeScript types and `as const` vocabularies of what crosses the network,
 * generated from the service's OpenAPI document (itself made from the routes' schemas,
 * src/http/schemas.ts). The console and the packages take their wire types from it, so that
 * a schema of the server is the only definition of an answer.
 *
 *   node scripts/wire-types.mjs           writes every copy from dist/openapi.json (`npm run build`)
 *   node scripts/wire-types.mjs --check   exits 1 when a committed copy differs from the document
 *
 * One module, written to several places: `packages/wire/src/index.ts` (`@dunwall/wire`, for the
 * console and the internal packages) and a copy in the source of each published package, which
 * must stay whole when installed alone (its declarations may not name an unpublished package).
 * test/wire/ regenerates it from the routes and compares.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where the module is written, from the repository's root. */
export const WIRE_TARGETS = ['packages/wire/src/index.ts', 'packages/client/src/wire.ts', 'packages/node/src/wire.ts'];

/**
 * The named types: each is the schema found at one place of the document, an operation's
 * answer (`METHOD path status`) or its JSON body (`METHOD path body`), then a JSON pointer
 * into that schema. A part of a schema equal to a named type (descriptions aside) is written
 * by its name.
 */
const TYPES = [
  ['Problem', '#/components/schemas/def-0', 'A problem answer (RFC 9457, application/problem+json)'],
  ['Entitlements', 'GET /v1/settings 200 /properties/entitlements', "The tier's capability flags"],
  ['LookupAnswer', 'GET /api/subscriber-status/{tenantSlug} 200', 'The lookup: a known subscriber, or an unknown one'],
  ['KnownLookupAnswer', 'GET /api/subscriber-status/{tenantSlug} 200 /anyOf/0', 'The lookup of a known subscriber'],
  [
    'UnknownLookupAnswer',
    'GET /api/subscriber-status/{tenantSlug} 200 /anyOf/1',
    'The lookup of an unknown subscriber',
  ],
  ['StatusesPage', 'GET /v1/statuses 200', "A page of the status feed's list (`GET /v1/statuses`)"],
  ['StatusEntry', 'GET /v1/statuses 200 /properties/data/items', "One subscriber of the status feed's list"],
  ['StatusChangesPage', 'GET /v1/status-changes 200', 'A page of status changes (`GET /v1/status-changes`)'],
  ['StatusChange', 'GET /v1/status-changes 200 /properties/data/items', 'One status change of the status feed'],
  ['Branding', 'GET /v1/settings 200 /properties/branding', 'What the snippet shows with a banner or a gate'],
  [
    'BrandingTexts',
    'GET /v1/settings 200 /properties/branding/properties/texts/additionalProperties',
    'The texts of one locale',
  ],
  ['Policy', 'GET /v1/settings 200 /properties/policy', 'How derived statuses are enforced'],
  ['Settings', 'GET /v1/settings 200', "A tenant's settings, as the tenant sees them"],
  ['SettingsPatch', 'PATCH /v1/settings body', 'What a tenant may change of itself'],
  ['StripeWebhookSecretBody', 'PUT /v1/settings/stripe-webhook-secret body', 'A new Stripe signing secret'],
  [
    'CredentialChange',
    'PUT /v1/settings/stripe-webhook-secret 200 /properties/changes/items',
    'Who changed the Stripe signing secret',
  ],
  [
    'StripeWebhookSecretState',
    'PUT /v1/settings/stripe-webhook-secret 200',
    'The Stripe signing secret after a change',
  ],
  ['StripeApiKeyBody', 'PUT /v1/settings/stripe-api-key body', "A mode's Stripe API key to set"],
  [
    'StripeApiKeyState',
    'PUT /v1/settings/stripe-api-key 200',
    "A mode's Stripe API key after a change: its prefix and date, never the key",
  ],
  ['Tenant', 'GET /admin/v1/tenants 200 /properties/data/items', 'A tenant, as the operator sees it'],
  ['TenantList', 'GET /admin/v1/tenants 200', 'Every tenant'],
  ['TenantWithKeys', 'POST /admin/v1/tenants 201', 'A created tenant, with its keys (shown once)'],
  ['CreateTenantBody', 'POST /admin/v1/tenants body', 'A tenant to create'],
  ['UpdateTenantBody', 'PATCH /admin/v1/tenants/{slug} body', "The operator's change of a tenant"],
  ['SubscriberRow', 'GET /v1/subscribers 200 /properties/data/items', 'One subscriber of a list page'],
  ['SubscriberPage', 'GET /v1/subscribers 200', 'A page of subscribers'],
  [
    'HistoryEntry',
    'GET /v1/subscribers/{customerId} 200 /properties/history/items',
    "One change of a subscriber's history",
  ],
  ['Episode', 'GET /v1/subscribers/{customerId} 200 /properties/episodes/items', 'A dunning episode'],
  ['Subscriber', 'GET /v1/subscribers/{customerId} 200', 'A subscriber, its episodes and its history'],
  ['PutSubscriberBody', 'PUT /v1/subscribers/{customerId}/override body', 'An override of the status'],
  [
    'CustomerMessage',
    'GET /v1/subscribers/{customerId}/webhooks 200 /properties/data/items',
    'A downstream message of a customer, and its deliveries',
  ],
  [
    'CustomerMessageList',
    'GET /v1/subscribers/{customerId}/webhooks 200',
    'The downstream messages of a customer, newest first',
  ],
  ['SecretKey', 'GET /v1/keys 200 /properties/data/items', 'A secret key (never its value)'],
  ['SecretKeyList', 'GET /v1/keys 200', "The tenant's secret keys"],
  ['SecretKeyWithSecret', 'POST /v1/keys 201', 'A created or rotated secret key, its value shown once'],
  ['CreateKeyBody', 'POST /v1/keys body', 'A secret key to create'],
  [
    'RecoveryAmount',
    'GET /v1/analytics/recovery 200 /properties/at_risk/properties/amounts/items',
    'An amount in one currency',
  ],
  ['RecoveryAnalytics', 'GET /v1/analytics/recovery 200', "Figures over the tenant's dunning runs"],
  ['PolicyImpact', 'GET /v1/analytics/policy-impact 200', 'What a proposed policy would change now'],
  ['TenantHealth', 'GET /v1/health 200', "A tenant's health: its Stripe intake, the read model, its deliveries"],
  ['Endpoint', 'GET /v1/webhook-endpoints 200 /properties/data/items', 'An endpoint of downstream messages'],
  ['EndpointList', 'GET /v1/webhook-endpoints 200', "The tenant's endpoints"],
  [
    'EndpointWithSecret',
    'POST /v1/webhook-endpoints 201',
    'A created endpoint, or one whose secret was rotated: the secret shown once',
  ],
  ['CreateEndpointBody', 'POST /v1/webhook-endpoints body', 'An endpoint to create'],
  ['UpdateEndpointBody', 'PATCH /v1/webhook-endpoints/{endpointId} body', 'A change of an endpoint'],
  [
    'DeliveryAttempt',
    'GET /v1/webhook-endpoints/{endpointId}/attempts 200 /properties/data/items',
    'One attempt to deliver a message',
  ],
  ['DeliveryAttemptList', 'GET /v1/webhook-endpoints/{endpointId}/attempts 200', "An endpoint's latest attempts"],
  [
    'EndpointMessage',
    'GET /v1/webhook-endpoints/{endpointId}/messages 200 /properties/data/items',
    'A message queued for an endpoint',
  ],
  ['EndpointMessageList', 'GET /v1/webhook-endpoints/{endpointId}/messages 200', "An endpoint's latest messages"],
  ['ReplayBody', 'POST /v1/webhook-endpoints/{endpointId}/replay body', 'A range of messages to queue again'],
  ['ReplayAnswer', 'POST /v1/webhook-endpoints/{endpointId}/replay 202', 'Messages queued again, and where to go on'],
  [
    'StripeReplayAnswer',
    'POST /admin/v1/tenants/{slug}/stripe-events 200',
    "What an operator's replay of Stripe events did",
  ],
];

/**
 * The vocabularies: `NAME` and its type, from the string values (`values`) or the property
 * names (`keys`) of the schema at a place of the document.
 */
const VOCABULARIES = [
  ['STATUSES', 'Status', 'values', 'GET /v1/subscribers 200 /properties/data/items/properties/status'],
  ['PREVIEW_STATUSES', 'PreviewStatus', 'values', 'GET /api/subscriber-status/{tenantSlug} query preview'],
  ['SCOPES', 'Scope', 'values', 'GET /v1/keys 200 /properties/data/items/properties/scopes/items'],
  ['ENFORCEMENTS', 'Enforcement', 'values', 'GET /v1/settings 200 /properties/policy/properties/enforcement'],
  ['NOTICE_KINDS', 'NoticeKind', 'values', 'GET /v1/settings 200 /properties/policy/properties/notices/items'],
  [
    'HISTORY_EFFECTS',
    'HistoryEffect',
    'values',
    'GET /v1/subscribers/{customerId} 200 /properties/history/items/properties/effect',
  ],
  [
    'HISTORY_SOURCES',
    'HistorySource',
    'values',
    'GET /v1/subscribers/{customerId} 200 /properties/history/items/properties/source',
  ],
  [
    'POLICY_RULES',
    'PolicyRule',
    'values',
    'GET /v1/subscribers/{customerId} 200 /properties/history/items/properties/policy_rule',
  ],
  [
    'ADMIN_ACTIONS',
    'AdminAction',
    'values',
    'GET /v1/subscribers/{customerId} 200 /properties/history/items/properties/admin_action',
  ],
  [
    'EPISODE_STATES',
    'EpisodeState',
    'values',
    'GET /v1/subscribers/{customerId} 200 /properties/episodes/items/properties/state',
  ],
  ['DELIVERY_STATES', 'DeliveryState', 'values', 'GET /v1/webhook-endpoints/{endpointId}/messages query state'],
  [
    'DELIVERY_OUTCOMES',
    'DeliveryOutcome',
    'values',
    'GET /v1/webhook-endpoints/{endpointId}/attempts 200 /properties/data/items/properties/outcome',
  ],
  [
    'DOWNSTREAM_EVENT_TYPES',
    'DownstreamEventType',
    'values',
    'POST /v1/webhook-endpoints body /properties/event_types/items',
  ],
  [
    'ENDPOINT_DISABLED_REASONS',
    'EndpointDisabledReason',
    'values',
    'GET /v1/webhook-endpoints 200 /properties/data/items/properties/disabled_reason',
  ],
  ['ANALYTICS_GRANULARITIES', 'AnalyticsGranularity', 'values', 'GET /v1/analytics/recovery query granularity'],
  ['RUN_OUTCOMES', 'RunOutcome', 'keys', 'GET /v1/analytics/recovery 200 /properties/outcomes'],
  ['DECLINE_CLASSES', 'DeclineClass', 'keys', 'GET /v1/analytics/recovery 200 /properties/decline_mix'],
  [
    'STRIPE_EVENT_OUTCOMES',
    'StripeEventOutcome',
    'keys',
    'POST /admin/v1/tenants/{slug}/stripe-events 200 /properties/outcomes',
  ],
  ['BRANDING_COLORS', 'BrandingColor', 'keys', 'GET /v1/settings 200 /properties/branding/properties/colors'],
  [
    'BRANDING_TEXT_KEYS',
    'BrandingTextKey',
    'keys',
    'GET /v1/settings 200 /properties/branding/properties/texts/additionalProperties',
  ],
  [
    'CREDENTIAL_CHANGE_BY',
    'CredentialChangeBy',
    'values',
    'GET /v1/health 200 /properties/stripe_webhook_secret/properties/changes/items/properties/by',
  ],
  ['PROBLEM_CODES', 'ProblemCode', 'values', '#/components/schemas/def-0 /properties/code'],
];

/** The patterns of the service's identifiers and names, as the document gives them (JavaScript RegExp sources). */
const PATTERNS = [
  ['SLUG_PATTERN', 'Tenant slug', 'GET /admin/v1/tenants/{slug} path slug'],
  ['CUSTOMER_ID_PATTERN', "A Stripe customer's id", 'GET /v1/subscribers/{customerId} path customerId'],
  ['REASON_PATTERN', "An override's reason", 'PUT /v1/subscribers/{customerId}/override body /properties/reason'],
  ['KEY_NAME_PATTERN', "A secret key's name", 'POST /v1/keys body /properties/name'],
  [
    'STRIPE_WEBHOOK_SECRET_PATTERN',
    "A Stripe endpoint's signing secret",
    'PUT /v1/settings/stripe-webhook-secret body /properties/secret',
  ],
  [
    'COLOR_PATTERN',
    'A branding color',
    'GET /v1/settings 200 /properties/branding/properties/colors/properties/accent',
  ],
  ['ENDPOINT_ID_PATTERN', "An endpoint's id", 'GET /v1/webhook-endpoints/{endpointId} path endpointId'],
  [
    'MESSAGE_ID_PATTERN',
    "A message's id",
    'POST /v1/webhook-endpoints/{endpointId}/messages/{messageId}/retry path messageId',
  ],
];

// --- finding a schema in the document ------------------------------------------------------

const unescapePointer = (part) => part.replaceAll('~1', '/').replaceAll('~0', '~');

function pointer(schema, path, where) {
  let at = schema;
  for (const part of path.split('/').slice(1)) {
    at = at?.[unescapePointer(part)];
    if (at === undefined) throw new Error(`wire: ${where}: nothing at ${path}`);
  }
  return at;
}

/** The schema at `where`: `#/components/...`, `METHOD path STATUS|body`, `METHOD path query|path NAME`, then an optional pointer. */
function locate(doc, where) {
  if (where.startsWith('#/')) {
    const [ref, inner] = where.split(' ');
    return inner ? pointer(pointer(doc, ref.slice(1), where), inner, where) : pointer(doc, ref.slice(1), where);
  }
  const [method, path, what, rest] = where.split(' ');
  const operation = doc.paths?.[path]?.[method.toLowerCase()];
  if (!operation) throw new Error(`wire: ${where}: the document has no ${method} ${path}`);
  let schema;
  let inner = rest;
  if (what === 'body') {
    schema = operation.requestBody?.content?.['application/json']?.schema;
    inner = rest;
  } else if (what === 'query' || what === 'path') {
    schema = operation.parameters?.find((p) => p.in === what && p.name === rest)?.schema;
    inner = undefined;
  } else {
    schema = operation.responses?.[what]?.content?.['application/json']?.schema;
  }
  if (!schema) throw new Error(`wire: ${where}: the document has no such schema`);
  return inner ? pointer(schema, inner, where) : schema;
}

// --- JSON Schema to TypeScript ---------------------------------------------------------------

/** A schema's text for comparing, descriptions and titles aside. */
function shape(schema) {
  return JSON.stringify(schema, (key, value) => {
    if (value && typeof value === 'object' && !Array.isArray(value)) {
      const out = {};
      for (const k of Object.keys(value).sort()) if (k !== 'description' && k !== 'title') out[k] = value[k];
      return out;
    }
    return value;
  });
}

/** The string values of an enum schema (a union of literals, maybe with null); null when it is not one. */
function stringValues(schema) {
  if (typeof schema.const === 'string') return [schema.const];
  if (Array.isArray(schema.enum) && schema.enum.every((v) => typeof v === 'string')) return [...schema.enum];
  const members = schema.anyOf ?? schema.oneOf;
  if (!Array.isArray(members)) return null;
  const values = [];
  for (const m of members) {
    if (m.type === 'null') continue;
    const inner = stringValues(m);
    if (inner === null) return null;
    values.push(...inner);
  }
  return values.length > 0 ? values : null;
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;
const key = (name) => (IDENTIFIER.test(name) ? name : JSON.stringify(name));
const comment = (text, pad) =>
  text
    ? `${pad}/** ${String(text)
        .replaceAll('*/', '*\\/')
        .replace(/\s*\n\s*/g, ' ')} */\n`
    : '';

class Writer {
  constructor(doc) {
    this.doc = doc;
    /** shape -> type name */
    this.names = new Map();
    /** sorted values -> vocabulary type name */
    this.vocabularies = new Map();
  }

  /** The TypeScript of a schema; `top` is the named type being written (never written by its own name). */
  type(schema, pad, top = null) {
    if (schema.$ref) return this.type(locate(this.doc, schema.$ref), pad, top);
    if (schema !== top && (schema.type === 'object' || schema.type === 'array' || schema.allOf)) {
      const name = this.names.get(shape(schema));
      if (name) return name;
    }
    const values = stringValues(schema);
    if (values) {
      const nullable = (schema.anyOf ?? schema.oneOf ?? []).some((m) => m.type === 'null');
      const vocabulary = this.vocabularies.get(JSON.stringify([...values].sort()));
      const union = vocabulary ?? values.map((v) => JSON.stringify(v)).join(' | ');
      return nullable ? `${union} | null` : union;
    }
    if (schema.anyOf || schema.oneOf) {
      const members = (schema.anyOf ?? schema.oneOf).map((m) => this.type(m, pad));
      return [...new Set(members)].join(' | ');
    }
    if (schema.allOf) return schema.allOf.map((m) => this.type(m, pad)).join(' & ');
    if (Array.isArray(schema.type)) return schema.type.map((t) => this.type({ ...schema, type: t }, pad)).join(' | ');
    switch (schema.type) {
      case 'string':
        return 'string';
      case 'integer':
      case 'number':
        return 'number';
      case 'boolean':
        return 'boolean';
      case 'null':
        return 'null';
      case 'array': {
        const item = schema.items ? this.type(schema.items, pad) : 'unknown';
        return /[|&]/.test(item) ? `(${item})[]` : `${item}[]`;
      }
      case 'object':
        return this.object(schema, pad);
      default:
        return 'unknown';
    }
  }

  object(schema, pad) {
    const properties = Object.entries(schema.properties ?? {});
    const extra =
      schema.patternProperties !== undefined
        ? Object.values(schema.patternProperties)[0]
        : typeof schema.additionalProperties === 'object'
          ? schema.additionalProperties
          : null;
    if (properties.length === 0) {
      if (extra) return `Record<string, ${this.type(extra, pad)}>`;
      return schema.additionalProperties === false ? 'Record<string, never>' : 'Record<string, unknown>';
    }
    const required = new Set(schema.required ?? []);
    const inner = `${pad}  `;
    const lines = properties.map(
      ([name, s]) =>
        `${comment(s.description, inner)}${inner}${key(name)}${required.has(name) ? '' : '?'}: ${this.type(s, inner)};`,
    );
    return `{\n${lines.join('\n')}\n${pad}}`;
  }
}

/** The module's text for an OpenAPI document. */
export function wireModule(doc) {
  const writer = new Writer(doc);
  const out = [
    '// Generated by scripts/wire-types.mjs from the OpenAPI document: do not edit, run `npm run build`.',
    '// The schemas of src/http/schemas.ts are the only definition of what crosses the network (docs/api.md).',
    '',
    '// --- vocabularies -----------------------------------------------------------------------------',
    '',
  ];
  for (const [name, typeName, kind, where] of VOCABULARIES) {
    const schema = locate(doc, where);
    const values =
      kind === 'keys'
        ? Object.keys(schema.properties ?? {})
        : (stringValues(schema) ?? stringValues(schema.items ?? {}) ?? []);
    if (values.length === 0) throw new Error(`wire: ${where}: no ${kind} for ${name}`);
    out.push(`export const ${name} = ${JSON.stringify(values).replaceAll('","', '", "')} as const;`);
    out.push(`export type ${typeName} = (typeof ${name})[number];`);
    writer.vocabularies.set(JSON.stringify([...values].sort()), typeName);
  }
  out.push('', '// --- patterns (RegExp sources) -------------------------------------------------------------', '');
  for (const [name, description, where] of PATTERNS) {
    const schema = locate(doc, where);
    if (typeof schema.pattern !== 'string') throw new Error(`wire: ${where}: no pattern for ${name}`);
    out.push(`/** ${description} */`, `export const ${name} = ${JSON.stringify(schema.pattern)};`);
  }
  out.push(
    '',
    '// --- types -------------------------------------------------------------------------------------',
    '',
  );
  const located = TYPES.map(([name, where, description]) => [name, locate(doc, where), description]);
  for (const [name, schema] of located) {
    const text = shape(schema.$ref ? locate(doc, schema.$ref) : schema);
    if (!writer.names.has(text)) writer.names.set(text, name);
  }
  for (const [name, schema, description] of located) {
    const target = schema.$ref ? locate(doc, schema.$ref) : schema;
    out.push(`/** ${description} */`, `export type ${name} = ${writer.type(target, '', target)};`, '');
  }
  return `${out.join('\n').trimEnd()}\n`;
}

// --- command line ------------------------------------------------------------------------------

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** The module's text, formatted as the repository formats TypeScript. */
export async function formattedWireModule(doc) {
  const prettier = await import('prettier');
  const options = (await prettier.resolveConfig(join(root, WIRE_TARGETS[0]))) ?? {};
  return prettier.format(wireModule(doc), { ...options, parser: 'typescript' });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const check = process.argv.includes('--check');
  const doc = JSON.parse(readFileSync(join(root, 'dist', 'openapi.json'), 'utf8'));
  const text = await formattedWireModule(doc);
  const stale = [];
  let written = 0;
  for (const target of WIRE_TARGETS) {
    const path = join(root, target);
    const current = existsSync(path) ? readFileSync(path, 'utf8') : null;
    if (current === text) continue;
    if (check) stale.push(target);
    else {
      writeFileSync(path, text);
      written += 1;
    }
  }
  if (stale.length > 0) {
    process.stderr.write(`wire: ${stale.join(', ')} differ from dist/openapi.json: run npm run build\n`);
    process.exit(1);
  }
  process.stderr.write(
    check
      ? `wire: ${WIRE_TARGETS.length} copies match dist/openapi.json\n`
      : `wire: ${written} of ${WIRE_TARGETS.length} copies rewritten from dist/openapi.json\n`,
  );
}
