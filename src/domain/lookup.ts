import { createHash, timingSafeEqual } from 'node:crypto';
import { HmacKey, verifyHmac } from './hmac.js';
import { formatLockoutAt } from './policy.js';
import { looksLikeSecretKey, SECRET_KEY_PREFIX_CHARS, sha256 } from './keys.js';
import { checkSecretKey, findSecretKey } from './secret-keys.js';
import { CUSTOMER_ID_RE, SLUG_RE, isCurrent } from './types.js';
import type { Credential, SubscriberStatus, TenantAuth, TenantAuthFields } from './types.js';

/** RFC 6750 b64token, after a case-insensitive `Bearer` and one or more spaces. */
const BEARER_RE = /^bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

/** The codes of the lookup's checks, in their order (docs/reference.md#the-lookup). */
export type LookupFailure =
  | 'missing_publishable_key'
  | 'invalid_publishable_key'
  | 'tenant_not_found'
  | 'tenant_suspended'
  | 'missing_processor_customer_id'
  | 'invalid_processor_customer_id'
  | 'hmac_mismatch'
  | 'hmac_required'
  | 'invalid_secret_key'
  | 'insufficient_scope'
  | 'secret_key_in_browser';

export type BearerResult = { ok: true; token: string } | { ok: false; code: 'missing' | 'malformed' };

export function parseBearer(header: string | undefined): BearerResult {
  if (header === undefined || header.trim() === '') return { ok: false, code: 'missing' };
  const match = BEARER_RE.exec(header);
  return match?.[1] ? { ok: true, token: match[1] } : { ok: false, code: 'malformed' };
}

/**
 * Check 1: the header alone, before anything is looked up; several headers (`authorizationOf`)
 * are invalid. The codes default to the lookup's; the admin API passes its own.
 */
export function checkBearer<Code extends string = LookupFailure>(
  header: string | readonly string[] | undefined,
  missing: Code = 'missing_publishable_key' as Code,
  invalid: Code = 'invalid_publishable_key' as Code,
): { ok: true; token: string } | { ok: false; code: Code } {
  // More than one Authorization header: the contract's one token is not there to pick.
  if (typeof header !== 'string' && header !== undefined) return { ok: false, code: invalid };
  const bearer = parseBearer(header);
  if (bearer.ok) return bearer;
  return { ok: false, code: bearer.code === 'missing' ? missing : invalid };
}

export interface LookupRequest {
  /** The bearer token, once check 1 has passed. */
  token: string;
  /** The query's two parameters: a repeated one arrives as an array. */
  query: { readonly processor_customer_id?: unknown; readonly hmac?: unknown; readonly preview?: unknown };
  /** The request's `Origin`: a secret key is never accepted from a browser. */
  origin?: string | undefined;
}

/**
 * `signed`: the lookup carried a valid `hmac` or a secret key, so its answer may name the invoice to pay.
 * `keyId`: the secret key that authenticated it (null: a publishable key).
 * `preview`: a test-mode lookup asked to see that status (docs/reference.md#modes).
 */
export type LookupCheck =
  | {
      ok: true;
      customerId: string;
      signed: boolean;
      preview: PreviewStatus | null;
      keyId: string | null;
      /** The data space the key addresses (the tenant's own, or its `twin`): whose subscribers answer. */
      space: TenantAuth;
    }
  | { ok: false; code: LookupFailure; leaked?: LeakedKey };

/**
 * A current secret key of the tenant, sent from a browser: refused, and named so that it can
 * be marked and the tenant told to rotate it. `prefix`: the key's first characters, as the
 * key list shows them (never more of it).
 */
export interface LeakedKey {
  id: string;
  prefix: string;
}

export const PREVIEW_STATUSES = ['warning', 'lockout'] as const;
export type PreviewStatus = (typeof PREVIEW_STATUSES)[number];
/** How far ahead a previewed warning's lockout is shown. */
export const PREVIEW_LOCKOUT_AHEAD_MS = 7 * 86_400_000;

/** The previewed status a test-mode lookup asks for; null in live mode or for any other value (an unknown parameter). */
function previewOf(space: TenantAuth, value: unknown): PreviewStatus | null {
  if (space.mode !== 'test') return null;
  return value === 'warning' || value === 'lockout' ? value : null;
}

export function isValidSlug(slug: string): boolean {
  return SLUG_RE.test(slug);
}

/**
 * docs/api.md, the lookup, checks 2 to 6 in their order, as a value (check 1 is
 * `checkBearer`). `tenant` is what the store (or a cache) holds for the slug, null when
 * there is none.
 */
export function checkLookup(req: LookupRequest, tenant: TenantAuth | null, nowMs: number): LookupCheck {
  if (tenant === null) return { ok: false, code: 'tenant_not_found' };
  // A secret key (docs/reference.md#keys-and-scopes) stands in for the publishable key and the hmac, from a server only.
  // Each key addresses one of the tenant's two spaces (docs/test-mode.md): the space it is found in.
  let keyId: string | null = null;
  let space: TenantAuth = tenant;
  const twin = tenant.twin;
  if (looksLikeSecretKey(req.token)) {
    if (req.origin !== undefined) {
      // Refused whatever the key is; one of this tenant's is named, found by digest in constant time.
      const digest = sha256(req.token);
      const key =
        findSecretKey(tenant.secretKeys, digest, nowMs) ??
        (twin === null ? null : findSecretKey(twin.secretKeys, digest, nowMs));
      return key === null
        ? { ok: false, code: 'secret_key_in_browser' }
        : {
            ok: false,
            code: 'secret_key_in_browser',
            leaked: { id: key.id, prefix: req.token.slice(0, SECRET_KEY_PREFIX_CHARS) },
          };
    }
    let key = checkSecretKey(tenant.secretKeys, req.token, 'status:read', nowMs);
    if (!key.ok && key.code === 'invalid_secret_key' && twin !== null) {
      const other = checkSecretKey(twin.secretKeys, req.token, 'status:read', nowMs);
      if (other.ok || other.code !== 'invalid_secret_key') [key, space] = [other, twin];
    }
    if (!key.ok) return key;
    keyId = key.key.id;
  } else {
    const found = spaceOfKey(tenant, req.token, nowMs);
    if (found === null) return { ok: false, code: 'invalid_publishable_key' };
    space = found;
  }
  if (tenant.suspended) return { ok: false, code: 'tenant_suspended' };

  const customerId = req.query.processor_customer_id;
  if (customerId === undefined) return { ok: false, code: 'missing_processor_customer_id' };
  if (typeof customerId !== 'string' || !CUSTOMER_ID_RE.test(customerId)) {
    return { ok: false, code: 'invalid_processor_customer_id' };
  }

  const preview = req.query.preview === undefined ? null : previewOf(space, req.query.preview);
  if (keyId !== null) return { ok: true, customerId, signed: true, preview, keyId, space };
  const hmac = req.query.hmac;
  if (hmac === undefined) {
    // A preview shows sample data only: it needs no hmac.
    return tenant.hmacRequired && preview === null
      ? { ok: false, code: 'hmac_required' }
      : { ok: true, customerId, signed: false, preview, keyId: null, space };
  }
  if (typeof hmac !== 'string' || !verifyHmac(hmac, customerId, tenant.hmacKeys, nowMs))
    return { ok: false, code: 'hmac_mismatch' };
  return { ok: true, customerId, signed: true, preview, keyId: null, space };
}

/**
 * The space a publishable key addresses (the tenant's own or its twin), null: none. The
 * presented key is hashed and compared, digest to digest, with every key hash of both
 * spaces. A key that verified is remembered, on its space, with its expiry: publishable keys
 * are public (they sit in page source), and only the tenant's own keys can ever be
 * remembered. Both spaces' remembered keys are asked before any hashing.
 */
function spaceOfKey(tenant: TenantAuth, token: string, nowMs: number): TenantAuth | null {
  const accepted = tenant.acceptedKeys.get(token);
  if (accepted !== undefined) return accepted === null || accepted > nowMs ? tenant : null;
  const twin = tenant.twin;
  if (twin !== null) {
    const acceptedTwin = twin.acceptedKeys.get(token);
    if (acceptedTwin !== undefined) return acceptedTwin === null || acceptedTwin > nowMs ? twin : null;
  }
  const digest = sha256(token);
  if (isSpaceKey(tenant, token, digest, nowMs)) return tenant;
  return twin !== null && isSpaceKey(twin, token, digest, nowMs) ? twin : null;
}

function isSpaceKey(space: TenantAuth, token: string, digest: Buffer, nowMs: number): boolean {
  let match: Credential<Buffer> | undefined;
  for (const key of space.publishableKeyHashes) {
    if (timingSafeEqual(digest, key.value)) match = key;
  }
  if (match === undefined) return false;
  space.acceptedKeys.set(token, match.expiresAtMs);
  return isCurrent(match, nowMs);
}

export const UNKNOWN_SUBSCRIBER_BODY: Buffer = Buffer.from('{"status":"active"}');

export interface KnownSubscriberBody {
  status: SubscriberStatus;
  card_update_url: string | null;
  entitlements: Record<string, boolean>;
}

/**
 * The entity tag of a branding as served (its JSON bytes): a quoted 22-character digest.
 * Here, not beside the branding's rules, which the browser snippet bundles without node:crypto.
 */
export function brandingTag(body: Buffer): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 22)}"`;
}

/** The tenant as the lookup uses it: each status's 200 body serialised once (UTF-8 bytes), HMAC keys made once. */
export function prepareTenant(fields: TenantAuthFields): TenantAuth {
  const body = (status: SubscriberStatus): Buffer => {
    const b: KnownSubscriberBody = {
      status,
      card_update_url: status === 'warning' ? fields.cardUpdateUrl : null,
      entitlements: fields.entitlements,
    };
    return Buffer.from(JSON.stringify(b));
  };
  const { hmacSecrets, tenantId, mode, twin, ...rest } = fields;
  const brandingBody = Buffer.from(JSON.stringify(fields.branding));
  const warning = body('warning');
  const lockout = body('lockout');
  return {
    ...rest,
    tenantId: tenantId ?? fields.id,
    mode: mode ?? 'live',
    twin: twin ?? null,
    hmacKeys: hmacSecrets.map((s) => ({ value: new HmacKey(s.value), expiresAtMs: s.expiresAtMs })),
    knownBodies: { active: body('active'), warning, lockout },
    // The same bodies without their closing brace: `lockout_at` and `pay_url` follow.
    knownPrefixes: {
      warning: warning.subarray(0, warning.length - 1),
      lockout: lockout.subarray(0, lockout.length - 1),
    },
    brandingBody,
    brandingEtag: brandingTag(brandingBody),
    acceptedKeys: new Map(),
  };
}

/** The 200 body, keys in the contract's order; null status: the subscriber is unknown. */
export function lookupBody(tenant: TenantAuth, status: SubscriberStatus | null): Buffer {
  if (status === null) return UNKNOWN_SUBSCRIBER_BODY;
  // Named reads, not `knownBodies[status]`: a read by a varying key is a slow lookup in V8.
  const bodies = tenant.knownBodies;
  return status === 'lockout' ? bodies.lockout : status === 'warning' ? bodies.warning : bodies.active;
}

/**
 * A test tenant's preview: the known-subscriber body of that status with the tenant's
 * entitlements, a lockout a week ahead for a warning, and the branding's payment link as the
 * pay link, so that a team sees its banner and gate before any card fails.
 */
export function previewBody(tenant: TenantAuth, preview: PreviewStatus, nowMs: number): Buffer {
  const prefix = preview === 'lockout' ? tenant.knownPrefixes.lockout : tenant.knownPrefixes.warning;
  const lockoutAt = preview === 'warning' ? `,"lockout_at":"${formatLockoutAt(nowMs + PREVIEW_LOCKOUT_AHEAD_MS)}"` : '';
  const payUrl =
    tenant.branding.payment_url === undefined ? '' : `,"pay_url":${JSON.stringify(tenant.branding.payment_url)}`;
  return Buffer.concat([prefix, Buffer.from(`${lockoutAt}${payUrl}}`)]);
}

/**
 * An active subscriber's signed answer with its card-expiring notice (docs/notices.md): the
 * known active body, with the tenant's own card update URL, else the customer's card link
 * through Dunwall (`cardUrl`, docs/links.md), so that the customer can act before the card
 * fails; then `notice`. Built when the notice or the tenant changes, never per lookup.
 */
export function noticeBody(tenant: TenantAuth, expires: string, cardUrl: string | null = null): Buffer {
  const body: KnownSubscriberBody & { notice: { kind: 'card_expiring'; expires: string } } = {
    status: 'active',
    card_update_url: tenant.cardUpdateUrl ?? cardUrl,
    entitlements: tenant.entitlements,
    notice: { kind: 'card_expiring', expires },
  };
  return Buffer.from(JSON.stringify(body));
}

/** What the read model holds beside a non-active subscriber's status (`lockoutAtS` 0: none scheduled). */
export interface AnswerExtra {
  readonly lockoutAtS: number;
  readonly payUrl: string | null;
  /** The customer's card link through Dunwall; a signed warning answers it unless the tenant has its own. */
  readonly cardUrl?: string | null;
}

/**
 * The answered body of a known subscriber at `nowMs` (docs/reference.md, the lookup and the policy): the
 * stored status, `lockout` once its scheduled lockout has come (every instance compares its
 * clock, before any write says so), then the tenant's enforcement applied again so that a
 * change of it reaches every answer at once. `lockout_at` while a lockout is scheduled;
 * `pay_url` only for a signed lookup, and so a warning's card link through Dunwall as its
 * `card_update_url` (when the tenant set no URL of its own). Without any, the prebuilt bytes.
 */
export function answerBody(
  tenant: TenantAuth,
  status: SubscriberStatus,
  extra: AnswerExtra | null,
  signed: boolean,
  nowMs: number,
): Buffer {
  const enforcement = tenant.enforcement;
  if (status === 'active' || enforcement === 'monitor') return tenant.knownBodies.active;
  let answered = status;
  let lockoutAtS = status === 'warning' && extra !== null ? extra.lockoutAtS : 0;
  if (lockoutAtS > 0 && nowMs >= lockoutAtS * 1000) {
    answered = 'lockout';
    lockoutAtS = 0;
  }
  if (enforcement === 'banner_only' && answered === 'lockout') {
    answered = 'warning';
    lockoutAtS = 0;
  }
  const payUrl = signed && extra !== null ? extra.payUrl : null;
  const cardUrl =
    signed && extra !== null && answered === 'warning' && tenant.cardUpdateUrl === null
      ? (extra.cardUrl ?? null)
      : null;
  if (lockoutAtS === 0 && payUrl === null && cardUrl === null) return lookupBody(tenant, answered);
  const prefix =
    cardUrl !== null
      ? cardWarningPrefix(tenant, cardUrl)
      : answered === 'lockout'
        ? tenant.knownPrefixes.lockout
        : tenant.knownPrefixes.warning;
  const rest = `${lockoutAtS === 0 ? '' : `,"lockout_at":"${formatLockoutAt(lockoutAtS * 1000)}"`}${payUrl === null ? '' : `,"pay_url":${JSON.stringify(payUrl)}`}}`;
  return Buffer.concat([prefix, Buffer.from(rest)]);
}

/** A warning's known body with the customer's card link, without its closing brace. */
function cardWarningPrefix(tenant: TenantAuth, cardUrl: string): Buffer {
  const body: KnownSubscriberBody = { status: 'warning', card_update_url: cardUrl, entitlements: tenant.entitlements };
  const json = JSON.stringify(body);
  return Buffer.from(json.slice(0, -1));
}

/**
 * The `Access-Control-Allow-Origin` value for a request from `origin`: `*` unless the tenant
 * restricts origins, then the origin itself when listed, else none.
 */
export function allowedOrigin(tenant: TenantAuth | null, origin: string | undefined): string | null {
  const list = tenant?.allowedOrigins;
  if (!list) return '*';
  return origin !== undefined && list.includes(origin) ? origin : null;
}
