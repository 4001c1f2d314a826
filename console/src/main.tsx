/** @jsxImportSource preact */
import { render } from 'preact';
import type { ComponentType } from 'preact';
import { useCallback, useEffect, useLayoutEffect, useMemo, useState } from 'preact/hooks';
import { LocationProvider, Router, Route, useLocation, useRoute } from 'preact-iso';
import type { Tenant, TenantList } from '@dunwall/wire';
import type { Mode, Session } from './api.js';
import { api, currentSession, holds, signIn, signOut, useMode, useSession } from './api.js';
import {
  contextFor,
  Ctx,
  ErrorNote,
  keepValue,
  Loading,
  modeOfQuery,
  NeedsTenant,
  Page as UiPage,
  SLUG_RE,
  tenantPath,
  useAction,
  useConsole,
  valueOf,
  withMode,
} from './ui.js';
import { Overview } from './pages/overview.js';
import { Subscribers, SubscriberPage } from './pages/subscribers.js';
import { Settings } from './pages/settings.js';
import { Health } from './pages/health.js';
import { Tenants } from './pages/tenants.js';
import './console.css';

/**
 * A page of one tenant's resources, at /console/t/:slug/...: the address says which tenant.
 * A tenant's session sees only its own (another tenant's address says so, and asks nothing
 * of the service); the operator sees any.
 */
function tenanted<P extends object>(Page: ComponentType<P>): ComponentType<P> {
  return function Tenanted(props: P) {
    const { session, slug } = useConsole();
    const { params } = useRoute();
    const wanted = params.slug ?? '';
    if (!SLUG_RE.test(wanted)) return <NotFound />;
    if (session.kind === 'tenant' && wanted !== session.tenant?.slug) return <NotYourTenant wanted={wanted} />;
    return slug === null ? <NeedsTenant /> : <Page {...props} />;
  };
}

const OverviewPage = tenanted(Overview);
const SubscribersPage = tenanted(Subscribers);
const SubscriberDetail = tenanted(SubscriberPage);
const SettingsPage = tenanted(Settings);
const HealthPage = tenanted(Health);

/** The console's pages of a tenant, by their part after /console/t/:slug. */
const SECTIONS = ['subscribers', 'settings', 'health'] as const;

/** The tenant of an address (/console/t/:slug/...), when it names one the service could have. */
function slugOfPath(path: string): string | null {
  const m = /^\/console\/t\/([^/]+)/.exec(path);
  return m !== null && SLUG_RE.test(m[1] as string) ? (m[1] as string) : null;
}

/** The address's part after the tenant (or after /console on an address without one), query included. */
function restOf(url: string): string {
  const m = /^\/console(?:\/t\/[^/?]+)?(\/[^?]*)?(\?.*)?$/.exec(url);
  const rest = (m?.[1] ?? '').replace(/\/+$/, '');
  return `${rest}${m?.[2] ?? ''}`;
}

/**
 * An address of the console from before the tenant was part of them (/console/subscribers/...):
 * a tenant's session is taken to the same page of its own; the operator chooses a tenant
 * first and is then taken there.
 */
function ToTenant() {
  const { session } = useConsole();
  const { url, route } = useLocation();
  const own = session.tenant?.slug ?? null;
  useLayoutEffect(() => {
    if (own !== null) route(tenantPath(own, restOf(url)), true);
  }, [own, url, route]);
  return own === null ? <NeedsTenant /> : <Loading what="the page" />;
}

/** A tenant's session on another tenant's address: said, and nothing of that tenant asked for. */
function NotYourTenant(props: { wanted: string }) {
  const { session } = useConsole();
  const own = session.tenant?.slug ?? '';
  return (
    <UiPage title="Not your tenant">
      <p class="note" role="status">
        This address is a page of the tenant <code>{props.wanted}</code>, and this session was opened with a key of{' '}
        <code>{own}</code>: a key sees its own tenant only. Sign in with a key of <code>{props.wanted}</code>, or with
        the operator's admin token, to see it.
      </p>
      <p>
        <a href={tenantPath(own)}>The overview of {own}</a>
      </p>
    </UiPage>
  );
}

function SignIn(props: { onSignedIn: (s: Session) => void }) {
  const [credential, setCredential] = useState('');
  const { error, busy, run } = useAction();
  const submit = async (e: Event) => {
    e.preventDefault();
    await run(async () => {
      const session = await signIn(credential.trim());
      // The credential is not kept: the session cookie stands in for it from now on.
      setCredential('');
      props.onSignedIn(session);
      return null;
    });
  };
  useEffect(() => {
    document.title = 'Sign in · Dunwall console';
  }, []);
  return (
    <main id="main" class="signin">
      <form class="card signin-card" onSubmit={submit} aria-labelledby="signin-title">
        <h1 id="signin-title">Dunwall console</h1>
        <p>
          Sign in with one of your secret keys (what it may do is what its scopes allow), or with the operator's admin
          token.
        </p>
        <label for="credential">Secret key or admin token</label>
        <input
          id="credential"
          name="credential"
          type="password"
          autocomplete="off"
          spellcheck={false}
          required
          value={credential}
          onInput={keepValue(setCredential)}
          aria-describedby={error ? 'signin-error' : undefined}
        />
        <div id="signin-error">
          <ErrorNote error={error} />
        </div>
        <button type="submit" class="button" disabled={busy || credential.trim() === ''}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        <p class="hint">The key is sent once; the browser then holds a session cookie only, for 8 hours at most.</p>
      </form>
    </main>
  );
}

/** The operator's choice of tenant: the address's, changed by going to the same section of another. */
function TenantPicker(props: { slug: string | null; setSlug: (s: string | null) => void }) {
  const [tenants, setTenants] = useState<Tenant[] | null>(null);
  useEffect(() => {
    api.get<TenantList>('/admin/v1/tenants').then(
      (page) => setTenants(page.data),
      () => setTenants([]),
    );
  }, []);
  return (
    <label class="picker">
      <span>Tenant</span>
      <select value={props.slug ?? ''} onChange={(e) => props.setSlug(valueOf(e) || null)}>
        <option value="">Choose…</option>
        {(tenants ?? []).map((t) => (
          <option key={t.slug} value={t.slug}>
            {t.slug}
          </option>
        ))}
        {props.slug !== null && tenants !== null && !tenants.some((t) => t.slug === props.slug) ? (
          <option value={props.slug}>{props.slug}</option>
        ) : null}
      </select>
    </label>
  );
}

const NAV: { rest: string; label: string; operatorOnly?: boolean }[] = [
  { rest: '', label: 'Overview' },
  ...SECTIONS.map((rest) => ({ rest: `/${rest}`, label: rest.charAt(0).toUpperCase() + rest.slice(1) })),
];

function Nav(props: { session: Session }) {
  const { path } = useLocation();
  const { href, link } = useConsole();
  const current = (to: string, rest: string) => {
    const at = to.split('?')[0] as string;
    return rest === '' ? path === at || path === '/console' : path === at || path.startsWith(`${at}/`);
  };
  const links = NAV.map((n) => ({ to: href(n.rest), rest: n.rest, label: n.label }));
  if (props.session.kind === 'operator')
    links.push({ to: link('/console/tenants'), rest: '/tenants', label: 'Tenants' });
  return (
    <nav class="nav" aria-label="Console">
      <ul>
        {links.map((n) => (
          <li key={n.label}>
            <a href={n.to} aria-current={current(n.to, n.rest) ? 'page' : undefined}>
              {n.label}
            </a>
          </li>
        ))}
      </ul>
    </nav>
  );
}

/**
 * The test-mode switch: the operator's turns the mode of the address (`mode=test`) on and off
 * on the same page; a key's session shows its key's mode, which it cannot change.
 */
function ModeSwitch(props: { session: Session; mode: Mode; setMode: (m: Mode) => void }) {
  const fixed = props.session.kind === 'tenant';
  return (
    <label class="mode-switch" title={fixed ? "The mode of this session's key" : undefined}>
      <input
        type="checkbox"
        role="switch"
        checked={props.mode === 'test'}
        disabled={fixed}
        aria-describedby={fixed ? 'mode-fixed' : undefined}
        onChange={(e) => props.setMode((e.currentTarget as HTMLInputElement).checked ? 'test' : 'live')}
      />
      <span>Test mode</span>
      {fixed ? (
        <span id="mode-fixed" class="sr-only">
          (the mode of this session's key)
        </span>
      ) : null}
    </label>
  );
}

function Shell(props: { session: Session; onSignOut: () => void }) {
  const { session } = props;
  const { path, url, query, route } = useLocation();
  // The tenant is the address's; a tenant's session always shows its own (another's address says so).
  const slug = session.kind === 'tenant' ? (session.tenant?.slug ?? null) : slugOfPath(path);
  // The mode: the address's for the operator (so a copied link or a reload keeps it), the key's for a key's session.
  const mode: Mode = session.kind === 'tenant' ? (session.tenant?.mode ?? 'live') : modeOfQuery(query);
  // Before any page asks the service anything: every call to the tenant's resources is in this mode.
  useMode(mode);
  // The same page in the other mode; a customer's page leads to the list (a customer of one mode is not one of the other's).
  const setMode = useCallback(
    (next: Mode) => {
      const at = slugOfPath(path);
      const onCustomer = at !== null && restOf(path).startsWith('/subscribers/');
      route(withMode(onCustomer ? tenantPath(at, '/subscribers') : url, next));
    },
    [path, url, route],
  );
  const [message, setMessage] = useState('');
  const setSlug = useCallback(
    (next: string | null) => {
      if (next === null) return route(withMode('/console', mode));
      const rest = restOf(slugOfPath(path) === null ? url : path);
      // From an address without a tenant (a link of before, or /console/tenants): that page of the one chosen.
      if (slugOfPath(path) === null) return route(withMode(tenantPath(next, rest === '/tenants' ? '' : rest), mode));
      // From another tenant's page: the same section (a customer of one is not one of the other), in the same mode.
      const section = SECTIONS.find((s) => rest === `/${s}` || rest.startsWith(`/${s}/`));
      return route(withMode(tenantPath(next, section ? `/${section}` : ''), mode));
    },
    [path, url, route, mode],
  );
  const announce = useCallback((m: string) => {
    setMessage(m);
    setTimeout(() => setMessage((now) => (now === m ? '' : now)), 6000);
  }, []);
  const ctx = useMemo(
    () => contextFor(session, slug, mode, setSlug, announce),
    [session, slug, mode, setSlug, announce],
  );
  return (
    <Ctx.Provider value={ctx}>
      <a class="skip" href="#main">
        Skip to content
      </a>
      {mode === 'test' ? (
        <div class="test-band" role="note">
          Test mode: the pages show and change the tenant's test data, never its live customers.
        </div>
      ) : null}
      <header class={mode === 'test' ? 'top test' : 'top'}>
        <a class="brand" href={ctx.href()}>
          Dunwall
        </a>
        {session.kind === 'operator' ? (
          <TenantPicker slug={slug} setSlug={setSlug} />
        ) : (
          <span class="who">{session.tenant?.slug}</span>
        )}
        <ModeSwitch session={session} mode={mode} setMode={setMode} />
        <span class="role">
          {session.kind === 'operator'
            ? 'operator'
            : holds(session, 'settings:write')
              ? 'tenant'
              : 'tenant (limited key)'}
        </span>
        <button type="button" class="button secondary" onClick={props.onSignOut}>
          Sign out
        </button>
      </header>
      <div class="layout">
        <Nav session={session} />
        <main id="main" tabIndex={-1}>
          {/* A page of one mode is not the other's: the pages start over, and ask again, in the new mode. */}
          <Router key={mode}>
            <Route path="/console/t/:slug" component={OverviewPage} />
            <Route path="/console/t/:slug/subscribers" component={SubscribersPage} />
            <Route path="/console/t/:slug/subscribers/:customerId" component={SubscriberDetail} />
            <Route path="/console/t/:slug/settings" component={SettingsPage} />
            <Route path="/console/t/:slug/health" component={HealthPage} />
            <Route path="/console/tenants" component={Tenants} />
            {/* The addresses without a tenant: the console's first ones, and a bare /console. */}
            <Route path="/console" component={ToTenant} />
            <Route path="/console/subscribers" component={ToTenant} />
            <Route path="/console/subscribers/:customerId" component={ToTenant} />
            <Route path="/console/settings" component={ToTenant} />
            <Route path="/console/health" component={ToTenant} />
            <Route default component={NotFound} />
          </Router>
        </main>
      </div>
      <div class="toast" role="status" aria-live="polite">
        {message}
      </div>
    </Ctx.Provider>
  );
}

function NotFound() {
  return (
    <section class="page">
      <h1>Not found</h1>
      <p>
        There is no such page. <a href="/console">Back to the overview</a>.
      </p>
    </section>
  );
}

function App() {
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  const signedOut = useCallback(() => setSession(null), []);
  useSession(session ?? null, signedOut);
  useEffect(() => {
    currentSession().then(setSession, () => setSession(null));
  }, []);
  if (session === undefined) return <Loading what="the console" />;
  if (session === null) return <SignIn onSignedIn={setSession} />;
  const out = async () => {
    try {
      await signOut();
    } finally {
      setSession(null);
    }
  };
  return (
    <LocationProvider scope="/console">
      <Shell session={session} onSignOut={() => void out()} />
    </LocationProvider>
  );
}

const root = document.getElementById('app');
if (root) render(<App />, root);
