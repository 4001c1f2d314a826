/**
 * `<BillingBanner/>` and `<BillingGate/>`: the snippet's banner and gate as React components.
 * The tenant's branding (texts in the reader's language, colours, logo, links), the countdown
 * to `lockout_at`, "Pay now" to the invoice's page first, a banner dismissed for the browser
 * session, a gate that keeps the focus and makes the rest of the page inert. Styled by one
 * `<style>` element (class names `dunwall-*`, a `nonce` from the provider), or `unstyled`; a
 * function child draws the tenant's own UI from the same facts.
 */
import { useEffect, useMemo, useRef, useSyncExternalStore } from 'react';
import type { CSSProperties, ReactNode } from 'react';
import { createPortal } from 'react-dom';
import type { BillingState } from './core/status-store.js';
import { countdown, DEFAULT_COLORS, dismissKey, payLinks, safeUrl, textsFor } from './core/view.js';
import type { Colors, Link, Texts } from './core/view.js';
import { useBillingStatus, useBranding, useDunwallContext, useLanguages } from './provider.js';

export interface BillingViewProps {
  /** The app's own texts, over the branding's and the defaults. */
  texts?: Partial<Texts>;
  /** The reader's language(s); default: the browser's (`en` while server rendering). */
  locale?: string | readonly string[];
  colors?: Partial<Colors>;
  /** A card update page of the app's, when the answer names none. */
  cardUpdateUrl?: string | null;
  className?: string;
  style?: CSSProperties;
  /** No default styles: the `dunwall-*` class names only. */
  unstyled?: boolean;
}

/** What a tenant's own banner or gate is drawn from. */
export interface BillingView {
  state: BillingState;
  texts: Texts;
  /** The way to pay first; each `external` link opens in a new tab. */
  links: Link[];
  /** The countdown sentence (empty until mounted). */
  countdown: string;
  support: string | null;
  logo: string | null;
  watermark: boolean;
}

export interface BillingBannerProps extends BillingViewProps {
  /** Default true: a × that hides the banner for the browser session. */
  dismissible?: boolean;
  children?: (view: BillingView & { dismiss(): void }) => ReactNode;
}

export interface BillingGateProps extends BillingViewProps {
  supportUrl?: string | null;
  logoUrl?: string | null;
  children?: (view: BillingView) => ReactNode;
}

const MINUTE_MS = 60_000;
const WATERMARK = <small>Powered by Dunwall</small>;

function cssOf(c: Colors): string {
  // The app's own font; the colours are the branding's.
  return `.dunwall-banner,.dunwall-veil{--a:${c.accent};--b:${c.background};--t:${c.text}}
.dunwall-banner{display:flex;flex-wrap:wrap;align-items:center;gap:6px 12px;position:relative;padding:10px 52px 10px 16px;background:var(--b);color:var(--t);border-bottom:3px solid var(--a)}
.dunwall-banner p{flex:1 1 180px;margin:0}
.dunwall-banner a,.dunwall-box a{display:inline-block;margin:4px 12px 4px 0;color:var(--a);font-weight:600;white-space:nowrap}
a.dunwall-go{padding:8px 14px;border-radius:8px;background:var(--a);color:#fff;text-decoration:none}
.dunwall-x{position:absolute;top:4px;right:4px;width:44px;height:44px;border:0;background:none;color:inherit;font-size:24px}
:is(.dunwall-banner,.dunwall-box) :focus-visible{outline:3px solid var(--a);outline-offset:3px}
.dunwall-veil{position:fixed;inset:0;z-index:2147483647;display:grid;place-items:center;padding:16px;background:rgb(16 24 40/.97);backdrop-filter:blur(16px)}
.dunwall-box{max-width:440px;padding:28px;border-radius:12px;background:#fff;color:var(--t);border-top:4px solid var(--a)}
.dunwall-box:focus{outline:none}
.dunwall-box img{max-height:40px}
@media (max-width:480px){.dunwall-banner{font-size:14px;padding:8px 48px 8px 12px}}`;
}

/** The minute, for the countdown: null on the server and through hydration. */
function useMinute(on: boolean): number | null {
  return useSyncExternalStore(
    (changed) => {
      if (!on) return () => {};
      const timer = setInterval(changed, MINUTE_MS / 4);
      return () => clearInterval(timer);
    },
    () => (on ? Math.floor(Date.now() / MINUTE_MS) : null),
    () => null,
  );
}

function useView(
  show: boolean,
  props: BillingViewProps & { supportUrl?: string | null; logoUrl?: string | null },
): [BillingView, string] {
  const state = useBillingStatus();
  const branding = useBranding(show) ?? {};
  const languages = useLanguages(props.locale);
  const minute = useMinute(show && state.lockoutAt !== null);
  const { texts, locales } = useMemo(
    () => textsFor(branding, languages, props.texts),
    [branding, languages, props.texts],
  );
  const base = typeof location !== 'undefined' ? location.href : undefined;
  const at = state.lockoutAt ? Date.parse(state.lockoutAt) : NaN;
  const [sentence] =
    minute !== null && at === at ? countdown(at, locales, texts.countdown, minute * MINUTE_MS) : ['', ''];
  // The branding's colours are checked by the service (#rrggbb); the app's are its own.
  const colors = { ...DEFAULT_COLORS, ...branding.colors, ...props.colors };
  const view: BillingView = {
    state,
    texts,
    links: payLinks(state, texts, branding, props.cardUpdateUrl, (u) => safeUrl(u, base)),
    countdown: sentence,
    support: safeUrl(props.supportUrl ?? branding.support_url, base),
    logo: safeUrl(props.logoUrl ?? branding.logo_url, base),
    watermark: state.entitlements?.powered_by_watermark === true,
  };
  return [view, cssOf(colors)];
}

const links = (all: Link[]) =>
  all.map((l, i) => (
    <a
      key={i}
      href={l.href}
      className={i ? undefined : 'dunwall-go'}
      rel="noopener"
      target={l.external ? '_blank' : undefined}
    >
      {l.text}
    </a>
  ));

// Dismissal: per tenant and customer, for the browser session (every tab: a session cookie).
const dismissListeners = new Set<() => void>();
function isDismissed(key: string): boolean {
  try {
    if (sessionStorage.getItem(key) === '1') return true;
  } catch {
    // Storage blocked: the cookie decides.
  }
  return typeof document !== 'undefined' && document.cookie.split('; ').includes(`${key}=1`);
}
function dismiss(key: string): void {
  document.cookie = `${key}=1; path=/; SameSite=Lax`;
  try {
    sessionStorage.setItem(key, '1');
  } catch {
    // Storage blocked: the cookie remembers.
  }
  for (const l of [...dismissListeners]) l();
}
function subscribeDismissal(l: () => void) {
  dismissListeners.add(l);
  return () => dismissListeners.delete(l);
}

/** The warning banner, in the page's flow where it is placed; nothing for any other status. */
export function BillingBanner(props: BillingBannerProps) {
  const { tenant, customer, nonce } = useDunwallContext();
  const state = useBillingStatus();
  const key = customer ? dismissKey(tenant, customer) : '';
  const dismissed = useSyncExternalStore(
    subscribeDismissal,
    () => key !== '' && isDismissed(key),
    () => false,
  );
  const show = state.status === 'warning' && !dismissed;
  const [view, css] = useView(show, props);
  if (!show) return null;
  const close = () => key && dismiss(key);
  return (
    <div
      role="alert"
      data-status="warning"
      className={`dunwall-banner${props.className ? ` ${props.className}` : ''}`}
      style={props.style}
    >
      {props.unstyled ? null : <style nonce={nonce}>{css}</style>}
      {props.children ? (
        props.children({ ...view, dismiss: close })
      ) : (
        <>
          <p>
            {view.texts.warning}
            {state.lockoutAt ? (
              <>
                {' '}
                <time dateTime={state.lockoutAt}>{view.countdown}</time>
              </>
            ) : null}
          </p>
          <span>
            {links(view.links)}
            {view.watermark ? WATERMARK : null}
          </span>
          {props.dismissible === false ? null : (
            <button type="button" className="dunwall-x" aria-label={view.texts.dismiss} onClick={close}>
              ×
            </button>
          )}
        </>
      )}
    </div>
  );
}

/** The full-screen gate for `lockout` (only ever from a fresh answer: the service's, or your API's 402); nothing otherwise. */
export function BillingGate(props: BillingGateProps) {
  const state = useBillingStatus();
  // A fresh answer only: never on the server, nor through hydration (which starts from the server's snapshot).
  const show = state.status === 'lockout' && (state.source === 'service' || state.source === 'api');
  const [view, css] = useView(show, props);
  if (!show) return null;
  return createPortal(<Gate view={view} css={css} props={props} />, document.body);
}

function Gate({ view, css, props }: { view: BillingView; css: string; props: BillingGateProps }) {
  const { nonce } = useDunwallContext();
  const veil = useRef<HTMLDivElement>(null);
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const own = veil.current;
    const dialog = box.current;
    if (!own || !dialog) return;
    // Everything else is inert (no focus, no clicks), what the page adds meanwhile too, and
    // the page does not scroll.
    const made: HTMLElement[] = [];
    const makeInert = (n: Node) => {
      if (n !== own && n instanceof HTMLElement && !n.inert) {
        n.inert = true;
        made.push(n);
      }
    };
    for (const n of Array.from(document.body.children)) makeInert(n);
    const arrivals = new MutationObserver((records) => records.forEach((r) => r.addedNodes.forEach(makeInert)));
    arrivals.observe(document.body, { childList: true });
    const html = document.documentElement;
    const saved = [html.style.overflow, document.body.style.overflow];
    html.style.overflow = 'hidden';
    document.body.style.overflow = 'hidden';
    const focusables = () => Array.from(dialog.querySelectorAll<HTMLElement>('a[href],button'));
    const onKey = (e: KeyboardEvent) => {
      if (e.key === 'Escape') {
        e.preventDefault();
        e.stopPropagation();
        return;
      }
      if (e.key !== 'Tab') return;
      e.preventDefault();
      const items = focusables();
      if (items.length === 0) return dialog.focus();
      const at = items.findIndex((i) => i === document.activeElement);
      items[e.shiftKey ? (at <= 0 ? items.length - 1 : at - 1) : (at + 1) % items.length]?.focus();
    };
    const keepFocus = (e: FocusEvent) => {
      if (!own.contains(e.target as Node)) dialog.focus();
    };
    document.addEventListener('keydown', onKey, true);
    document.addEventListener('focusin', keepFocus, true);
    // The dialog itself takes the focus: a screen reader reads it, and no ring shows until the keyboard moves.
    dialog.focus();
    return () => {
      document.removeEventListener('keydown', onKey, true);
      document.removeEventListener('focusin', keepFocus, true);
      arrivals.disconnect();
      for (const n of made) n.inert = false;
      html.style.overflow = saved[0] ?? '';
      document.body.style.overflow = saved[1] ?? '';
    };
  }, []);
  return (
    <div
      ref={veil}
      className="dunwall-veil"
      data-status="lockout"
      onMouseDown={(e) => {
        // A click on the backdrop would otherwise leave the focus on the page's body.
        if (e.target !== veil.current) return;
        e.preventDefault();
        box.current?.focus();
      }}
    >
      {props.unstyled ? null : <style nonce={nonce}>{css}</style>}
      <div
        ref={box}
        role="dialog"
        aria-modal="true"
        aria-labelledby="dunwall-title"
        aria-describedby="dunwall-text"
        tabIndex={-1}
        className={`dunwall-box${props.className ? ` ${props.className}` : ''}`}
        style={props.style}
      >
        {props.children ? (
          props.children(view)
        ) : (
          <>
            {view.logo ? <img src={view.logo} alt="" /> : null}
            <h2 id="dunwall-title">{view.texts.lockoutTitle}</h2>
            <p id="dunwall-text">{view.texts.lockout}</p>
            <div>
              {links(
                view.support
                  ? [...view.links, { href: view.support, text: view.texts.support, external: false }]
                  : view.links,
              )}
            </div>
            {!view.links.length && !view.support ? <p>{view.texts.noLink}</p> : null}
            {view.watermark ? WATERMARK : null}
          </>
        )}
      </div>
    </div>
  );
}
