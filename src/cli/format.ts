import type {
  AttemptListView,
  EndpointListView,
  EndpointView,
  EndpointWithSecretView,
  MessageListView,
  RotatedTenantView,
  SecretKeyView,
  SecretKeyWithSecretView,
  StripeApiKeyStateView,
  SubscriberPageView,
  SubscriberView,
  TenantDetailView,
  TenantView,
  TenantWithKeysView,
  TierView,
} from './client.js';

const NAMED_FLAG_ORDER = ['powered_by_watermark', 'custom_domain', 'downstream_webhooks'];

/** `key: value` lines, values aligned in one column. */
export function keyValues(rows: ReadonlyArray<readonly [string, string]>): string {
  const width = Math.max(0, ...rows.map(([key]) => key.length + 1));
  return rows.map(([key, value]) => `${`${key}:`.padEnd(width)}  ${value}`.trimEnd()).join('\n');
}

/** A plain text table: a header line, then one line per row, columns padded to their widest cell. */
export function table(headers: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/** Named flags first, in the contract's order, then the others alphabetically. */
export function flagOrder(flags: Iterable<string>): string[] {
  const all = new Set(flags);
  const named = NAMED_FLAG_ORDER.filter((f) => all.has(f));
  const others = [...all].filter((f) => !NAMED_FLAG_ORDER.includes(f)).sort();
  return [...named, ...others];
}

export function entitlements(flags: Record<string, boolean>): string {
  const names = flagOrder(Object.keys(flags));
  return names.length === 0 ? '(none)' : names.map((name) => `${name}=${String(flags[name])}`).join(' ');
}

function orNone(value: string | null, none: string): string {
  return value === null || value === '' ? none : value;
}

/** `payment link, support link, logo, colors, texts: default, fr` or `(snippet defaults)`. */
function brandingSummary(b: TenantView['branding']): string {
  const parts = [
    ...(b.payment_url ? ['payment link'] : []),
    ...(b.support_url ? ['support link'] : []),
    ...(b.logo_url ? ['logo'] : []),
    ...(b.colors && Object.keys(b.colors).length > 0 ? ['colors'] : []),
    ...(b.texts && Object.keys(b.texts).length > 0
      ? [
          `texts: ${Object.keys(b.texts)
            .sort((x, y) => (x === 'default' ? -1 : y === 'default' ? 1 : x.localeCompare(y)))
            .join(', ')}`,
        ]
      : []),
  ];
  return parts.length === 0 ? '(snippet defaults)' : parts.join(', ');
}

export function policySummary(p: TenantView['policy']): string {
  const grace = p.grace_days === 0 ? 'no grace' : `grace ${p.grace_days} day${p.grace_days === 1 ? '' : 's'}`;
  const escalate =
    p.escalate_after_days === null
      ? 'no escalation'
      : `escalate after ${p.escalate_after_days} day${p.escalate_after_days === 1 ? '' : 's'}`;
  const notices = p.notices === undefined || p.notices.length === 0 ? '' : `, notices: ${p.notices.join(', ')}`;
  return `${p.enforcement}, ${grace}, ${escalate}${notices}`;
}

function tenantRows(t: TenantView): [string, string][] {
  return [
    ['slug', t.slug],
    ['tier', t.tier],
    ['entitlements', entitlements(t.entitlements)],
    ['card_update_url', orNone(t.card_update_url, '(none)')],
    ['hmac_required', String(t.hmac_required)],
    ['suspended', String(t.suspended)],
    ['allowed_origins', t.allowed_origins === null ? '(any)' : t.allowed_origins.join(', ')],
    ['lookups_per_minute', t.lookups_per_minute === null ? '(default)' : String(t.lookups_per_minute)],
    ['branding', brandingSummary(t.branding)],
    ['policy', policySummary(t.policy)],
    [
      'livemode',
      t.livemode === null
        ? 'null (live and test events)'
        : t.livemode
          ? 'true (live events only)'
          : 'false (test events only)',
    ],
    ['created_at', t.created_at],
    ['updated_at', t.updated_at],
  ];
}

export function formatTenant(t: TenantView): string {
  return keyValues(tenantRows(t));
}

const ONCE_BANNER = '!! Shown only once: store these now, Dunwall cannot show them again. !!';

export function formatCreatedTenant(t: TenantWithKeysView): string {
  return [
    formatTenant(t),
    '',
    ONCE_BANNER,
    keyValues([
      ['publishable_key', t.publishable_key],
      ['test_publishable_key', t.test_publishable_key],
      ['hmac_secret', t.hmac_secret],
    ]),
  ].join('\n');
}

export function formatRotated(r: RotatedTenantView): string {
  const rows: [string, string][] = [['tenant', r.slug]];
  if (r.publishable_key !== undefined) rows.push(['publishable_key', r.publishable_key]);
  if (r.hmac_secret !== undefined) rows.push(['hmac_secret', r.hmac_secret]);
  rows.push(['previous_expires_at', `${r.previous_expires_at} (the replaced key works until then)`]);
  return [ONCE_BANNER, keyValues(rows)].join('\n');
}

export function formatTenantList(tenants: readonly TenantView[]): string {
  if (tenants.length === 0) return 'no tenants';
  return table(
    ['SLUG', 'TIER', 'SUSPENDED', 'HMAC_REQUIRED', 'CARD_UPDATE_URL', 'CREATED_AT'],
    tenants.map((t) => [
      t.slug,
      t.tier,
      String(t.suspended),
      String(t.hmac_required),
      orNone(t.card_update_url, '-'),
      t.created_at,
    ]),
  );
}

function subscriberRows(s: SubscriberView): [string, string][] {
  return [
    ['processor_customer_id', s.processor_customer_id],
    ['status', s.status ?? '(no record: unknown, so the lookup answers active)'],
    ['reason', orNone(s.reason, '-')],
    ...(s.overridden_at !== null
      ? [['overridden_at', `${s.overridden_at} (set by hand; a later Stripe event ends it)`] as [string, string]]
      : []),
    ['updated_at', orNone(s.updated_at, '-')],
  ];
}

const CREDENTIAL_LABELS: Record<TenantDetailView['credentials'][number]['kind'], string> = {
  publishable_key: 'publishable key',
  hmac_secret: 'HMAC secret',
  stripe_webhook_secret: 'Stripe signing secret',
};

/** `tenant show`: the tenant, its subscribers by status, and its credentials in force (never their values). */
export function formatTenantDetail(t: TenantDetailView): string {
  const counts = t.subscriber_counts;
  const credentials = t.credentials.map(
    (c) =>
      `${CREDENTIAL_LABELS[c.kind]} (${c.expires_at === null ? 'current' : `replaced, works until ${c.expires_at}`})`,
  );
  return keyValues([
    ...tenantRows(t),
    [
      'subscribers',
      `${counts.active + counts.warning + counts.lockout} (active ${counts.active}, warning ${counts.warning}, lockout ${counts.lockout})`,
    ],
    [
      'derived',
      `before the policy: active ${t.derived_subscriber_counts.active}, warning ${t.derived_subscriber_counts.warning}, lockout ${t.derived_subscriber_counts.lockout}`,
    ],
    [
      'stripe_webhook',
      t.stripe_webhook_secret_set ? 'signing secret set' : 'no signing secret: deliveries answer 400 invalid_signature',
    ],
    [
      'stripe_api_key',
      t.stripe_api_key === null
        ? 'none: pay and card links are the stored Stripe pages'
        : `${t.stripe_api_key.prefix}... set ${t.stripe_api_key.set_at}`,
    ],
    ['credentials', credentials.join(', ')],
  ]);
}

/** `tenant update --stripe-api-key`: the mode's key as it is now (its prefix, never the key) and who changed it. */
export function formatStripeApiKeyState(s: StripeApiKeyStateView): string {
  const last = s.changes[0];
  return keyValues([
    ['mode', s.mode],
    [
      'stripe_api_key',
      s.stripe_api_key === null ? 'none' : `${s.stripe_api_key.prefix}... set ${s.stripe_api_key.set_at}`,
    ],
    ...(last === undefined
      ? []
      : [
          [
            'last_change',
            `${last.at} by ${last.key === null ? 'the operator' : `key ${last.key.prefix} (${last.key.name})`}`,
          ] as [string, string],
        ]),
  ]);
}

/** STATUS is what the lookup answers; DERIVED what Stripe's events (or an override) give, before the policy. */
export function formatSubscriberPage(rows: SubscriberPageView['data']): string {
  if (rows.length === 0) return 'no subscribers match';
  return table(
    ['CUSTOMER', 'STATUS', 'DERIVED', 'REASON', 'UPDATED'],
    rows.map((r) => [r.processor_customer_id, r.status, r.derived_status, r.reason, r.updated_at]),
  );
}

export function formatSubscriber(s: SubscriberView): string {
  return keyValues(subscriberRows(s));
}

export function formatSubscriberWithHistory(s: SubscriberView): string {
  const episodes =
    s.episodes.length === 0
      ? 'episodes: (none)'
      : table(
          ['EPISODE', 'STATE', 'REASON', 'SINCE', 'EVENT', 'DECLINE_CODE'],
          s.episodes.map((e) => [e.episode, e.state, e.reason, e.at, e.event_id, orNone(e.decline_code, '-')]),
        );
  const history =
    s.history.length === 0
      ? 'history: (empty)'
      : table(
          ['WHEN', 'STATUS', 'REASON', 'SOURCE', 'EVENT', 'DECLINE_CODE'],
          s.history.map((h) => [
            h.occurred_at,
            h.effect === 'none' ? `${h.status ?? '(unknown)'}, unchanged` : (h.status ?? '(removed)'),
            orNone(h.reason, '-'),
            h.source,
            h.event_id === null ? '-' : `${h.event_id}${h.event_type === null ? '' : ` (${h.event_type})`}`,
            orNone(h.decline_code, '-'),
          ]),
        );
  return [formatSubscriber(s), '', episodes, '', history].join('\n');
}

export function formatTier(t: TierView): string {
  return keyValues([
    ['name', t.name],
    ['entitlements', entitlements(t.entitlements)],
    ['updated_at', t.updated_at],
  ]);
}

/** One column per flag found on any tier; `-` where a tier lacks it. */
export function formatTierList(tiers: readonly TierView[]): string {
  if (tiers.length === 0) return 'no tiers';
  const flags = flagOrder(tiers.flatMap((t) => Object.keys(t.entitlements)));
  return table(
    ['NAME', ...flags.map((f) => f.toUpperCase())],
    tiers.map((t) => [
      t.name,
      ...flags.map((f) => (t.entitlements[f] === undefined ? '-' : String(t.entitlements[f]))),
    ]),
  );
}

/** An endpoint of downstream webhooks: where, what, and whether it is sent anything. */
export function formatEndpoint(e: EndpointView | EndpointWithSecretView): string {
  const rows: [string, string][] = [
    ['id', e.id],
    ['url', e.url],
    ['description', orNone(e.description, '(none)')],
    ['events', e.event_types === null ? 'all' : e.event_types.join(', ')],
    [
      'enabled',
      e.enabled
        ? 'yes'
        : `no: ${e.disabled_reason ?? ''}${e.disabled_detail ? ` (${e.disabled_detail})` : ''} since ${e.disabled_at ?? '?'}`,
    ],
    ['failing_since', orNone(e.failing_since, '-')],
    ['pending', String(e.pending)],
    [
      'signing_secrets',
      e.signing_secrets
        .map((s) => (s.expires_at === null ? `current since ${s.created_at}` : `replaced, signs until ${s.expires_at}`))
        .join('; '),
    ],
  ];
  if ('secret' in e) rows.push(['secret', `${e.secret}  (shown once: give it to the receiver now)`]);
  return keyValues(rows);
}

export function formatEndpointList(list: EndpointListView): string {
  if (list.data.length === 0) return 'no webhook endpoints';
  return table(
    ['ID', 'ENABLED', 'PENDING', 'EVENTS', 'URL'],
    list.data.map((e) => [
      e.id,
      e.enabled ? 'yes' : `no (${e.disabled_reason ?? ''})`,
      String(e.pending),
      e.event_types === null ? 'all' : e.event_types.join(','),
      e.url,
    ]),
  );
}

export function formatAttempts(list: AttemptListView): string {
  if (list.data.length === 0) return 'no attempts';
  return table(
    ['AT', 'MESSAGE', 'OUTCOME', 'STATUS', 'MS', 'ERROR'],
    list.data.map((a) => [
      a.attempted_at,
      a.message_id,
      a.outcome,
      a.status_code === null ? '-' : String(a.status_code),
      String(a.latency_ms),
      a.error ?? '',
    ]),
  );
}

export function formatMessages(list: MessageListView): string {
  if (list.data.length === 0) return 'no messages';
  return table(
    ['CREATED', 'MESSAGE', 'TYPE', 'CUSTOMER', 'SEQ', 'STATE', 'ATTEMPTS', 'NEXT', 'LAST ERROR'],
    list.data.map((m) => [
      m.created_at,
      m.message_id,
      m.type,
      m.processor_customer_id,
      String(m.sequence),
      m.state,
      String(m.attempts),
      m.next_attempt_at ?? '-',
      m.last_error ?? '',
    ]),
  );
}

/** A tenant secret key (docs/tenant-api.md): never its secret, which only creation and rotation show. */
function secretKeyRows(k: SecretKeyView): [string, string][] {
  return [
    ['id', k.id],
    ['name', k.name],
    ['scopes', k.scopes.join(', ')],
    ['prefix', k.prefix],
    ['created_at', k.created_at],
    ['expires_at', orNone(k.expires_at, 'never')],
    ['last_used_at', orNone(k.last_used_at, 'never (recorded about once a minute)')],
  ];
}

const KEY_ONCE_BANNER = '!! Shown only once: store the secret key now, Dunwall cannot show it again. !!';

/** `key create` and `key rotate`: the key, then its secret under the banner (and, after a rotation, until when the replaced one works). */
export function formatKeyWithSecret(k: SecretKeyWithSecretView, rotated: boolean): string {
  const replaced: [string, string][] = !rotated
    ? []
    : [
        [
          'previous_expires_at',
          k.previous_expires_at === null
            ? 'none (the replaced secret stopped working at once)'
            : `${k.previous_expires_at} (the replaced secret works until then)`,
        ],
      ];
  return [
    keyValues(secretKeyRows(k)),
    '',
    KEY_ONCE_BANNER,
    keyValues([['secret_key', k.secret_key], ...replaced]),
  ].join('\n');
}

export function formatKeyList(keys: readonly SecretKeyView[]): string {
  if (keys.length === 0) return 'no secret keys';
  return table(
    ['ID', 'NAME', 'SCOPES', 'PREFIX', 'CREATED', 'EXPIRES', 'LAST USED'],
    keys.map((k) => [
      k.id,
      k.name,
      k.scopes.join(','),
      k.prefix,
      k.created_at,
      orNone(k.expires_at, 'never'),
      orNone(k.last_used_at, 'never'),
    ]),
  );
}
