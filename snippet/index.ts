/**
 * The Dunwall browser snippet. One tag:
 *   <script src="https://BASE/snippet.js" data-tenant="acme" data-key="pk_..."
 *           data-customer="cus_..." data-hmac="..." async></script>
 * or `Dunwall.check({...})` from a single-page app. It shows nothing for `active`, a
 * dismissable banner for `warning` and a full-screen gate for `lockout`, and nothing at all
 * on any error or timeout: it renders only from an answer, never from a guess.
 */
import { createClient } from '../packages/client/src/index.js';
import type { StatusResult } from '../packages/client/src/index.js';
import { resolveTexts } from '../src/domain/branding.js';
import type { Branding } from '../src/domain/branding.js';

export interface Texts {
  warning: string;
  update: string;
  dismiss: string;
  lockoutTitle: string;
  lockout: string;
  support: string;
  /** Shown on the gate when the tenant configured neither link. */
  noLink: string;
  /** The gate's link to pay (its `update` when not set). */
  pay?: string;
}

export interface Colors {
  accent: string;
  background: string;
  text: string;
  /** Set by the snippet: no page or branding chose a colour, so dark mode gets its own. */
  auto?: boolean;
}

export interface CheckOptions {
  tenant: string;
  /** The tenant's publishable key. */
  key: string;
  customer: string;
  hmac?: string | null;
  /** Where the Dunwall service is; default: where this file was loaded from. */
  baseUrl?: string;
  /** The tenant's support or contact page, linked from the gate. */
  supportUrl?: string | null;
  /** A card update page for the gate (the lookup gives one with warnings only). */
  cardUpdateUrl?: string | null;
  /** A logo shown on the gate (https). */
  logoUrl?: string | null;
  texts?: Partial<Texts>;
  colors?: Partial<Colors>;
  timeoutMs?: number;
  /** Where the banner goes: `top` (default) or `bottom` of the page. */
  position?: 'top' | 'bottom';
  /**
   * `push` (default): the page's content moves to make room (at the top, the banner is the
   * first thing in the page's flow, below a fixed header's padding); `overlay`: the banner
   * floats over the page.
   */
  mode?: 'push' | 'overlay';
  /** A selector: the banner is rendered inside this element of the page, in its flow. */
  mount?: string | null;
}

const DEFAULT_TEXTS: Texts = {
  warning: 'Your last payment did not go through. Please update your card to keep your access.',
  update: 'Update card',
  dismiss: 'Dismiss',
  lockoutTitle: 'Your account is on hold',
  lockout: 'We could not collect your last payment. Please update your payment method to continue.',
  support: 'Contact support',
  noLink: 'Please contact the support team of this service to restore your access.',
};
const DEFAULT_COLORS: Colors = { accent: '#b42318', background: '#fff8f6', text: '#1d2939' };

const HOST_TAG = 'dunwall-enforcement';
// No answer cache: a customer who has just paid must be let in by the very next check.
// Concurrent checks still share one request.
const client = createClient({ cacheTtlMs: 0 });
let current: { host: HTMLElement; release: () => void; customer: string } | null = null;
/** Bumped by every check and clear: only the latest check may render. */
let sequence = 0;

function safeUrl(value: string | null | undefined): string | null {
  if (!value) return null;
  try {
    const url = new URL(value, location.href);
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.href : null;
  } catch {
    return null;
  }
}

function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string>, text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  if (text !== undefined) node.textContent = text;
  return node;
}

function css(c: Colors): string {
  return `:host{all:initial}
*{box-sizing:border-box;font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;font-size:15px;line-height:1.45;color:${c.text};margin:0}
a{color:${c.accent};font-weight:600}
.bar{position:relative;display:flex;flex-wrap:wrap;gap:8px 12px;align-items:center;padding:12px 52px 12px 16px;background:${c.background};border-bottom:3px solid ${c.accent};box-shadow:0 2px 8px rgba(0,0,0,.12);max-width:100%}
.fixed{position:fixed;left:0;right:0;z-index:2147483647;padding-left:max(16px,env(safe-area-inset-left));padding-right:max(52px,env(safe-area-inset-right))}
.top{top:0;padding-top:max(12px,env(safe-area-inset-top))}
.bottom{bottom:0;border-bottom:0;border-top:3px solid ${c.accent};padding-bottom:max(12px,env(safe-area-inset-bottom))}
.bar p{flex:1 1 180px;min-width:0;overflow-wrap:anywhere}
.x{all:unset;position:absolute;top:50%;right:4px;transform:translateY(-50%);width:44px;height:44px;display:flex;align-items:center;justify-content:center;cursor:pointer;font-size:24px;line-height:1;border-radius:8px;color:${c.text}}
.x:focus-visible,a:focus-visible{outline:3px solid ${c.accent};outline-offset:3px;border-radius:6px}
.box:focus{outline:none}
@media (prefers-reduced-motion:no-preference){.veil{animation:dw-in .15s ease-out}@keyframes dw-in{from{opacity:0}to{opacity:1}}}
@media (prefers-color-scheme:dark){.veil{background:rgba(0,0,0,.78)}${
    c.auto ? '.bar.bar,.box.box{background:#1c2230}*{color:#e7e9ee}a{color:#ff9b8f}.go{background:#ff9b8f;color:#1c2230}.x{color:#e7e9ee}' : ''
  }}
.veil{position:fixed;inset:0;z-index:2147483647;display:flex;align-items:center;justify-content:center;padding:16px;background:rgba(16,24,40,.72)}
.box{max-width:440px;width:100%;padding:28px;border-radius:12px;background:#fff;border-top:4px solid ${c.accent};box-shadow:0 20px 40px rgba(0,0,0,.3)}
.box h2{font-size:20px;margin-bottom:10px}
.box p{margin-bottom:18px}
.logo{display:block;max-height:40px;max-width:160px;margin:0 0 12px}
.go{display:inline-block;padding:10px 16px;border-radius:8px;background:${c.accent};color:#fff;text-decoration:none;margin-right:12px}
.by{display:block;margin-top:14px;font-size:12px;opacity:.7}
.bar .by{margin:0}`;
}

/**
 * The host keeps its own styles whatever the page says. The gate and an overlay banner sit
 * outside the page's layout; a pushing banner is the first (or last) thing in the page's
 * flow, and a mounted one goes inside the page's own container.
 */
function mountHost(colors: Colors, where: { parent: Element; first: boolean } = { parent: document.body, first: false }): { host: HTMLElement; root: ShadowRoot } {
  const host = document.createElement(HOST_TAG);
  for (const [prop, value] of [
    ['all', 'initial'],
    ['display', 'block'],
    ['position', 'static'],
  ]) {
    host.style.setProperty(prop as string, value as string, 'important');
  }
  const root = host.attachShadow({ mode: 'open' });
  // A constructed stylesheet is allowed under a strict style-src CSP, where <style> is not.
  try {
    const sheet = new CSSStyleSheet();
    sheet.replaceSync(css(colors));
    root.adoptedStyleSheets = [sheet];
  } catch {
    root.appendChild(el('style', {}, css(colors)));
  }
  if (where.first) where.parent.insertBefore(host, where.parent.firstChild);
  else where.parent.appendChild(host);
  return { host, root };
}

function watermark(result: StatusResult): HTMLElement | null {
  return 'entitlements' in result && result.entitlements.powered_by_watermark ? el('small', { class: 'by' }, 'Powered by Dunwall') : null;
}

/** Tenant slugs and customer ids are [a-z0-9-] and [A-Za-z0-9_]: safe in a cookie name. */
function dismissKey(o: CheckOptions): string {
  return `dunwall_dismissed_${o.tenant}_${o.customer}`.replace(/[^A-Za-z0-9_-]/g, '_');
}

/** A session cookie (no expiry) is shared by every tab of the browser session. */
function isDismissed(o: CheckOptions): boolean {
  const key = dismissKey(o);
  try {
    if (sessionStorage.getItem(key) === '1') return true;
  } catch {
    // Storage blocked: the cookie decides.
  }
  return document.cookie.split('; ').includes(`${key}=1`);
}

function rememberDismissal(o: CheckOptions): void {
  const key = dismissKey(o);
  document.cookie = `${key}=1; path=/; SameSite=Lax`;
  try {
    sessionStorage.setItem(key, '1');
  } catch {
    // Storage blocked: the cookie remembers.
  }
}

function renderBanner(o: CheckOptions, result: StatusResult, texts: Texts, colors: Colors): void {
  if (isDismissed(o)) return;
  const position = o.position === 'bottom' ? 'bottom' : 'top';
  const container = o.mount ? document.querySelector(o.mount) : null;
  // Pushing at the bottom: the bar is fixed, and the page gets room below its content.
  const fixed = !container && (o.mode === 'overlay' || position === 'bottom');
  const { host, root } = mountHost(colors, container ? { parent: container, first: false } : { parent: document.body, first: !fixed && position === 'top' });
  const bar = el('div', { class: fixed ? `bar fixed ${position}` : 'bar', role: 'alert' });
  bar.appendChild(el('p', {}, texts.warning));
  const url = safeUrl(('card_update_url' in result ? result.card_update_url : null) ?? o.cardUpdateUrl);
  if (url) bar.appendChild(el('a', { href: url, rel: 'noopener' }, texts.update));
  const mark = watermark(result);
  if (mark) bar.appendChild(mark);
  const close = el('button', { class: 'x', type: 'button', 'aria-label': texts.dismiss }, '×');
  close.addEventListener('click', () => {
    rememberDismissal(o);
    clear();
  });
  bar.appendChild(close);
  root.appendChild(bar);
  let release = () => {};
  if (fixed && position === 'bottom' && o.mode !== 'overlay') {
    const body = document.body.style;
    const saved = body.paddingBottom;
    body.paddingBottom = `${bar.getBoundingClientRect().height}px`;
    release = () => {
      body.paddingBottom = saved;
    };
  }
  current = { host, release: watchRemoval(host, release), customer: o.customer };
}

function renderGate(o: CheckOptions, result: StatusResult, texts: Texts, colors: Colors): void {
  const { host, root } = mountHost(colors);
  const veil = el('div', { class: 'veil' });
  const box = el('div', { class: 'box', role: 'dialog', 'aria-modal': 'true', 'aria-labelledby': 'dw-title', 'aria-describedby': 'dw-text', tabindex: '-1' });
  box.appendChild(el('h2', { id: 'dw-title' }, texts.lockoutTitle));
  box.appendChild(el('p', { id: 'dw-text' }, texts.lockout));
  const logo = safeUrl(o.logoUrl);
  if (logo) box.insertBefore(el('img', { class: 'logo', src: logo, alt: '' }), box.firstChild);
  const update = safeUrl(o.cardUpdateUrl);
  if (update) box.appendChild(el('a', { class: 'go', href: update, rel: 'noopener' }, texts.pay ?? texts.update));
  const support = safeUrl(o.supportUrl);
  if (support) box.appendChild(el('a', { href: support, rel: 'noopener' }, texts.support));
  if (!update && !support) box.appendChild(el('p', {}, texts.noLink));
  const mark = watermark(result);
  if (mark) box.appendChild(mark);
  veil.appendChild(box);
  root.appendChild(veil);

  // Everything else on the page is inert (no focus, no clicks), including what the page
  // adds while the gate is up (a chat widget's frame), and the page does not scroll.
  const made: HTMLElement[] = [];
  const makeInert = (n: Node) => {
    if (n !== host && n instanceof HTMLElement && !n.inert) {
      n.inert = true;
      made.push(n);
    }
  };
  for (const n of Array.from(document.body.children)) makeInert(n);
  const arrivals = new MutationObserver((records) => {
    for (const r of records) r.addedNodes.forEach(makeInert);
  });
  arrivals.observe(document.body, { childList: true });
  const html = document.documentElement;
  const saved = [html.style.overflow, document.body.style.overflow];
  html.style.overflow = 'hidden';
  document.body.style.overflow = 'hidden';

  const focusables = () => Array.from(box.querySelectorAll<HTMLElement>('a[href]'));
  const focusDialog = () => (focusables()[0] ?? box).focus();
  const onKey = (e: KeyboardEvent) => {
    if (e.key === 'Escape') {
      e.preventDefault();
      e.stopPropagation();
      return;
    }
    if (e.key !== 'Tab') return;
    const items = focusables();
    e.preventDefault();
    if (items.length === 0) return box.focus();
    const active = root.activeElement;
    const at = items.findIndex((i) => i === active);
    const next = e.shiftKey ? (at <= 0 ? items.length - 1 : at - 1) : (at + 1) % items.length;
    items[next]?.focus();
  };
  const keepFocus = (e: FocusEvent) => {
    if (e.target !== host) focusDialog();
  };
  // A click on the backdrop would otherwise leave the focus on the page's body.
  veil.addEventListener('mousedown', (e) => {
    if (e.target === veil) {
      e.preventDefault();
      focusDialog();
    }
  });
  document.addEventListener('keydown', onKey, true);
  document.addEventListener('focusin', keepFocus, true);
  focusDialog();

  const release = () => {
    arrivals.disconnect();
    for (const n of made) n.inert = false;
    html.style.overflow = saved[0] ?? '';
    document.body.style.overflow = saved[1] ?? '';
    document.removeEventListener('keydown', onKey, true);
    document.removeEventListener('focusin', keepFocus, true);
  };
  current = { host, customer: o.customer, release: watchRemoval(host, release) };
}

/**
 * Whatever removes the host (a framework replacing <body>, a page script), the page gets
 * its scroll, focus and clicks back: the returned release runs once, on removal or clear.
 */
function watchRemoval(host: HTMLElement, release: () => void): () => void {
  let done = false;
  const once = () => {
    if (done) return;
    done = true;
    watcher.disconnect();
    release();
    if (current?.host === host) current = null;
  };
  const watcher = new MutationObserver(() => {
    if (!host.isConnected) once();
  });
  watcher.observe(document.documentElement, { childList: true, subtree: true });
  return once;
}

/** Removes whatever the snippet shows. */
export function clear(): void {
  sequence += 1;
  removeCurrent();
}

function removeCurrent(): void {
  const shown = current;
  if (!shown) return;
  current = null;
  shown.release();
  shown.host.remove();
}

function whenBodyReady(): Promise<void> {
  if (document.body) return Promise.resolve();
  return new Promise((resolve) => document.addEventListener('DOMContentLoaded', () => resolve(), { once: true }));
}

/** The tenant's branding (`GET /api/branding/:slug`, cacheable); {} on any failure or after 2 s. */
async function branding(o: CheckOptions): Promise<Branding> {
  try {
    const res = await fetch(`${o.baseUrl ?? DEFAULT_BASE}/api/branding/${encodeURIComponent(o.tenant)}`, { credentials: 'omit', signal: AbortSignal.timeout(2_000) });
    const body: unknown = res.ok ? await res.json() : {};
    return typeof body === 'object' && body !== null ? (body as Branding) : {};
  } catch {
    return {};
  }
}

/** Asks the status and shows what it calls for; resolves with the answer, never rejects (fail-open). */
export async function check(o: CheckOptions): Promise<StatusResult> {
  const mine = (sequence += 1);
  try {
    // Another user on the same page (a login, a logout): nothing of the last one stays.
    if (current && current.customer !== o.customer) removeCurrent();
    const result = await client.getSubscriberStatus({
      baseUrl: o.baseUrl ?? DEFAULT_BASE,
      tenant: o.tenant,
      publishableKey: o.key,
      customerId: o.customer,
      hmac: o.hmac ?? null,
      ...(o.timeoutMs ? { timeoutMs: o.timeoutMs } : {}),
    });
    await whenBodyReady();
    // A later check or a clear happened while this one waited: its answer is not for now.
    if (mine !== sequence) return result;
    removeCurrent();
    // The tenant's branding, asked only when there is something to show; the page's own
    // attributes win over it, and it over the defaults.
    const b = result.status === 'active' ? {} : await branding(o);
    if (mine !== sequence) return result;
    const t = resolveTexts(b, navigator.languages?.length ? navigator.languages : [navigator.language]);
    const fromBranding: Partial<Texts> = {};
    if (t.banner_body) fromBranding.warning = t.banner_body;
    if (t.banner_action) fromBranding.update = t.banner_action;
    if (t.gate_title) fromBranding.lockoutTitle = t.gate_title;
    if (t.gate_body) fromBranding.lockout = t.gate_body;
    if (t.gate_action) fromBranding.pay = t.gate_action;
    if (t.support) fromBranding.support = t.support;
    const texts = { ...DEFAULT_TEXTS, ...fromBranding, ...o.texts };
    const chosen = { ...b.colors, ...o.colors };
    const colors: Colors = { ...DEFAULT_COLORS, ...chosen, auto: Object.keys(chosen).length === 0 };
    o = {
      ...o,
      cardUpdateUrl: o.cardUpdateUrl ?? b.payment_url ?? null,
      supportUrl: o.supportUrl ?? b.support_url ?? null,
      logoUrl: o.logoUrl ?? b.logo_url ?? null,
    };
    try {
      if (result.status === 'warning') renderBanner(o, result, texts, colors);
      else if (result.status === 'lockout') renderGate(o, result, texts, colors);
    } catch {
      // A page that breaks the rendering gets nothing rather than a broken page: fail open.
      removeCurrent();
    }
    document.dispatchEvent(new CustomEvent('dunwall:status', { bubbles: true, detail: result }));
    return result;
  } catch (err) {
    return { status: 'active', source: 'fallback', error: { kind: 'invalid_response', message: err instanceof Error ? err.message : String(err) } };
  }
}

const script = (document.currentScript ?? document.querySelector('script[data-tenant][data-key]')) as HTMLScriptElement | null;

/** The folder a script was served from: the service, or a tenant's proxy path to it. */
function baseOf(s: HTMLScriptElement | null): string {
  return s?.src ? s.src.replace(/\/[^/?#]*([?#].*)?$/, '') : location.origin;
}
const DEFAULT_BASE = baseOf(script);

function fromScript(s: HTMLScriptElement): CheckOptions | null {
  const d = s.dataset;
  if (!d.tenant || !d.key || !d.customer) return null;
  const texts: Partial<Texts> = {};
  const map: [keyof Texts, string | undefined][] = [
    ['warning', d.warningText],
    ['update', d.updateText],
    ['dismiss', d.dismissText],
    ['lockoutTitle', d.lockoutTitle],
    ['lockout', d.lockoutText],
    ['support', d.supportText],
  ];
  for (const [k, v] of map) if (v) texts[k] = v;
  if (d.noLinkText) texts.noLink = d.noLinkText;
  const colors: Partial<Colors> = {};
  if (d.accentColor) colors.accent = d.accentColor;
  if (d.backgroundColor) colors.background = d.backgroundColor;
  if (d.textColor) colors.text = d.textColor;
  return {
    tenant: d.tenant,
    key: d.key,
    customer: d.customer,
    hmac: d.hmac ?? null,
    // Each tag's own folder: with two copies loaded, the first one serves both tags.
    baseUrl: d.baseUrl ?? baseOf(s),
    supportUrl: d.supportUrl ?? null,
    cardUpdateUrl: d.cardUpdateUrl ?? null,
    logoUrl: d.logoUrl ?? null,
    ...(d.position === 'top' || d.position === 'bottom' ? { position: d.position } : {}),
    ...(d.mode === 'push' || d.mode === 'overlay' ? { mode: d.mode } : {}),
    mount: d.mount ?? null,
    texts,
    colors,
    ...(d.timeoutMs ? { timeoutMs: Number(d.timeoutMs) } : {}),
  };
}

declare global {
  interface Window {
    Dunwall?: { check: typeof check; clear: typeof clear };
  }
}

// Loaded twice (two tags, a copy and the original): the first copy serves both, so that
// there is only ever one banner or gate.
const api = window.Dunwall ?? { check, clear };
window.Dunwall = api;
const fromTag = script ? fromScript(script) : null;
if (fromTag) void api.check(fromTag);
