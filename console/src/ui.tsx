/** @jsxImportSource preact */
import type { ComponentChildren } from 'preact';
import { createContext } from 'preact';
import { useCallback, useContext, useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import type { Mode, Session } from './api.js';
import { ApiError, tenantBase } from './api.js';
import { SLUG_PATTERN } from '@dunwall/wire';
import type { Status } from '@dunwall/wire';

/** A tenant's slug as the service spells them. */
export const SLUG_RE = new RegExp(SLUG_PATTERN);

/**
 * A pattern of the service as an input's `pattern` attribute: without its anchors (the
 * browser anchors it), a class's last hyphen escaped (the browser compiles it with the v flag).
 */
export const inputPattern = (source: string): string => source.replace(/^\^|\$$/g, '').replaceAll('-]', '\\-]');

/**
 * The address of a page of a tenant's: every one carries its tenant, so that a link copied
 * from the address bar opens the same page for anyone allowed to see it. `rest` is the
 * page's own part (`/subscribers/cus_1?x=y`), empty for the overview.
 */
export function tenantPath(slug: string, rest = ''): string {
  return `/console/t/${encodeURIComponent(slug)}${rest}`;
}

/**
 * A console address in a mode: the test mode's carries `mode=test` in its query (so that a
 * copied link, or a reload, opens the same mode), the live mode's carries none.
 */
export function withMode(url: string, mode: Mode): string {
  const hash = url.indexOf('#');
  const [head, tail] = hash === -1 ? [url, ''] : [url.slice(0, hash), url.slice(hash)];
  const q = head.indexOf('?');
  const path = q === -1 ? head : head.slice(0, q);
  // The address's other parameters as they were written (filters keep their commas).
  const params = (q === -1 ? '' : head.slice(q + 1)).split('&').filter((p) => p !== '' && !/^mode(=|$)/.test(p));
  if (mode === 'test') params.push('mode=test');
  return `${path}${params.length ? `?${params.join('&')}` : ''}${tail}`;
}

/** The mode an address asks for: test with `mode=test`, else live. */
export function modeOfQuery(query: Record<string, string | undefined>): Mode {
  return query.mode === 'test' ? 'test' : 'live';
}

/** What every page reads: who is signed in, and which tenant the pages show. */
export interface ConsoleContext {
  session: Session;
  /** The tenant shown (the address's); null: the operator has not chosen one. */
  slug: string | null;
  /** Where that tenant's resources are (/v1 or /admin/v1/tenants/:slug). */
  base: string;
  /** The mode the pages show and act on: the switch's (the operator's), or the key's. */
  mode: Mode;
  /** The console's address of a page of the tenant shown (`tenantPath`); '/console' + rest when none is. In the mode shown. */
  href: (rest?: string) => string;
  /** Any console address, in the mode shown. */
  link: (url: string) => string;
  /** Shows another tenant: the same section of the console, under its address. */
  setSlug: (slug: string | null) => void;
  /** Says something to screen readers and shows it a moment (a save, a failure). */
  announce: (message: string) => void;
}

export const Ctx = createContext<ConsoleContext | null>(null);

export function useConsole(): ConsoleContext {
  const ctx = useContext(Ctx);
  if (ctx === null) throw new Error('useConsole outside the console');
  return ctx;
}

export function contextFor(
  session: Session,
  slug: string | null,
  mode: Mode,
  setSlug: (s: string | null) => void,
  announce: (m: string) => void,
): ConsoleContext {
  // A key's session carries no mode in its addresses: its key decides.
  const link = (url: string) => (session.kind === 'operator' ? withMode(url, mode) : url);
  return {
    session,
    slug,
    base: slug === null ? '' : tenantBase(session, slug),
    mode,
    href: (rest = '') => link(slug === null ? `/console${rest}` : tenantPath(slug, rest)),
    link,
    setSlug,
    announce,
  };
}

export interface Loaded<T> {
  data: T | null;
  error: ApiError | null;
  loading: boolean;
  reload: () => void;
}

/** Loads `fn` whenever a key changes; a later answer replaces an earlier one, never the reverse. */
export function useLoad<T>(fn: () => Promise<T>, keys: readonly unknown[]): Loaded<T> {
  const [state, setState] = useState<{ data: T | null; error: ApiError | null; loading: boolean }>({
    data: null,
    error: null,
    loading: true,
  });
  const [tick, setTick] = useState(0);
  const seq = useRef(0);
  useEffect(() => {
    const mine = ++seq.current;
    setState((s) => ({ ...s, loading: true }));
    fn().then(
      (data) => mine === seq.current && setState({ data, error: null, loading: false }),
      (err: unknown) => mine === seq.current && setState({ data: null, error: asApiError(err), loading: false }),
    );
  }, [...keys, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { ...state, reload };
}

/** The value of the field an event came from (an input, a text area, a select). */
export const valueOf = (e: Event): string =>
  (e.target as HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement).value;

/** A field's handler that keeps its value with `set`. */
export const keepValue =
  (set: (value: string) => void) =>
  (e: Event): void =>
    set(valueOf(e));

/** An action of a page (a save, a create, a revoke): its last refusal, whether it is under way, and the action. */
export interface Action {
  /** The last refusal; null after a success, and while trying again. */
  error: ApiError | null;
  busy: boolean;
  /**
   * Tries `what`: on success says the words it returns (to screen readers, and shown a
   * moment) and calls `done` (a reload of what it changed); else shows its problem, and
   * gives it to `failed` (to move the focus there). Never rejects.
   */
  run: (what: () => Promise<string | null>, failed?: (error: ApiError) => void) => Promise<void>;
  setError: (error: ApiError | null) => void;
}

/** The console's one way to act: try, announce, reload, else show the problem. */
export function useAction(done?: () => void): Action {
  const announce = useContext(Ctx)?.announce;
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const run = async (what: () => Promise<string | null>, failed?: (error: ApiError) => void): Promise<void> => {
    setBusy(true);
    setError(null);
    try {
      const said = await what();
      if (said !== null) announce?.(said);
      done?.();
    } catch (err) {
      const error = asApiError(err);
      setError(error);
      failed?.(error);
    } finally {
      setBusy(false);
    }
  };
  return { error, busy, run, setError };
}

/**
 * A table's head: a column header for each label; an empty label is a column of actions,
 * named for screen readers only.
 */
export function TableHead(props: { columns: readonly string[] }) {
  return (
    <thead>
      <tr>
        {props.columns.map((label, i) => (
          <th scope="col" key={i}>
            {label === '' ? <span class="sr-only">Actions</span> : label}
          </th>
        ))}
      </tr>
    </thead>
  );
}

export function asApiError(err: unknown): ApiError {
  return err instanceof ApiError ? err : new ApiError(0, 'error', err instanceof Error ? err.message : String(err));
}

/** A page: its title as the one h1, focused when the page opens so a screen reader starts there. */
export function Page(props: { title: string; actions?: ComponentChildren; children: ComponentChildren }) {
  const h1 = useRef<HTMLHeadingElement>(null);
  useLayoutEffect(() => {
    document.title = `${props.title} · Dunwall console`;
    h1.current?.focus();
  }, [props.title]);
  return (
    <section class="page" aria-labelledby="page-title">
      <header class="page-head">
        <h1 id="page-title" tabIndex={-1} ref={h1}>
          {props.title}
        </h1>
        {props.actions ? <div class="page-actions">{props.actions}</div> : null}
      </header>
      {props.children}
    </section>
  );
}

export function Loading(props: { what?: string }) {
  return (
    <p class="loading" role="status">
      Loading{props.what ? ` ${props.what}` : ''}…
    </p>
  );
}

export function ErrorNote(props: { error: ApiError | null; retry?: () => void }) {
  if (props.error === null) return null;
  return (
    <div class="error" role="alert">
      <p>
        {props.error.detail}
        {props.error.code && props.error.code !== 'error' ? <code class="code"> {props.error.code}</code> : null}
      </p>
      {props.retry ? (
        <button type="button" class="button secondary" onClick={props.retry}>
          Try again
        </button>
      ) : null}
    </div>
  );
}

/** What a page needs a tenant for, when the operator has not chosen one. */
export function NeedsTenant() {
  const { link } = useConsole();
  return (
    <Page title="Choose a tenant">
      <p>
        Choose a tenant in the header, or see them all under <a href={link('/console/tenants')}>Tenants</a>.
      </p>
    </Page>
  );
}

/** What a scope hides: said, never a broken page. */
export function Missing(props: { scope: string }) {
  return (
    <p class="note">
      This needs the <code>{props.scope}</code> scope, which the key this session was opened with does not hold.
    </p>
  );
}

export function Stat(props: { label: string; value: ComponentChildren; hint?: ComponentChildren }) {
  return (
    <div class="stat">
      <dt>{props.label}</dt>
      <dd>
        <span class="stat-value">{props.value}</span>
        {props.hint ? <span class="stat-hint">{props.hint}</span> : null}
      </dd>
    </div>
  );
}

const MINOR_UNITS: Record<string, number> = {
  jpy: 0,
  krw: 0,
  vnd: 0,
  clp: 0,
  isk: 0,
  ugx: 0,
  xof: 0,
  xaf: 0,
  bif: 0,
  djf: 0,
  gnf: 0,
  kmf: 0,
  mga: 0,
  pyg: 0,
  rwf: 0,
  vuv: 0,
  xpf: 0,
};

/** An amount in a currency's minor units (Stripe's), in the reader's locale. */
export function money(amount: number, currency: string): string {
  const digits = MINOR_UNITS[currency.toLowerCase()] ?? 2;
  try {
    return new Intl.NumberFormat(undefined, { style: 'currency', currency: currency.toUpperCase() }).format(
      amount / 10 ** digits,
    );
  } catch {
    return `${(amount / 10 ** digits).toFixed(digits)} ${currency.toUpperCase()}`;
  }
}

export function percent(rate: number | null): string {
  return rate === null ? '–' : `${(rate * 100).toFixed(1)} %`;
}

export function count(n: number): string {
  return new Intl.NumberFormat().format(n);
}

export function when(iso: string | null): string {
  if (iso === null) return '–';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

export function day(iso: string): string {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleDateString(undefined, { dateStyle: 'medium', timeZone: 'UTC' });
}

export function duration(seconds: number | null): string {
  if (seconds === null) return '–';
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
  if (seconds < 86_400 * 2) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86_400).toFixed(1)} days`;
}

/** A table that scrolls sideways on a narrow screen: a labelled region a keyboard can reach and scroll. */
export function TableWrap(props: { label: string; class?: string; children: ComponentChildren }) {
  return (
    <div
      class={`table-wrap${props.class ? ` ${props.class}` : ''}`}
      role="region"
      aria-label={props.label}
      tabIndex={0}
    >
      {props.children}
    </div>
  );
}

/**
 * A destructive action asked twice: the first press shows the confirmation, which takes the
 * focus; Escape or Cancel goes back.
 */
export function ConfirmButton(props: {
  label: string;
  confirm: string;
  onConfirm: () => void | Promise<void>;
  disabled?: boolean;
  subject?: string;
}) {
  const [asking, setAsking] = useState(false);
  const yes = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (asking) yes.current?.focus();
  }, [asking]);
  if (!asking) {
    return (
      <button type="button" class="button secondary" disabled={props.disabled} onClick={() => setAsking(true)}>
        {props.label}
        {props.subject ? <span class="sr-only"> {props.subject}</span> : null}
      </button>
    );
  }
  return (
    <span
      class="confirm-inline"
      role="group"
      aria-label={props.confirm}
      onKeyDown={(e) => e.key === 'Escape' && setAsking(false)}
    >
      <button
        type="button"
        class="button danger"
        ref={yes}
        onClick={() => {
          setAsking(false);
          void props.onConfirm();
        }}
      >
        {props.confirm}
      </button>
      <button type="button" class="button secondary" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </span>
  );
}

/** A secret shown this once: selectable, copyable, and said so. */
export function ShownOnce(props: { title: string; value: string; onDone: () => void }) {
  const [copied, setCopied] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(props.value);
      setCopied(true);
    } catch {
      setCopied(false);
    }
  };
  return (
    <section class="card secret" aria-label={props.title} role="alert">
      <h3>{props.title}</h3>
      <p>It is shown this once: keep it now. Dunwall keeps only its digest.</p>
      <p>
        <code class="secret-value">{props.value}</code>
      </p>
      <div class="actions-row">
        <button type="button" class="button secondary" onClick={() => void copy()}>
          {copied ? 'Copied' : 'Copy'}
        </button>
        <button type="button" class="button" onClick={props.onDone}>
          I have kept it
        </button>
      </div>
    </section>
  );
}

export function StatusBadge(props: { status: Status | null }) {
  const s = props.status ?? 'unknown';
  return <span class={`badge badge-${s}`}>{s}</span>;
}
