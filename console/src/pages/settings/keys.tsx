/** @jsxImportSource preact */
import { useState } from 'preact/hooks';
import { api, holds } from '../../api.js';
import { SCOPES } from '@dunwall/wire';
import type { CreateKeyBody, Scope, SecretKey as Key, SecretKeyList, SecretKeyWithSecret } from '@dunwall/wire';
import {
  ConfirmButton,
  ErrorNote,
  keepValue,
  Loading,
  Missing,
  ShownOnce,
  TableHead,
  TableWrap,
  useAction,
  useConsole,
  useLoad,
  when,
} from '../../ui.js';

const SCOPE_WORDS: Record<Scope, string> = {
  'status:read': "a customer's status, as the lookup answers it",
  'subscribers:read': 'subscribers, analytics, health, webhook endpoints (read)',
  'subscribers:write': 'overrides',
  'settings:write': 'branding, policy and the other settings',
  'webhooks:write': 'webhook endpoints (write), retries',
  'keys:write': 'secret keys',
  'stripe:write': 'the Stripe signing secret (it decides statuses, as an override does)',
};

export function KeysSection() {
  const { session, base } = useConsole();
  const allowed = holds(session, 'keys:write');
  const keys = useLoad(
    () => (allowed ? api.get<SecretKeyList>(`${base}/keys`) : Promise.resolve(null)),
    [base, allowed],
  );
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<Scope[]>(['status:read']);
  const [expires, setExpires] = useState('');
  const [secret, setSecret] = useState<{ title: string; value: string } | null>(null);
  const { error, run } = useAction(keys.reload);
  const create = (e: Event) => {
    e.preventDefault();
    void run(async () => {
      const created = await api.post<SecretKeyWithSecret>(`${base}/keys`, {
        name: name.trim(),
        scopes,
        ...(expires ? { expires_at: new Date(expires).toISOString() } : {}),
      } satisfies CreateKeyBody);
      setSecret({ title: `The secret key "${created.name}"`, value: created.secret_key });
      setName('');
      return `Key ${created.name} created.`;
    });
  };
  const rotate = (k: Key) =>
    run(async () => {
      const rotated = await api.post<SecretKeyWithSecret>(`${base}/keys/${encodeURIComponent(k.id)}/rotate`, {});
      setSecret({
        title: `The new secret of "${k.name}" (the old one works until ${when(rotated.previous_expires_at)})`,
        value: rotated.secret_key,
      });
      return `Key ${k.name} rotated.`;
    });
  const revoke = (k: Key) =>
    run(async () => {
      await api.del(`${base}/keys/${encodeURIComponent(k.id)}`);
      return `Key ${k.name} revoked.`;
    });

  return (
    <section class="card settings-section" aria-labelledby="keys-title">
      <h2 id="keys-title">Secret keys</h2>
      {!allowed ? <Missing scope="keys:write" /> : null}
      {allowed ? (
        <>
          <p class="hint">
            For your servers only, never a page or an app. A key can grant no scope the key of this session lacks.
          </p>
          {secret ? <ShownOnce title={secret.title} value={secret.value} onDone={() => setSecret(null)} /> : null}
          <ErrorNote error={keys.error ?? error} />
          {keys.loading && keys.data === null ? <Loading what="the keys" /> : null}
          {keys.data ? (
            <TableWrap label="Secret keys">
              <table>
                <caption class="sr-only">Secret keys</caption>
                <TableHead columns={['Name', 'Key', 'Scopes', 'Last used', 'Expires', '']} />
                <tbody>
                  {keys.data.data.map((k) => (
                    <tr key={k.id}>
                      <th scope="row">{k.name}</th>
                      <td>
                        <code class="nowrap">{k.prefix}…</code>
                      </td>
                      <td>{k.scopes.join(', ')}</td>
                      <td>{when(k.last_used_at)}</td>
                      <td>{k.expires_at ? when(k.expires_at) : 'never'}</td>
                      <td class="actions">
                        <ConfirmButton
                          label="Rotate"
                          subject={k.name}
                          confirm={`Rotate ${k.name} now`}
                          onConfirm={() => rotate(k)}
                        />
                        <ConfirmButton
                          label="Revoke"
                          subject={k.name}
                          confirm={`Revoke ${k.name} for good`}
                          onConfirm={() => revoke(k)}
                        />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableWrap>
          ) : null}
          <form class="form" onSubmit={create} aria-labelledby="new-key-title">
            <h3 id="new-key-title">New key</h3>
            <div class="row">
              <label>
                <span>Name (what it is for)</span>
                <input name="key-name" required maxLength={100} value={name} onInput={keepValue(setName)} />
              </label>
              <label>
                <span>Expires (optional)</span>
                <input type="datetime-local" name="key-expires" value={expires} onInput={keepValue(setExpires)} />
              </label>
            </div>
            <fieldset>
              <legend>Scopes</legend>
              <div class="scope-list">
                {SCOPES.map((scope) => (
                  <label class="check" key={scope}>
                    <input
                      type="checkbox"
                      name="scope"
                      value={scope}
                      checked={scopes.includes(scope)}
                      onChange={(e) => {
                        const on = (e.target as HTMLInputElement).checked;
                        setScopes((s) => (on ? [...s, scope] : s.filter((x) => x !== scope)));
                      }}
                    />
                    <span>
                      <code>{scope}</code> <span class="muted">{SCOPE_WORDS[scope]}</span>
                    </span>
                  </label>
                ))}
              </div>
            </fieldset>
            <button type="submit" class="button" disabled={name.trim() === '' || scopes.length === 0}>
              Create key
            </button>
          </form>
        </>
      ) : null}
    </section>
  );
}
