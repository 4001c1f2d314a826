/** @jsxImportSource preact */
import { useState } from 'preact/hooks';
import { api } from '../api.js';
import { SLUG_PATTERN } from '@dunwall/wire';
import type { CreateTenantBody, Tenant, TenantList, TenantWithKeys, UpdateTenantBody } from '@dunwall/wire';
import {
  ErrorNote,
  inputPattern,
  keepValue,
  Loading,
  Page,
  TableHead,
  TableWrap,
  tenantPath,
  useAction,
  useConsole,
  useLoad,
  when,
} from '../ui.js';

/** The operator's tenants: every one, a new one (its keys shown once), suspension. */
export function Tenants() {
  const { session, link } = useConsole();
  const loaded = useLoad(
    () => (session.kind === 'operator' ? api.get<TenantList>('/admin/v1/tenants') : Promise.resolve({ data: [] })),
    [session],
  );
  const [newSlug, setNewSlug] = useState('');
  const [tier, setTier] = useState('');
  const [created, setCreated] = useState<TenantWithKeys | null>(null);
  const { error, run } = useAction(loaded.reload);
  if (session.kind !== 'operator') {
    return (
      <Page title="Tenants">
        <p class="note">Only the operator manages tenants.</p>
      </Page>
    );
  }
  const create = (e: Event) => {
    e.preventDefault();
    void run(async () => {
      const t = await api.post<TenantWithKeys>('/admin/v1/tenants', {
        slug: newSlug.trim(),
        ...(tier.trim() ? { tier: tier.trim() } : {}),
      } satisfies CreateTenantBody);
      setCreated(t);
      setNewSlug('');
      return `Tenant ${t.slug} created.`;
    });
  };
  const suspend = (t: Tenant) =>
    run(async () => {
      await api.patch(`/admin/v1/tenants/${encodeURIComponent(t.slug)}`, {
        suspended: !t.suspended,
      } satisfies UpdateTenantBody);
      return `Tenant ${t.slug} ${t.suspended ? 'resumed' : 'suspended'}.`;
    });
  return (
    <Page title="Tenants">
      <ErrorNote error={loaded.error ?? error} retry={loaded.error ? loaded.reload : undefined} />
      {loaded.loading && loaded.data === null ? <Loading what="the tenants" /> : null}
      {loaded.data ? (
        <TableWrap label="Tenants" class="card">
          <table>
            <caption class="sr-only">Tenants</caption>
            <TableHead columns={['Slug', 'Tier', 'Mode', 'State', 'Created', '']} />
            <tbody>
              {loaded.data.data.map((t) => (
                <tr key={t.slug}>
                  <th scope="row">{t.slug}</th>
                  <td>{t.tier}</td>
                  <td>{t.livemode === null ? 'any' : t.livemode ? 'live' : 'test'}</td>
                  <td>
                    {t.suspended ? (
                      <span class="badge badge-lockout">suspended</span>
                    ) : (
                      <span class="badge badge-active">active</span>
                    )}
                  </td>
                  <td>{when(t.created_at)}</td>
                  <td class="actions">
                    <a class="button secondary" href={link(tenantPath(t.slug))}>
                      Open<span class="sr-only"> {t.slug}</span>
                    </a>
                    <button type="button" class="button secondary" onClick={() => void suspend(t)}>
                      {t.suspended ? 'Resume' : 'Suspend'}
                      <span class="sr-only"> {t.slug}</span>
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
      <form class="card form" onSubmit={create} aria-labelledby="new-tenant">
        <h2 id="new-tenant">New tenant</h2>
        <div class="row">
          <label>
            <span>Slug</span>
            <input required pattern={inputPattern(SLUG_PATTERN)} value={newSlug} onInput={keepValue(setNewSlug)} />
          </label>
          <label>
            <span>Tier (optional)</span>
            <input value={tier} onInput={keepValue(setTier)} />
          </label>
        </div>
        <button type="submit" class="button">
          Create
        </button>
      </form>
      {created ? (
        <section class="card secret" aria-labelledby="created-title">
          <h2 id="created-title">{created.slug}: its keys, shown this once</h2>
          <dl class="kv">
            <dt>Publishable key</dt>
            <dd>
              <code>{created.publishable_key}</code>
            </dd>
            <dt>HMAC secret</dt>
            <dd>
              <code>{created.hmac_secret}</code>
            </dd>
          </dl>
          <button type="button" class="button secondary" onClick={() => setCreated(null)}>
            I have kept them
          </button>
        </section>
      ) : null}
    </Page>
  );
}
