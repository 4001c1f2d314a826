/** @jsxImportSource preact */
import { render } from 'preact';
import type { ComponentType } from 'preact';
import { useCallback, useEffect, useMemo, useState } from 'preact/hooks';
import { LocationProvider, Router, Route, useLocation } from 'preact-iso';
import type { Session } from './api.js';
import { api, currentSession, holds, signIn, signOut, useSession } from './api.js';
import { Ctx, asApiError, contextFor, ErrorNote, Loading, NeedsTenant, useConsole } from './ui.js';
import type { ApiError } from './api.js';
import { Overview } from './pages/overview.js';
import { Subscribers, SubscriberPage } from './pages/subscribers.js';
import { Settings } from './pages/settings.js';
import { Health } from './pages/health.js';
import { Tenants } from './pages/tenants.js';
import './console.css';

const TENANT_KEY = 'dunwall.console.tenant';

/** A page of one tenant's resources: until the operator chooses a tenant, the page says so. */
function tenanted<P extends object>(Page: ComponentType<P>): ComponentType<P> {
  return function Tenanted(props: P) {
    const { slug } = useConsole();
    return slug === null ? <NeedsTenant /> : <Page {...props} />;
  };
}

const OverviewPage = tenanted(Overview);
const SubscribersPage = tenanted(Subscribers);
const SubscriberDetail = tenanted(SubscriberPage);
const SettingsPage = tenanted(Settings);
const HealthPage = tenanted(Health);

function SignIn(props: { onSignedIn: (s: Session) => void }) {
  const [credential, setCredential] = useState('');
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const session = await signIn(credential.trim());
      // The credential is not kept: the session cookie stands in for it from now on.
      setCredential('');
      props.onSignedIn(session);
    } catch (err) {
      setError(asApiError(err));
    } finally {
      setBusy(false);
    }
  };
  useEffect(() => {
    document.title = 'Sign in · Dunwall console';
  }, []);
  return (
    <main id="main" class="signin">
      <form class="card signin-card" onSubmit={submit} aria-labelledby="signin-title">
        <h1 id="signin-title">Dunwall console</h1>
        <p>Sign in with one of your secret keys (what it may do is what its scopes allow), or with the operator's admin token.</p>
        <label for="credential">Secret key or admin token</label>
        <input
          id="credential"
          name="credential"
          type="password"
          autocomplete="off"
          spellcheck={false}
          required
          value={credential}
          onInput={(e) => setCredential((e.target as HTMLInputElement).value)}
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

interface TenantItem {
  slug: string;
}

/** The operator's choice of tenant, remembered for this tab. */
function TenantPicker(props: { slug: string | null; setSlug: (s: string | null) => void }) {
  const [tenants, setTenants] = useState<TenantItem[] | null>(null);
  useEffect(() => {
    api.get<{ data: TenantItem[] }>('/admin/v1/tenants').then(
      (page) => setTenants(page.data),
      () => setTenants([]),
    );
  }, []);
  return (
    <label class="picker">
      <span>Tenant</span>
      <select value={props.slug ?? ''} onChange={(e) => props.setSlug((e.target as HTMLSelectElement).value || null)}>
        <option value="">Choose…</option>
        {(tenants ?? []).map((t) => (
          <option key={t.slug} value={t.slug}>
            {t.slug}
          </option>
        ))}
        {props.slug !== null && tenants !== null && !tenants.some((t) => t.slug === props.slug) ? <option value={props.slug}>{props.slug}</option> : null}
      </select>
    </label>
  );
}

const NAV: { href: string; label: string; operatorOnly?: boolean }[] = [
  { href: '/console', label: 'Overview' },
  { href: '/console/subscribers', label: 'Subscribers' },
  { href: '/console/settings', label: 'Settings' },
  { href: '/console/health', label: 'Health' },
  { href: '/console/tenants', label: 'Tenants', operatorOnly: true },
];

function Nav(props: { session: Session }) {
  const { path } = useLocation();
  const current = (href: string) => (href === '/console' ? path === '/console' || path === '/console/' : path.startsWith(href));
  return (
    <nav class="nav" aria-label="Console">
      <ul>
        {NAV.filter((n) => !n.operatorOnly || props.session.kind === 'operator').map((n) => (
          <li key={n.href}>
            <a href={n.href} aria-current={current(n.href) ? 'page' : undefined}>
              {n.label}
            </a>
          </li>
        ))}
      </ul>
    </nav>
  );
}

function Shell(props: { session: Session; onSignOut: () => void }) {
  const { session } = props;
  const [slug, setSlugState] = useState<string | null>(session.tenant?.slug ?? sessionStorage.getItem(TENANT_KEY));
  const [message, setMessage] = useState('');
  const setSlug = useCallback((s: string | null) => {
    if (s === null) sessionStorage.removeItem(TENANT_KEY);
    else sessionStorage.setItem(TENANT_KEY, s);
    setSlugState(s);
  }, []);
  const announce = useCallback((m: string) => {
    setMessage(m);
    setTimeout(() => setMessage((now) => (now === m ? '' : now)), 6000);
  }, []);
  const ctx = useMemo(() => contextFor(session, slug, setSlug, announce), [session, slug, setSlug, announce]);
  return (
    <Ctx.Provider value={ctx}>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href="/console">
          Dunwall
        </a>
        {session.kind === 'operator' ? <TenantPicker slug={slug} setSlug={setSlug} /> : <span class="who">{session.tenant?.slug}</span>}
        <span class="role">{session.kind === 'operator' ? 'operator' : holds(session, 'settings:write') ? 'tenant' : 'tenant (limited key)'}</span>
        <button type="button" class="button secondary" onClick={props.onSignOut}>
          Sign out
        </button>
      </header>
      <div class="layout">
        <Nav session={session} />
        <main id="main" tabIndex={-1}>
          <Router>
            <Route path="/console" component={OverviewPage} />
            <Route path="/console/subscribers" component={SubscribersPage} />
            <Route path="/console/subscribers/:customerId" component={SubscriberDetail} />
            <Route path="/console/settings" component={SettingsPage} />
            <Route path="/console/health" component={HealthPage} />
            <Route path="/console/tenants" component={Tenants} />
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
      sessionStorage.removeItem(TENANT_KEY);
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
