/**
 * The Dunwall browser snippet. One tag:
 *   <script src="https://BASE/snippet.js" data-tenant="acme" data-key="pk_..."
 *           data-customer="cus_..." data-hmac="..." async></script>
 * or `Dunwall.check({...})` from a single-page app. It shows nothing for `active`, a
 * dismissable banner for `warning` and a full-screen gate for `lockout`, and nothing at all
 * on any error or timeout: it renders only from an answer, never from a guess.
 *
 * Both lead with a way to pay: Stripe's page of the overdue invoice (`pay_url`) in a new tab,
 * else the card update page, else the branding's payment link. While something is shown, the
 * snippet asks again when the page comes back into view (the customer returning from paying
 * in that other tab), and when a scheduled lockout (`lockout_at`) arrives.
 *
 * `data-role="member"` is for a reader who cannot pay: the member's texts, no pay or card
 * link. An active answer's notice (a card about to expire) is a soft banner, never a gate.
 *
 * What is shown, with which texts, links and countdown, and a banner's dismissal, are decided
 * by `@dunwall/core`, as for `@dunwall/react` and `@dunwall/react-native`: this file draws
 * them in the page, and holds the page under a gate with the core's `holdPage`.
 */
import {
  countdown,
  DEFAULT_TEXTS,
  dismissKey as keyOf,
  fetchBranding,
  gateLinks,
  holdPage,
  noticeOf,
  reachable,
  roleOf,
  safeUrl as safeAt,
  sessionDismissals,
  shownFor,
  viewOf,
} from '@dunwall/core';
import type { Colors as BaseColors, BillingView, Link, Texts, ViewState } from '@dunwall/core';
import { askStatus, DEFAULT_TIMEOUT_MS } from '../packages/client/src/index.js';
import type { DunwallError, PreviewStatus, StatusRequest, StatusResult } from '../packages/client/src/index.js';

export type { Texts };

export interface Colors extends BaseColors {
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
   * first thing in the page's flow, or fixed below a fixed header with the flow pushed down
   * by its height, or in the flow right after a sticky header); `overlay`: the banner floats
   * over the page.
   */
  mode?: 'push' | 'overlay';
  /** A selector: the banner is rendered inside this element of the page, in its flow. */
  mount?: string | null;
  /** A test tenant only: show the banner or the gate as the service previews them. */
  preview?: PreviewStatus | null;
  /**
   * `billing_admin` (default): shown the ways to pay. `member`: the member's texts and no pay
   * or card link; any other value is taken as `member` (said in the console).
   */
  role?: string | null;
}

/** What a check from the script tag carries besides its options. */
interface FromTag extends CheckOptions {
  /** Shows the page hidden by `data-hide-page`; true if it was still hidden. */
  reveal?: () => boolean;
  /** The tag itself: where `data-debug` says why nothing shows. */
  tag?: HTMLScriptElement;
}

const HOST_TAG = 'dunwall-enforcement';
// No answer cache: a customer who has just paid must be let in by the very next check.
// Concurrent checks of the same question still share one request.
const inFlight = new Map<string, Promise<StatusResult>>();
function ask(request: StatusRequest): Promise<StatusResult> {
  const key = JSON.stringify(request);
  let pending = inFlight.get(key);
  if (!pending) inFlight.set(key, (pending = askStatus(request, fetch).finally(() => inFlight.delete(key))));
  return pending;
}
let current: { host: HTMLElement; release: () => void; customer: string; sig?: string; tick?: () => void } | null =
  null;
/** Bumped by every check and clear: only the latest check may render. */
let sequence = 0;
/** The next countdown step, and the question asked again once `lockout_at` has come. */
let wake: ReturnType<typeof setTimeout> | undefined;
/** The next question while following a return. */
let again: ReturnType<typeof setTimeout> | undefined;
/** Asking again on return: one request at a time, and at most one a second. */
let asking = false;
let askedAt = 0;
/** Until when a return is followed (asked again every FOLLOW_EVERY_MS while still shown). */
let followUntil = 0;
const MINUTE_MS = 60_000;
const RETURN_GAP_MS = 1_000;
const FOLLOW_EVERY_MS = 2_000;
const FOLLOW_FOR_MS = 30_000;

/** Links and images are https only: never `javascript:`, `data:` or plain http. */
const safeUrl = (value: string | null | undefined) => safeAt(value, location.href);

/** The first link (`index` 0) leads, shown as a button; the invoice's page opens in a new tab. */
function link({ href, text, external }: Link, index: number): HTMLAnchorElement {
  const a = el('a', { href, rel: 'noopener', class: index ? '' : 'go' }, text);
  if (external) a.target = '_blank';
  return a;
}

/** Asks again, unless the page is hidden or a question is in flight; at most one a second. */
function askAgain(o: CheckOptions): void {
  if (document.hidden || asking) return;
  // A return within a second of the last question (focus and visibilitychange together, or
  // a customer back at once) is asked once that second ends: never dropped.
  const wait = askedAt + RETURN_GAP_MS - Date.now();
  if (wait > 0) {
    clearTimeout(again);
    again = setTimeout(askAgain, wait, o);
    return;
  }
  asking = true;
  askedAt = Date.now();
  void check(o).finally(() => (asking = false));
}

/**
 * While a banner or a gate is up: asked again when the page is back in view, so that a
 * customer who paid in another tab gets in on return, until `signal` aborts. A return is
 * followed for a while (Stripe's `invoice.paid` may arrive a moment after the customer).
 */
function watchReturn(o: CheckOptions, signal: AbortSignal): void {
  askedAt = Date.now();
  const onReturn = () => {
    followUntil = Date.now() + FOLLOW_FOR_MS;
    askAgain(o);
  };
  window.addEventListener('focus', onReturn, { signal });
  document.addEventListener('visibilitychange', onReturn, { signal });
}

/** Every minute the countdown moves on; at `lockout_at` the service is asked again. */
function arm(o: CheckOptions, at: number): void {
  const step = (first?: boolean) => {
    const left = at - Date.now();
    // Already past on arrival (a clock ahead of the service's): ask again in a minute, not in a loop.
    if (left <= 0 && !first) return void check(o);
    current?.tick?.();
    wake = setTimeout(step, left > 0 ? Math.min(left, MINUTE_MS) : MINUTE_MS);
  };
  step(true);
}

function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Record<string, string>,
  text?: string,
): HTMLElementTagNameMap[K] {
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
@media (prefers-reduced-motion:no-preference){.veil:not(.now){animation:dw-in .15s ease-out}@keyframes dw-in{from{opacity:0}to{opacity:1}}}
@media (prefers-color-scheme:dark){.veil{background:rgba(0,0,0,.96)}${
    c.auto
      ? '.bar.bar,.box.box{background:#1c2230}*{color:#e7e9ee}a{color:#ff9b8f}.go{background:#ff9b8f;color:#1c2230}.x{color:#e7e9ee}'
      : ''
  }}
.veil{position:fixed;inset:0;z-index:2147483647;display:flex;align-items:center;justify-content:center;padding:16px;background:rgba(16,24,40,.96);-webkit-backdrop-filter:blur(12px);backdrop-filter:blur(12px)}
.box{max-width:440px;width:100%;padding:28px;border-radius:12px;background:#fff;border-top:4px solid ${c.accent};box-shadow:0 20px 40px rgba(0,0,0,.3)}
.box h2{font-size:20px;margin-bottom:10px}
.box p{margin-bottom:18px}
.logo{display:block;max-height:40px;max-width:160px;margin:0 0 12px}
.go{display:inline-block;padding:10px 16px;border-radius:8px;background:${c.accent};color:#fff;text-decoration:none}
.acts{display:flex;flex-wrap:wrap;align-items:center;gap:10px 16px}
.by{display:block;margin-top:14px;font-size:12px;opacity:.7}
.bar .by{margin:0}
@media (max-width:640px){.bar{display:flow-root;padding:4px 12px}.bar:before{content:"";float:right;width:32px;height:32px}.bar,.bar :not(.x){font-size:13px;line-height:1.35}.bar p{display:inline;margin-right:6px}.bar a,.bar .by{display:inline-block;max-width:100%;margin-right:6px}.bar .go{padding:0 6px;border-radius:4px}.bar .by{font-size:11px}.x{top:0;right:0;transform:none}.fixed{padding-left:max(12px,env(safe-area-inset-left));padding-right:max(12px,env(safe-area-inset-right))}.top{padding-top:max(4px,env(safe-area-inset-top))}.bottom{padding-bottom:max(4px,env(safe-area-inset-bottom))}}`;
}

/**
 * The host keeps its own styles whatever the page says. The gate and an overlay banner sit
 * outside the page's layout; a pushing banner is the first (or last) thing in the page's
 * flow, or right after a sticky header, and a mounted one goes inside the page's own container.
 */
function mountHost(
  colors: Colors,
  place: (host: HTMLElement) => void = (h) => document.body.appendChild(h),
): { host: HTMLElement; root: ShadowRoot } {
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
  place(host);
  return { host, root };
}

function watermark(view: BillingView): HTMLElement | null {
  return view.watermark ? el('small', { class: 'by' }, 'Powered by Dunwall') : null;
}

/** The same key as @dunwall/react's: a banner dismissed in one (for the browser session) is dismissed in the other. */
const dismissKey = (o: CheckOptions, s?: ViewState) => keyOf(o.tenant, o.customer, s?.notice);

/** What a banner or a gate shows (the shared view); the countdown is to `at` (NaN: none). */
interface View {
  o: CheckOptions;
  /** The banner's dismissal (a notice's is its own). */
  key: string;
  view: BillingView;
  colors: Colors;
  at: number;
  locales: readonly string[];
}

/**
 * What the page keeps at the top of the viewport: its lowest fixed or sticky bar (a header,
 * or headers stacked), and whether it is sticky; undefined: none. Found by what is drawn
 * along the top row: a bar half the width or more crosses its middle. Things narrower, under
 * 8 px (a progress line) or half the screen tall (a layer over everything) do not count.
 */
function pinned(): [HTMLElement, boolean] | undefined {
  const w = document.documentElement.clientWidth;
  let found: [HTMLElement, boolean] | undefined;
  let y = 1;
  for (let round = 0; round < 3 && !found?.[1]; round += 1) {
    const next = pinnedAt(w, y);
    if (!next) break;
    found = next;
    y = next[0].getBoundingClientRect().bottom + 1;
  }
  return found;
}

function pinnedAt(w: number, y: number): [HTMLElement, boolean] | undefined {
  for (const hit of document.elementsFromPoint(w / 2, y)) {
    for (let n: Element | null = hit; n && n !== document.body; n = n.parentElement) {
      if (n.localName === HOST_TAG) break;
      const p = getComputedStyle(n).position;
      if (p === 'fixed' || p === 'sticky') {
        const r = n.getBoundingClientRect();
        if (r.width >= w / 2 && r.height >= 8 && r.height < innerHeight / 2) return [n as HTMLElement, p === 'sticky'];
        break;
      }
    }
  }
  return undefined;
}

function renderBanner({ o, key, view, colors, at, locales }: View): void {
  const { texts } = view;
  const position = o.position === 'bottom' ? 'bottom' : 'top';
  const container = o.mount ? document.querySelector(o.mount) : null;
  // Pushing at the bottom: the bar is fixed, and the page gets room below its content.
  const fixed = !container && (o.mode === 'overlay' || position === 'bottom');
  // Pushing at the top, below a header the page keeps there: right after a sticky one, in
  // the flow; fixed just below a fixed one, the flow pushed down by the host's own height
  // (whichever element of the page carries the padding for the header).
  const pin = container || fixed ? undefined : pinned();
  const below = pin && !pin[1] ? pin[0] : undefined;
  const { host, root } = mountHost(
    colors,
    container
      ? (h) => container.appendChild(h)
      : pin?.[1]
        ? (h) => pin[0].after(h)
        : fixed
          ? undefined
          : (h) => document.body.prepend(h),
  );
  // A notice is told politely (a status), a warning at once (an alert).
  const bar = el('div', {
    class: fixed ? `bar fixed ${position}` : below ? 'bar fixed' : 'bar',
    role: view.state.notice ? 'status' : 'alert',
  });
  const text = bar.appendChild(el('p', {}, view.message));
  let tick: (() => void) | undefined;
  if (at === at) {
    // Text only: the sentence and the date become a text node and an attribute, never markup.
    const time = el('time', { datetime: new Date(at).toISOString() });
    tick = () => {
      [time.textContent, time.title] = countdown(at, locales, texts.countdown);
    };
    tick();
    text.append(' ', time);
  }
  view.links.forEach((l, i) => bar.appendChild(link(l, i)));
  const mark = watermark(view);
  if (mark) bar.appendChild(mark);
  const close = el('button', { class: 'x', type: 'button', 'aria-label': texts.dismiss }, '×');
  close.addEventListener('click', () => {
    sessionDismissals.add(key);
    // Nothing shown any more, but a scheduled lockout still comes at its time.
    removeCurrent();
  });
  bar.appendChild(close);
  root.appendChild(bar);
  let release = () => {};
  const listening = new AbortController();
  if (fixed && position === 'bottom' && o.mode !== 'overlay') {
    const body = document.body.style;
    const saved = body.paddingBottom;
    body.paddingBottom = `${bar.getBoundingClientRect().height}px`;
    release = () => {
      body.paddingBottom = saved;
    };
  } else if (below) {
    // The header's size and place (one that slides away on scroll) and the bar's height are
    // followed; the host is the room the bar takes in the flow.
    const follow = () => {
      bar.style.top = `${Math.max(0, below.getBoundingClientRect().bottom)}px`;
      host.style.setProperty('height', `${bar.offsetHeight}px`, 'important');
    };
    follow();
    const sizes = new ResizeObserver(follow);
    sizes.observe(below);
    sizes.observe(bar);
    addEventListener('scroll', follow, { passive: true, signal: listening.signal });
    release = () => sizes.disconnect();
  }
  watchReturn(o, listening.signal);
  current = {
    host,
    customer: o.customer,
    tick,
    release: watchRemoval(host, () => {
      listening.abort();
      release();
    }),
  };
}

function renderGate({ o, view, colors }: View, now?: boolean): void {
  const { texts, logo } = view;
  const { host, root } = mountHost(colors);
  // Over a page that was hidden until now, the gate is there at once: a fade-in would show the app.
  const veil = el('div', { class: now ? 'veil now' : 'veil' });
  const box = el('div', {
    class: 'box',
    role: 'dialog',
    'aria-modal': 'true',
    'aria-labelledby': 'dw-title',
    'aria-describedby': 'dw-text',
    tabindex: '-1',
  });
  box.appendChild(el('h2', { id: 'dw-title' }, texts.lockoutTitle));
  box.appendChild(el('p', { id: 'dw-text' }, texts.lockout));
  if (logo) box.insertBefore(el('img', { class: 'logo', src: logo, alt: '' }), box.firstChild);
  // One row of links that wraps between them: a link moves to the next line whole.
  const row = box.appendChild(el('div', { class: 'acts' }));
  const links = gateLinks(view);
  links.forEach((l, i) => row.appendChild(link(l, i)));
  // A member's gate says whom to ask instead (its noLink is empty).
  if (!links.length && texts.noLink) box.appendChild(el('p', {}, texts.noLink));
  const mark = watermark(view);
  if (mark) box.appendChild(mark);
  veil.appendChild(box);
  root.appendChild(veil);

  const listening = new AbortController();
  watchReturn(o, listening.signal);
  const hold = holdPage({ own: host, veil, dialog: box, active: () => root.activeElement });
  const release = () => {
    listening.abort();
    hold();
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

/** What has been said in the console: each problem once per page. */
const said = new Set<string>();
/** Whether the service answers this page at all (asked once, after a failed lookup). */
let answers: Promise<boolean> | undefined;

/**
 * A misconfiguration shows nothing, as a paying customer sees: what went wrong is said once
 * per problem in the console, and on the tag (`data-debug`), or on <html>
 * (`data-dunwall-debug`) for `Dunwall.check`, until a check gets an answer. Never the key,
 * the hmac or the customer id.
 */
async function explain(o: FromTag, e?: DunwallError, tookMs = 0): Promise<void> {
  const [node, attr] = o.tag ? [o.tag, 'data-debug'] : [document.documentElement, 'data-dunwall-debug'];
  if (!e) return node.removeAttribute(attr);
  let code = e.code ?? e.kind;
  const ms = o.timeoutMs || DEFAULT_TIMEOUT_MS;
  // The client aborts the request at its timeout, and the aborted request may settle first,
  // as a network error: a failure at the timeout is the timeout.
  if (code === 'network' && tookMs >= ms) code = 'timeout';
  // A browser hides why a cross-origin call failed. The service reached without CORS (an
  // opaque request does not need its headers) means it answered, but not to this origin.
  if (code === 'network' && (await (answers ??= reachable(`${o.baseUrl ?? DEFAULT_BASE}/snippet.js`))))
    code = 'origin_not_allowed';
  const t = `tenant "${o.tenant}"`;
  const why: Record<string, string> = {
    invalid_publishable_key: `the key is not a publishable key of ${t}`,
    tenant_not_found: `there is no ${t}`,
    tenant_suspended: `${t} is suspended`,
    hmac_mismatch: 'the hmac does not match the customer id',
    hmac_required: `${t} requires data-hmac`,
    origin_not_allowed: `the browser was refused the answer: is ${location.origin} in the allowed_origins of ${t}?`,
    network: `the service could not be reached (${e.message})`,
    timeout: `no answer within ${ms} ms`,
  };
  const line = `${code}: ${why[code] ?? e.message}; nothing is shown`;
  node.setAttribute(attr, line);
  if (!said.has(code)) {
    said.add(code);
    console.warn(`[dunwall] ${line}`);
  }
}

/** Removes whatever the snippet shows. */
export function clear(): void {
  sequence += 1;
  clearTimeout(wake);
  clearTimeout(again);
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

/** Asks the status and shows what it calls for; resolves with the answer, never rejects (fail-open). */
export async function check(o: FromTag): Promise<StatusResult> {
  const mine = (sequence += 1);
  clearTimeout(wake);
  clearTimeout(again);
  try {
    // Another user on the same page (a login, a logout): nothing of the last one stays.
    if (current && current.customer !== o.customer) removeCurrent();
    const asked = Date.now();
    const result = await ask({
      baseUrl: o.baseUrl ?? DEFAULT_BASE,
      tenant: o.tenant,
      publishableKey: o.key,
      customerId: o.customer,
      hmac: o.hmac ?? null,
      preview: o.preview ?? null,
      ...(o.timeoutMs ? { timeoutMs: o.timeoutMs } : {}),
    });
    if (result.source === 'fallback') {
      // Nothing to show: the page hidden until the answer is shown at once. The reason is
      // said without holding up the answer (finding it may take a request).
      o.reveal?.();
      void explain(o, result.error, Date.now() - asked);
    } else void explain(o);
    await whenBodyReady();
    // A later check or a clear happened while this one waited: its answer is not for now.
    if (mine !== sequence) return result;
    const known = 'entitlements' in result ? result : null;
    const state: ViewState = {
      status: result.status,
      source: result.source,
      lockoutAt: (known?.status === 'warning' && known.lockout_at) || null,
      payUrl: known?.pay_url ?? null,
      cardUpdateUrl: known?.card_update_url ?? null,
      entitlements: known?.entitlements ?? null,
      notice: result.status === 'active' ? noticeOf(known?.notice) : null,
    };
    const at = state.lockoutAt ? Date.parse(state.lockoutAt) : NaN;
    // The same answer for the same page as what is shown (a return, a route change): it stays
    // as it is, without a flicker or a focus jump.
    // Not the tag itself: a framework's own properties on it may not serialize.
    const sig = JSON.stringify([{ ...o, tag: 0 }, result]);
    if (!current || current.sig !== sig) {
      // The tenant's branding, asked only when there is something to show; the page's own
      // attributes win over it, and it over the defaults. What is shown stays until then.
      const b =
        result.status === 'active' && !state.notice ? {} : await fetchBranding(o.baseUrl ?? DEFAULT_BASE, o.tenant);
      if (mine !== sequence) return result;
      removeCurrent();
      const languages = navigator.languages?.length ? navigator.languages : [navigator.language];
      // The shared view: the way to pay leads (the overdue invoice's page in a new tab, so
      // that this one asks again on return), and the countdown speaks its sentence's language.
      const { view, colors, locales } = viewOf({
        state,
        branding: b,
        languages,
        own: o,
        now: Date.now(),
        safe: safeUrl,
        role: roleOf(o.role, o.tenant),
      });
      const auto = Object.keys({ ...b.colors, ...o.colors }).length === 0;
      const key = dismissKey(o, state);
      const shown = shownFor(state, sessionDismissals.has(key));
      const drawn: View = { o, key, view, colors: { ...colors, auto }, at, locales };
      // The page hidden until the answer is shown with it (and visible before the banner
      // looks for the page's header, which a hidden page does not draw).
      const now = o.reveal?.();
      try {
        if (shown === 'banner' || shown === 'notice') renderBanner(drawn);
        else if (shown === 'gate') renderGate(drawn, now);
      } catch {
        // A page that breaks the rendering gets nothing rather than a broken page: fail open.
        removeCurrent();
      }
      if (current) current.sig = sig;
    }
    if (at === at) arm(o, at);
    if (current && Date.now() < followUntil) again = setTimeout(askAgain, FOLLOW_EVERY_MS, o);
    document.dispatchEvent(new CustomEvent('dunwall:status', { bubbles: true, detail: result }));
    return result;
  } catch (err) {
    const error: DunwallError = { kind: 'invalid_response', message: err instanceof Error ? err.message : String(err) };
    void explain(o, error);
    return { status: 'active', source: 'fallback', error };
  }
}

const script = (document.currentScript ??
  document.querySelector('script[data-tenant][data-key]')) as HTMLScriptElement | null;

/** The folder a script was served from: the service, or a tenant's proxy path to it. */
function baseOf(s: HTMLScriptElement | null): string {
  return s?.src ? s.src.replace(/\/[^/?#]*([?#].*)?$/, '') : location.origin;
}
const DEFAULT_BASE = baseOf(script);

function fromScript(s: HTMLScriptElement): FromTag | null {
  const d = s.dataset;
  if (!d.tenant || !d.key || !d.customer) return null;
  // Each text of the defaults from its attribute: data-warning-text, ..., data-lockout-title, data-pay-text.
  const texts: Partial<Texts> = {};
  for (const k of Object.keys(DEFAULT_TEXTS) as (keyof Texts)[]) {
    const value = d[k === 'lockoutTitle' ? k : k === 'payNow' ? 'payText' : `${k}Text`];
    if (value) texts[k] = value;
  }
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
    role: d.role ?? null,
    ...(d.preview === 'warning' || d.preview === 'lockout' ? { preview: d.preview } : {}),
    texts,
    colors,
    ...(d.timeoutMs ? { timeoutMs: Number(d.timeoutMs) } : {}),
    tag: s,
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
/**
 * `data-hide-page`: a page that wants no flash of itself before a gate is hidden at once
 * (the tag is then a synchronous script in <head>), and shown when the answer is rendered,
 * after `data-hide-page-ms` (default 1500, 0 to 5000) at the latest, or on any error: fail
 * open. A constructed stylesheet, so a strict style-src policy allows it.
 */
function hidePage(d: DOMStringMap): () => boolean {
  if (d.hidePage === undefined) return () => false;
  const ms = Number(d.hidePageMs ?? 1500);
  try {
    const sheet = new CSSStyleSheet();
    sheet.replaceSync('html{visibility:hidden!important}');
    document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
    const show = () => {
      clearTimeout(bound);
      // Read before it is set: the list is one live object.
      const was = document.adoptedStyleSheets.includes(sheet);
      document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => s !== sheet);
      return was;
    };
    const bound = setTimeout(show, ms === ms ? Math.min(Math.max(ms, 0), 5_000) : 1_500);
    return show;
  } catch {
    return () => false;
  }
}

const fromTag: FromTag | null = script ? fromScript(script) : null;
if (fromTag && script) {
  const reveal = (fromTag.reveal = hidePage(script.dataset));
  void api.check(fromTag).finally(reveal);
}
