/**
 * `<BillingBanner/>` and `<BillingGate/>`: the snippet's banner and gate as React components.
 * The tenant's branding (texts in the reader's language, colours, logo, links), the countdown
 * to `lockout_at`, "Pay now" to the invoice's page first, a banner dismissed for the browser
 * session, a gate that keeps the focus and makes the rest of the page inert (`@dunwall/core`'s
 * view and gate: these components only render them). Styled by one
 * `<style>` element (class names `dunwall-*`, a `nonce` from the provider), or `unstyled`; a
 * function child draws the tenant's own UI from the same facts.
 */
import { useEffect, useRef, useSyncExternalStore } from 'react';
import type { CSSProperties, ReactNode } from 'react';
import { createPortal } from 'react-dom';
import { dismissKey, gateLinks, holdPage, safeUrl, sessionDismissals, shownFor, viewOf } from '@dunwall/core';
import type {
  BannerOptions,
  BillingState,
  BillingView as SharedView,
  Colors,
  GateOptions,
  Link,
  ViewOptions,
} from '@dunwall/core';
import { useBillingStatus, useBranding, useDunwallContext, useLanguages } from './provider.js';

export interface BillingViewProps extends ViewOptions {
  /** The reader's language(s); default: the browser's (`en` while server rendering). */
  locale?: string | readonly string[];
  className?: string;
  style?: CSSProperties;
  /** No default styles: the `dunwall-*` class names only. */
  unstyled?: boolean;
}

/** What a tenant's own banner or gate is drawn from; the countdown is empty until mounted. */
export type BillingView = SharedView<BillingState>;

export interface BillingBannerProps extends BillingViewProps, BannerOptions {
  children?: (view: BillingView & { dismiss(): void }) => ReactNode;
}

export interface BillingGateProps extends BillingViewProps, GateOptions {
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

function useView(show: boolean, props: BillingViewProps & GateOptions): [BillingView, string] {
  const { role } = useDunwallContext();
  const state = useBillingStatus();
  const branding = useBranding(show) ?? {};
  const languages = useLanguages(props.locale);
  const minute = useMinute(show && state.lockoutAt !== null);
  const base = typeof location !== 'undefined' ? location.href : undefined;
  const { view, colors } = viewOf({
    state,
    branding,
    languages,
    own: props,
    now: minute === null ? null : minute * MINUTE_MS,
    safe: (u) => safeUrl(u, base),
    role,
  });
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

/**
 * The warning banner, or an active answer's notice (a soft banner: a status, not an alert), in
 * the page's flow where it is placed; nothing for any other status.
 */
export function BillingBanner(props: BillingBannerProps) {
  const { tenant, customer, nonce } = useDunwallContext();
  const state = useBillingStatus();
  const key = customer ? dismissKey(tenant, customer, state.notice) : '';
  const dismissed = useSyncExternalStore(
    sessionDismissals.subscribe,
    () => key !== '' && sessionDismissals.has(key),
    () => false,
  );
  const shown = shownFor(state, dismissed);
  const show = shown === 'banner' || shown === 'notice';
  const [view, css] = useView(show, props);
  if (!show) return null;
  const close = () => key && sessionDismissals.add(key);
  return (
    <div
      role={shown === 'notice' ? 'status' : 'alert'}
      data-status={shown === 'notice' ? 'notice' : 'warning'}
      className={`dunwall-banner${props.className ? ` ${props.className}` : ''}`}
      style={props.style}
    >
      {props.unstyled ? null : <style nonce={nonce}>{css}</style>}
      {props.children ? (
        props.children({ ...view, dismiss: close })
      ) : (
        <>
          <p>
            {view.message}
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
  const show = shownFor(state, false) === 'gate';
  const [view, css] = useView(show, props);
  if (!show) return null;
  return createPortal(<Gate view={view} css={css} props={props} />, document.body);
}

function Gate({ view, css, props }: { view: BillingView; css: string; props: BillingGateProps }) {
  const { nonce } = useDunwallContext();
  const all = gateLinks(view);
  const veil = useRef<HTMLDivElement>(null);
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const [own, dialog] = [veil.current, box.current];
    return own && dialog ? holdPage({ own, veil: own, dialog, active: () => document.activeElement }) : undefined;
  }, []);
  return (
    <div ref={veil} className="dunwall-veil" data-status="lockout">
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
            <div>{links(all)}</div>
            {all.length || !view.texts.noLink ? null : <p>{view.texts.noLink}</p>}
            {view.watermark ? WATERMARK : null}
          </>
        )}
      </div>
    </div>
  );
}
