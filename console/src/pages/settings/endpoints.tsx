/** @jsxImportSource preact */
import { useState } from 'preact/hooks';
import { api, holds } from '../../api.js';
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
import type {
  CreateEndpointBody,
  DeliveryAttemptList,
  Endpoint,
  EndpointList,
  EndpointMessage as Message,
  EndpointMessageList,
  EndpointWithSecret,
  UpdateEndpointBody,
} from '@dunwall/wire';

const LIMIT = 20;

/** An endpoint's recent attempts and its messages not delivered yet, each sent again on demand. */
function Deliveries(props: { endpoint: Endpoint; canWrite: boolean }) {
  const { base } = useConsole();
  const path = `${base}/webhook-endpoints/${encodeURIComponent(props.endpoint.id)}`;
  const loaded = useLoad(async () => {
    const [attempts, pending, failed] = await Promise.all([
      api.get<DeliveryAttemptList>(`${path}/attempts?limit=${LIMIT}`),
      api.get<EndpointMessageList>(`${path}/messages?state=pending&limit=${LIMIT}`),
      api.get<EndpointMessageList>(`${path}/messages?state=failed&limit=${LIMIT}`),
    ]);
    // Not delivered: given up, or still being retried (a retry sends it now, with a new window).
    return { attempts: attempts.data, undelivered: [...failed.data, ...pending.data] };
  }, [path]);
  const { error, run } = useAction(loaded.reload);
  const retry = (m: Message) =>
    run(async () => {
      await api.post(`${path}/messages/${encodeURIComponent(m.message_id)}/retry`);
      return `Message ${m.message_id} queued again.`;
    });
  if (loaded.loading && loaded.data === null) return <Loading what="the deliveries" />;
  return (
    <div class="deliveries-panel">
      <ErrorNote error={loaded.error ?? error} retry={loaded.reload} />
      {loaded.data ? (
        <>
          <h4>Not delivered</h4>
          {loaded.data.undelivered.length === 0 ? (
            <p class="muted">None: every message was delivered.</p>
          ) : (
            <TableWrap label={`Messages not delivered to ${props.endpoint.url}`}>
              <table>
                <TableHead columns={['Message', 'Customer', 'State', 'Attempts', 'Last answer', '']} />
                <tbody>
                  {loaded.data.undelivered.map((m) => (
                    <tr key={m.message_id}>
                      <th scope="row">
                        <code>{m.message_id}</code> <span class="muted">{m.type}</span>
                      </th>
                      <td>{m.processor_customer_id}</td>
                      <td>{m.state === 'failed' ? 'given up' : 'retrying'}</td>
                      <td>{m.attempts}</td>
                      <td>
                        {m.last_status === null ? (m.last_error ?? '–') : `HTTP ${m.last_status}`} ·{' '}
                        {when(m.last_attempt_at)}
                      </td>
                      <td class="actions">
                        {props.canWrite ? (
                          <button type="button" class="button secondary" onClick={() => void retry(m)}>
                            Retry now <span class="sr-only">{m.message_id}</span>
                          </button>
                        ) : null}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableWrap>
          )}
          <h4>Latest attempts</h4>
          {loaded.data.attempts.length === 0 ? (
            <p class="muted">None yet.</p>
          ) : (
            <TableWrap label={`Latest attempts of ${props.endpoint.url}`}>
              <table>
                <TableHead columns={['When', 'Message', 'Outcome', 'Answer', 'Time']} />
                <tbody>
                  {loaded.data.attempts.map((a, i) => (
                    <tr key={`${a.message_id}-${i}`}>
                      <th scope="row">{when(a.attempted_at)}</th>
                      <td>
                        <code>{a.message_id}</code>
                      </td>
                      <td>{a.outcome}</td>
                      <td>{a.status_code === null ? (a.error ?? '–') : `HTTP ${a.status_code}`}</td>
                      <td>{a.latency_ms} ms</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableWrap>
          )}
        </>
      ) : null}
    </div>
  );
}

export function EndpointsSection() {
  const { session, base } = useConsole();
  const canRead = holds(session, 'subscribers:read');
  const canWrite = holds(session, 'webhooks:write');
  const endpoints = useLoad(
    () => (canRead ? api.get<EndpointList>(`${base}/webhook-endpoints`) : Promise.resolve(null)),
    [base, canRead],
  );
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [open, setOpen] = useState<string | null>(null);
  const [secret, setSecret] = useState<{ title: string; value: string } | null>(null);
  const { error, run } = useAction(endpoints.reload);
  const notEntitled = (endpoints.error ?? error)?.code === 'downstream_webhooks_not_entitled';

  const create = (e: Event) => {
    e.preventDefault();
    void run(async () => {
      const created = await api.post<EndpointWithSecret>(`${base}/webhook-endpoints`, {
        url: url.trim(),
        ...(description.trim() ? { description: description.trim() } : {}),
      } satisfies CreateEndpointBody);
      setSecret({ title: `The signing secret of ${created.url}`, value: created.secret });
      setUrl('');
      setDescription('');
      return 'Webhook endpoint created.';
    });
  };
  const toggle = (ep: Endpoint) =>
    run(async () => {
      await api.patch(`${base}/webhook-endpoints/${encodeURIComponent(ep.id)}`, {
        enabled: !ep.enabled,
      } satisfies UpdateEndpointBody);
      return `Endpoint ${ep.url} ${ep.enabled ? 'disabled' : 'enabled'}.`;
    });
  const remove = (ep: Endpoint) =>
    run(async () => {
      await api.del(`${base}/webhook-endpoints/${encodeURIComponent(ep.id)}`);
      return `Endpoint ${ep.url} deleted.`;
    });

  return (
    <section class="card settings-section" aria-labelledby="endpoints-title">
      <h2 id="endpoints-title">Webhook endpoints</h2>
      {!canRead ? <Missing scope="subscribers:read" /> : null}
      {notEntitled ? (
        <p class="note">
          This tenant's tier does not include downstream webhooks: ask the operator for a tier with downstream_webhooks.
        </p>
      ) : (
        <ErrorNote error={endpoints.error ?? error} />
      )}
      {secret ? <ShownOnce title={secret.title} value={secret.value} onDone={() => setSecret(null)} /> : null}
      {endpoints.loading && endpoints.data === null && canRead ? <Loading what="the endpoints" /> : null}
      {endpoints.data?.data.length === 0 ? (
        <p class="muted">No endpoint yet: status changes are not sent anywhere.</p>
      ) : null}
      {endpoints.data?.data.map((ep) => (
        <article class="endpoint" key={ep.id} aria-label={ep.url}>
          <div class="endpoint-head">
            <div>
              <span class="endpoint-url">{ep.url}</span>{' '}
              {ep.enabled ? (
                <span class="badge badge-active">enabled</span>
              ) : (
                <span class="badge badge-lockout">disabled{ep.disabled_reason ? `: ${ep.disabled_reason}` : ''}</span>
              )}
              <div class="muted">
                {ep.description ? `${ep.description} · ` : ''}
                {ep.event_types === null ? 'every event type' : ep.event_types.join(', ')} · {ep.pending} pending
                {ep.failing_since ? ` · failing since ${when(ep.failing_since)}` : ''}
              </div>
            </div>
            <div class="actions-row">
              <button
                type="button"
                class="button secondary"
                aria-expanded={open === ep.id}
                onClick={() => setOpen(open === ep.id ? null : ep.id)}
              >
                {open === ep.id ? 'Hide deliveries' : 'Deliveries'}
              </button>
              {canWrite ? (
                <button type="button" class="button secondary" onClick={() => void toggle(ep)}>
                  {ep.enabled ? 'Disable' : 'Enable'}
                </button>
              ) : null}
              {canWrite ? (
                <ConfirmButton
                  label="Delete"
                  subject={ep.url}
                  confirm={`Delete ${ep.url}`}
                  onConfirm={() => remove(ep)}
                />
              ) : null}
            </div>
          </div>
          {open === ep.id ? <Deliveries endpoint={ep} canWrite={canWrite} /> : null}
        </article>
      ))}
      {canWrite && !notEntitled ? (
        <form class="form" onSubmit={create} aria-labelledby="new-endpoint-title">
          <h3 id="new-endpoint-title">New endpoint</h3>
          <div class="row">
            <label>
              <span>URL (https)</span>
              <input
                type="url"
                name="endpoint-url"
                required
                placeholder="https://"
                value={url}
                onInput={keepValue(setUrl)}
              />
            </label>
            <label>
              <span>Description (optional)</span>
              <input
                name="endpoint-description"
                maxLength={200}
                value={description}
                onInput={keepValue(setDescription)}
              />
            </label>
          </div>
          <button type="submit" class="button">
            Add endpoint
          </button>
        </form>
      ) : null}
      {canRead && !canWrite ? <Missing scope="webhooks:write" /> : null}
    </section>
  );
}
