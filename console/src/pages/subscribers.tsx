/** @jsxImportSource preact */
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { useLocation, useRoute } from 'preact-iso';
import { api, holds, qs } from '../api.js';
import type { ApiError } from '../api.js';
import {
  asApiError,
  ErrorNote,
  inputPattern,
  keepValue,
  Loading,
  Missing,
  money,
  Page,
  Stat,
  StatusBadge,
  TableHead,
  TableWrap,
  useAction,
  useConsole,
  useLoad,
  valueOf,
  when,
} from '../ui.js';
import { CUSTOMER_ID_PATTERN, REASON_PATTERN, STATUSES } from '@dunwall/wire';
import type {
  CustomerMessage as Message,
  CustomerMessageList,
  Episode,
  HistoryEntry,
  PutSubscriberBody,
  Status,
  Subscriber,
  SubscriberPage as SubscriberList,
} from '@dunwall/wire';

/**
 * The tenant's subscribers (filters kept in the address, so a reload or a shared link shows
 * the same page), and a customer's page: its status, episodes, a timeline of every change
 * and every webhook it raised with their causes, and the override.
 */

const PAGE_SIZES = [10, 25, 50, 100] as const;
const DEFAULT_PAGE_SIZE = 50;
/** The service's own patterns: checked here to say so before asking. */
const CUSTOMER_RE = new RegExp(CUSTOMER_ID_PATTERN);

type Delivery = Message['deliveries'][number];

/** A comma list of the address, kept to known statuses, in their order, once each. */
function statusesOf(value: string | undefined): Status[] {
  const given = new Set((value ?? '').split(','));
  return STATUSES.filter((s) => given.has(s));
}

/** A customer's page, under the tenant's address (`href` of the console's context). */
const customerPath = (href: (rest: string) => string, id: string) => href(`/subscribers/${encodeURIComponent(id)}`);

interface Filters {
  status: Status[];
  derived: Status[];
  limit: number;
  cursor?: string | undefined;
}

function listUrl(href: (rest: string) => string, f: Filters): string {
  return href(
    `/subscribers${qs({
      status: f.status.join(','),
      derived_status: f.derived.join(','),
      limit: f.limit === DEFAULT_PAGE_SIZE ? undefined : f.limit,
      cursor: f.cursor,
    })}`,
  );
}

function StatusChecks(props: { legend: string; hint: string; chosen: Status[]; onChange: (next: Status[]) => void }) {
  return (
    <fieldset class="checks">
      <legend>{props.legend}</legend>
      {STATUSES.map((s) => (
        <label key={s} class="check">
          <input
            type="checkbox"
            checked={props.chosen.includes(s)}
            onChange={(e) => {
              const on = (e.target as HTMLInputElement).checked;
              props.onChange(STATUSES.filter((x) => (x === s ? on : props.chosen.includes(x))));
            }}
          />
          {s}
        </label>
      ))}
      <span class="hint">{props.hint}</span>
    </fieldset>
  );
}

/** An exact customer id: its page, or "no such subscriber". */
function Search(props: { base: string }) {
  const { route } = useLocation();
  const { href } = useConsole();
  const [id, setId] = useState('');
  const [busy, setBusy] = useState(false);
  const [note, setNote] = useState<string | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    const wanted = id.trim();
    setError(null);
    if (!CUSTOMER_RE.test(wanted)) {
      setNote('A customer id is cus_ followed by letters, digits or underscores, as Stripe gives it.');
      return;
    }
    setBusy(true);
    setNote(null);
    try {
      await api.get(`${props.base}/subscribers/${encodeURIComponent(wanted)}`);
      route(customerPath(href, wanted));
    } catch (err) {
      const failure = asApiError(err);
      if (failure.status === 404) setNote(`No such subscriber: this tenant has no record or history of ${wanted}.`);
      else setError(failure);
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card form search" role="search" aria-label="Find a customer" onSubmit={submit}>
      <div class="row">
        <label>
          <span>Customer id</span>
          <input
            name="customer"
            value={id}
            placeholder="cus_…"
            autocomplete="off"
            spellcheck={false}
            aria-describedby="search-note"
            onInput={keepValue(setId)}
          />
        </label>
        <button type="submit" class="button" disabled={busy || id.trim() === ''}>
          {busy ? 'Finding…' : 'Find'}
        </button>
      </div>
      <p id="search-note" class={note ? 'note' : 'sr-only'} role="status">
        {note ?? ''}
      </p>
      <ErrorNote error={error} />
    </form>
  );
}

export function Subscribers() {
  const { session, base, href } = useConsole();
  const { query, route } = useLocation();
  const allowed = holds(session, 'subscribers:read');
  const filters: Filters = {
    status: statusesOf(query.status),
    derived: statusesOf(query.derived_status),
    limit: PAGE_SIZES.find((n) => String(n) === query.limit) ?? DEFAULT_PAGE_SIZE,
    cursor: query.cursor !== undefined && CUSTOMER_RE.test(query.cursor) ? query.cursor : undefined,
  };
  const key = listUrl(href, filters);
  const loaded = useLoad(async () => {
    if (!allowed) return null;
    return api.get<SubscriberList>(
      `${base}/subscribers${qs({ status: filters.status.join(','), derived_status: filters.derived.join(','), limit: filters.limit, cursor: filters.cursor })}`,
    );
  }, [base, allowed, key]);
  // A new filter starts again from the first page.
  const change = (next: Partial<Filters>) => route(listUrl(href, { ...filters, cursor: undefined, ...next }));
  const page = loaded.data;
  return (
    <Page title="Subscribers">
      {!allowed ? (
        <Missing scope="subscribers:read" />
      ) : (
        <>
          <Search base={base} />
          <form class="card form filters" aria-label="Filters" onSubmit={(e) => e.preventDefault()}>
            <StatusChecks
              legend="Answered status"
              hint="What the lookup answers, after the policy."
              chosen={filters.status}
              onChange={(status) => change({ status })}
            />
            <StatusChecks
              legend="Derived status"
              hint="What Stripe's events (or an override) say, before the policy."
              chosen={filters.derived}
              onChange={(derived) => change({ derived })}
            />
            <label class="page-size">
              <span>Rows per page</span>
              <select value={String(filters.limit)} onChange={(e) => change({ limit: Number(valueOf(e)) })}>
                {PAGE_SIZES.map((n) => (
                  <option key={n} value={String(n)}>
                    {n}
                  </option>
                ))}
              </select>
            </label>
          </form>
          <ErrorNote error={loaded.error} retry={loaded.reload} />
          {loaded.loading && page === null ? <Loading what="the subscribers" /> : null}
          {page !== null ? (
            <section class="card" aria-labelledby="list-title">
              <h2 id="list-title">
                {filters.status.length || filters.derived.length ? 'Matching subscribers' : 'Every subscriber'}
                {filters.cursor ? <span class="muted"> (after {filters.cursor})</span> : null}
              </h2>
              {page.data.length === 0 ? (
                <p class="muted">{filters.cursor ? 'Nothing more.' : 'No subscriber matches these filters.'}</p>
              ) : (
                <TableWrap label="Subscribers">
                  <table class="one-line">
                    <caption class="sr-only">Subscribers, in customer id order</caption>
                    <TableHead columns={['Customer', 'Status', 'Derived', 'Reason', 'Changed']} />
                    <tbody>
                      {page.data.map((r) => (
                        <tr key={r.processor_customer_id}>
                          <th scope="row">
                            <a href={customerPath(href, r.processor_customer_id)}>{r.processor_customer_id}</a>
                          </th>
                          <td>
                            <StatusBadge status={r.status} />
                          </td>
                          <td>
                            <StatusBadge status={r.derived_status} />
                          </td>
                          <td>{r.reason.replace(/_/g, ' ')}</td>
                          <td>{when(r.updated_at)}</td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                </TableWrap>
              )}
              <nav class="pager" aria-label="Pages">
                {filters.cursor ? (
                  <a class="button secondary" href={listUrl(href, { ...filters, cursor: undefined })}>
                    First page
                  </a>
                ) : null}
                {page.next_cursor ? (
                  <a class="button secondary" href={listUrl(href, { ...filters, cursor: page.next_cursor })}>
                    Next page
                  </a>
                ) : null}
              </nav>
            </section>
          ) : null}
        </>
      )}
    </Page>
  );
}

/* A customer's page. */

const RULES: Record<NonNullable<HistoryEntry['policy_rule']>, string> = {
  grace_ended: 'grace ended',
  escalated: 'escalated: unresolved for too long',
  policy_changed: 'the policy changed',
};

/** What caused a history entry, in words. */
export function causeOf(h: HistoryEntry): string {
  if (h.source === 'stripe') {
    const what = `Stripe ${h.event_type ?? 'event'}${h.event_id ? ` ${h.event_id}` : ''}`;
    return h.decline_code ? `${what} (${h.decline_code})` : what;
  }
  if (h.source === 'policy') return `policy: ${RULES[h.policy_rule ?? 'policy_changed']}`;
  const who = h.secret_key_id ? `key ${h.secret_key_id}` : 'the operator';
  switch (h.admin_action) {
    case 'set_status':
      return `override by ${who}`;
    case 'clear_override':
      return `override cleared by ${who}`;
    case 'delete':
      return `removed by ${who}`;
    default:
      return `change by ${who}`;
  }
}

function whatHappened(h: HistoryEntry) {
  if (h.effect === 'removed') return <>No record any more: unknown, so answered active</>;
  if (h.effect === 'none') return <>Recorded; the status did not change</>;
  return (
    <>
      Now <StatusBadge status={h.status} />
      {h.derived_status !== h.status ? (
        <>
          {' '}
          (derived <StatusBadge status={h.derived_status} />)
        </>
      ) : null}
      {h.reason ? <span class="muted"> · {h.reason.replace(/_/g, ' ')}</span> : null}
      {h.lockout_at ? <span class="muted"> · lockout scheduled {when(h.lockout_at)}</span> : null}
    </>
  );
}

function deliveryWords(d: Delivery): string {
  const tries = `${d.attempts} attempt${d.attempts === 1 ? '' : 's'}`;
  const last = d.last_attempt_at
    ? `, last ${when(d.last_attempt_at)}${d.last_status !== null ? ` (HTTP ${d.last_status})` : ' (no answer)'}`
    : '';
  if (d.state === 'delivered') return `delivered after ${tries}${last}`;
  if (d.state === 'failed') return `failed after ${tries}${last}`;
  return d.attempts === 0 ? 'waiting: not tried yet' : `waiting after ${tries}${last}`;
}

type TimelineItem =
  | { kind: 'change'; at: number; order: number; entry: HistoryEntry }
  | { kind: 'webhook'; at: number; order: number; message: Message };

/** The history and the webhooks in one list, newest first; a webhook before the change that raised it. */
function timelineOf(history: HistoryEntry[], messages: Message[]): TimelineItem[] {
  const items: TimelineItem[] = [
    ...history.map((entry, i) => ({ kind: 'change' as const, at: Date.parse(entry.recorded_at), order: i * 2, entry })),
    ...messages.map((message) => ({
      kind: 'webhook' as const,
      at: Date.parse(message.created_at),
      order: message.sequence,
      message,
    })),
  ];
  return items.sort((a, b) => b.at - a.at || (a.kind === b.kind ? b.order - a.order : a.kind === 'webhook' ? -1 : 1));
}

function Timeline(props: { history: HistoryEntry[]; messages: Message[] | null }) {
  const items = useMemo(() => timelineOf(props.history, props.messages ?? []), [props.history, props.messages]);
  if (items.length === 0) return <p class="muted">Nothing recorded yet.</p>;
  return (
    <ol class="timeline">
      {items.map((item) =>
        item.kind === 'change' ? (
          <li key={`h${item.order}`} class="tl-change">
            <p class="tl-head">
              <time dateTime={item.entry.recorded_at}>{when(item.entry.recorded_at)}</time> {whatHappened(item.entry)}
            </p>
            <p class="tl-cause">
              {causeOf(item.entry)}
              {item.entry.episode ? <span class="muted"> · episode {item.entry.episode}</span> : null}
              {Math.abs(Date.parse(item.entry.occurred_at) - item.at) > 60_000 ? (
                <span class="muted"> · dated {when(item.entry.occurred_at)}</span>
              ) : null}
            </p>
          </li>
        ) : (
          <li key={item.message.message_id} class="tl-webhook">
            <p class="tl-head">
              <time dateTime={item.message.created_at}>{when(item.message.created_at)}</time> Webhook{' '}
              {item.message.type} <span class="muted">#{item.message.sequence}</span>
            </p>
            <p class="tl-cause">
              <code>{item.message.message_id}</code>
            </p>
            {item.message.deliveries.length === 0 ? (
              <p class="tl-cause muted">Queued for no endpoint (none enabled took this type then).</p>
            ) : (
              <ul class="deliveries">
                {item.message.deliveries.map((d) => (
                  <li key={d.endpoint_id} class={`delivery delivery-${d.state}`}>
                    <code>{d.endpoint_id}</code>: {deliveryWords(d)}
                  </li>
                ))}
              </ul>
            )}
          </li>
        ),
      )}
    </ol>
  );
}

function Episodes(props: { episodes: Episode[] }) {
  if (props.episodes.length === 0) return <p class="muted">No dunning episode.</p>;
  return (
    <TableWrap label="Episodes">
      <table class="one-line">
        <caption class="sr-only">Episodes, newest first</caption>
        <TableHead columns={['Episode', 'State', 'Reason', 'Invoice', 'In dunning since', 'Resolved']} />
        <tbody>
          {props.episodes.map((e) => {
            const i = e.invoice;
            const amount = i?.currency ? (i.amount_remaining ?? i.amount_due) : null;
            return (
              <tr key={e.episode}>
                <th scope="row">
                  <code>{e.episode}</code>
                </th>
                <td>{e.state.replace(/_/g, ' ')}</td>
                <td>
                  {e.reason.replace(/_/g, ' ')}
                  {e.decline_code ? <span class="muted"> ({e.decline_code})</span> : null}
                </td>
                <td>
                  {i ? (
                    <>
                      <code>{i.id}</code>
                      {amount !== null && i.currency ? ` ${money(amount, i.currency)}` : ''}
                      {i.status ? <span class="muted"> · {i.status}</span> : null}
                    </>
                  ) : (
                    '–'
                  )}
                </td>
                <td>{when(e.dunning_started_at)}</td>
                <td>{when(e.resolved_at)}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </TableWrap>
  );
}

/** Sets or clears the override; a lockout is confirmed by a second, explicit press. */
function Override(props: { base: string; customerId: string; current: Subscriber; onDone: () => void }) {
  const [status, setStatus] = useState<Status>('active');
  const [reason, setReason] = useState('');
  const [confirming, setConfirming] = useState(false);
  const { error, busy, run } = useAction(props.onDone);
  const confirmButton = useRef<HTMLButtonElement>(null);
  const setButton = useRef<HTMLButtonElement>(null);
  const wasConfirming = useRef(false);
  // The keyboard's focus follows the question: onto its answer, then back where it was asked.
  useEffect(() => {
    if (confirming) confirmButton.current?.focus();
    else if (wasConfirming.current) setButton.current?.focus();
    wasConfirming.current = confirming;
  }, [confirming]);
  const path = `${props.base}/subscribers/${encodeURIComponent(props.customerId)}/override`;
  const act = async (what: () => Promise<unknown>, done: string) => {
    await run(async () => {
      await what();
      return done;
    });
    setConfirming(false);
  };
  const submit = (e: Event) => {
    e.preventDefault();
    if (status === 'lockout' && !confirming) {
      setConfirming(true);
      return;
    }
    void act(
      () => api.put(path, { status, ...(reason.trim() ? { reason: reason.trim() } : {}) } satisfies PutSubscriberBody),
      `Override set: ${props.customerId} is answered ${status}.`,
    );
  };
  const clear = () =>
    void act(
      () => api.del(path),
      `Override cleared: ${props.customerId} is again what its episodes and the policy say.`,
    );
  const stale = error?.code === 'stale_change';
  return (
    <section class="card" aria-labelledby="override-title">
      <h2 id="override-title">Override</h2>
      <p class="hint">
        An override sets the status as of now, until a Stripe event dated later changes one of the customer's episodes.
        The policy's banner-only and monitor modes still apply to it.
      </p>
      <form class="form" onSubmit={submit} aria-labelledby="override-title">
        <div class="row">
          <label>
            <span>Status</span>
            <select
              name="status"
              value={status}
              onChange={(e) => {
                setStatus(valueOf(e) as Status);
                setConfirming(false);
              }}
            >
              {STATUSES.map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </select>
          </label>
          <label>
            <span>Reason (optional)</span>
            <input
              name="reason"
              value={reason}
              pattern={inputPattern(REASON_PATTERN)}
              placeholder="manual"
              title="lowercase letters, digits and underscores"
              onInput={keepValue(setReason)}
            />
          </label>
        </div>
        {confirming ? (
          <div class="confirm" role="alert" onKeyDown={(e) => e.key === 'Escape' && setConfirming(false)}>
            <p>
              Lock out <strong>{props.customerId}</strong> now? Its pages will be gated until the override is cleared or
              a later Stripe event changes it.
            </p>
            <button type="submit" class="button danger" ref={confirmButton} disabled={busy}>
              Yes, lock out
            </button>{' '}
            <button type="button" class="button secondary" onClick={() => setConfirming(false)}>
              Cancel
            </button>
          </div>
        ) : (
          <div class="actions-row">
            <button type="submit" class="button" disabled={busy} ref={setButton}>
              Set override
            </button>
            {props.current.overridden_at !== null ? (
              <button type="button" class="button secondary" onClick={clear} disabled={busy}>
                Clear override
              </button>
            ) : (
              <span class="hint">No override stands now.</span>
            )}
          </div>
        )}
      </form>
      {stale ? (
        <div class="error" role="alert">
          <p>
            Not applied: a Stripe event dated later than now has already set this customer, and it keeps precedence.{' '}
            <code class="code">stale_change</code>
          </p>
          <button type="button" class="button secondary" onClick={props.onDone}>
            Show its status now
          </button>
        </div>
      ) : (
        <ErrorNote error={error} />
      )}
    </section>
  );
}

export function SubscriberPage() {
  const { session, base, href } = useConsole();
  const { params } = useRoute();
  const id = params.customerId ?? '';
  const allowed = holds(session, 'subscribers:read');
  const path = `${base}/subscribers/${encodeURIComponent(id)}`;
  const subscriber = useLoad(() => (allowed ? api.get<Subscriber>(path) : Promise.resolve(null)), [path, allowed]);
  const webhooks = useLoad(
    () => (allowed ? api.get<CustomerMessageList>(`${path}/webhooks`) : Promise.resolve(null)),
    [path, allowed],
  );
  const reload = () => {
    subscriber.reload();
    webhooks.reload();
  };
  const s = subscriber.data;
  const notFound = subscriber.error?.status === 404;
  const back = (
    <a class="button secondary" href={href('/subscribers')}>
      All subscribers
    </a>
  );
  return (
    <Page title={id} actions={back}>
      {!allowed ? <Missing scope="subscribers:read" /> : null}
      {notFound ? (
        <p class="note" role="status">
          No such subscriber: this tenant has no record or history of <code>{id}</code>.
        </p>
      ) : (
        <ErrorNote error={subscriber.error} retry={subscriber.reload} />
      )}
      {allowed && subscriber.loading && s === null ? <Loading what="the subscriber" /> : null}
      {s !== null ? (
        <>
          <dl class="stats compact">
            <Stat
              label="Answered status"
              value={<StatusBadge status={s.status} />}
              hint={s.status === null ? 'no record: answered active' : (s.reason ?? '').replace(/_/g, ' ')}
            />
            <Stat
              label="Derived status"
              value={<StatusBadge status={s.derived_status} />}
              hint="from Stripe's events or an override, before the policy"
            />
            <Stat
              label="Override"
              value={s.overridden_at ? 'Standing' : 'None'}
              hint={s.overridden_at ? `set ${when(s.overridden_at)}` : 'the episodes and the policy decide'}
            />
            <Stat
              label="Lockout"
              value={s.lockout_at ? when(s.lockout_at) : s.status === 'lockout' ? 'Now' : '–'}
              hint={s.lockout_at ? 'scheduled by the policy' : s.status === 'lockout' ? 'gated' : 'none scheduled'}
            />
          </dl>
          {s.pay_url && s.pay_url.startsWith('https://') ? (
            <p>
              <a href={s.pay_url} target="_blank" rel="noopener noreferrer">
                The open invoice's payment page
              </a>{' '}
              <span class="hint">(Stripe's hosted page, as the customer sees it)</span>
            </p>
          ) : null}
          {holds(session, 'subscribers:write') ? (
            <Override base={base} customerId={id} current={s} onDone={reload} />
          ) : (
            <section class="card" aria-labelledby="override-title">
              <h2 id="override-title">Override</h2>
              <Missing scope="subscribers:write" />
            </section>
          )}
          <section class="card" aria-labelledby="episodes-title">
            <h2 id="episodes-title">Episodes</h2>
            <Episodes episodes={s.episodes} />
          </section>
          <section class="card" aria-labelledby="timeline-title">
            <h2 id="timeline-title">Timeline</h2>
            <p class="hint">
              Every change with its cause, and every webhook it raised with its deliveries, newest first (the newest 100
              changes and 50 webhooks).
            </p>
            <ErrorNote error={webhooks.error} retry={webhooks.reload} />
            <Timeline history={s.history} messages={webhooks.data?.data ?? null} />
          </section>
        </>
      ) : null}
    </Page>
  );
}
