/** @jsxImportSource preact */
import type { ComponentChildren } from 'preact';
import { useMemo } from 'preact/hooks';
import { api, holds } from '../api.js';
import { TimeChart } from '../chart.js';
import type { CredentialChange as SecretChange, TenantHealth as HealthAnswer } from '@dunwall/wire';
import {
  count,
  day,
  ErrorNote,
  Loading,
  Missing,
  Page,
  Stat,
  TableHead,
  TableWrap,
  useConsole,
  useLoad,
  when,
} from '../ui.js';

/**
 * The tenant's health: Stripe's events received and refused over 7 days, the last event and
 * sync, the read model's lag and the deliveries of webhooks, each with a verdict in words.
 */

type Level = 'ok' | 'warn' | 'bad' | 'info';
const LEVEL_WORDS: Record<Level, string> = { ok: 'OK', warn: 'Check', bad: 'Act', info: 'Note' };

/**
 * The lag is the time since the read model last read the change log: an idle instance reads
 * it every 5 s (and at once when woken by a change), so three missed reads are a lag.
 */
const LAG_WARN_MS = 15_000;
/** A delivery waiting longer than this is late (the first retries come within minutes). */
const LATE_DELIVERY_MS = 15 * 60_000;

function Verdict(props: { level: Level; children: ComponentChildren }) {
  return (
    <p class={`verdict verdict-${props.level}`}>
      <span class="verdict-label">{LEVEL_WORDS[props.level]}</span> {props.children}
    </p>
  );
}

const plural = (n: number, one: string, many = `${one}s`) => `${count(n)} ${n === 1 ? one : many}`;

function stripeVerdicts(s: HealthAnswer['stripe']) {
  const out: { level: Level; text: ComponentChildren }[] = [];
  if (s.refused_signature > 0)
    out.push({
      level: 'bad',
      text: (
        <>
          Refused deliveries: check the signing secret. {plural(s.refused_signature, 'event')} had a signature that did
          not verify: the Stripe webhook secret set here is not the one of the endpoint in Stripe's dashboard.
        </>
      ),
    });
  if (s.refused_livemode > 0)
    out.push({
      level: 'warn',
      text: (
        <>
          {plural(s.refused_livemode, 'event')} of the other mode (test or live){' '}
          {s.refused_livemode === 1 ? 'was' : 'were'} acknowledged and ignored: check that the Stripe endpoint and this
          tenant's mode match.
        </>
      ),
    });
  if (s.received === 0)
    out.push({
      level: 'warn',
      text:
        s.last_received_at === null
          ? 'No Stripe event received yet: add the webhook endpoint in Stripe, with its signing secret here.'
          : `No Stripe event in 7 days (the last ${when(s.last_received_at)}): check that the endpoint in Stripe is enabled.`,
    });
  if (out.length === 0)
    out.push({ level: 'ok', text: `Receiving: ${plural(s.received, 'event')} in 7 days, none refused.` });
  return out;
}

function readModelVerdict(r: HealthAnswer['read_model']): { level: Level; text: string } {
  if (!r.serving)
    return {
      level: 'bad',
      text: "This instance's read model is not serving: its lookups answer 503 until it catches up with the store.",
    };
  if (r.lag_ms === null) return { level: 'warn', text: 'Its lag is not known yet.' };
  if (r.lag_ms > LAG_WARN_MS)
    return {
      level: 'warn',
      text: `Behind by ${(r.lag_ms / 1000).toFixed(1)} s: changes reach this instance's lookups late.`,
    };
  return {
    level: 'ok',
    text: `Up to date: it last read the store's changes ${(r.lag_ms / 1000).toFixed(1)} s ago (at once after each change, and every 5 s).`,
  };
}

function deliveryVerdicts(d: HealthAnswer['deliveries'], at: number) {
  const out: { level: Level; text: string }[] = [];
  if (d.endpoints === 0)
    return [{ level: 'info' as Level, text: 'No webhook endpoint: no message is raised for this tenant.' }];
  if (d.failed_7d > 0)
    out.push({
      level: 'bad',
      text: `${plural(d.failed_7d, 'message')} failed in 7 days (every retry for three days): look at the endpoint's attempts, then retry or replay.`,
    });
  if (d.disabled_endpoints > 0)
    out.push({
      level: 'warn',
      text: `${plural(d.disabled_endpoints, 'endpoint')} disabled: what waits for them is sent once they are enabled again.`,
    });
  if (d.oldest_pending_at !== null && at - Date.parse(d.oldest_pending_at) > LATE_DELIVERY_MS)
    out.push({
      level: 'warn',
      text: `Deliveries are late: the oldest has waited since ${when(d.oldest_pending_at)}. Is the receiver answering?`,
    });
  if (out.length === 0)
    out.push({
      level: 'ok',
      text: d.pending === 0 ? 'Every message delivered.' : `${plural(d.pending, 'message')} on the way.`,
    });
  return out;
}

/** A secret key seen from a browser is a leaked key: each is named, with the advice to rotate it. */
function SecretKeysCard(props: { keys: HealthAnswer['secret_keys'] }) {
  const seen = props.keys.seen_in_browser;
  return (
    <section class="card" aria-labelledby="keys-title">
      <h2 id="keys-title">Secret keys</h2>
      {seen.length === 0 ? (
        <Verdict level="ok">No secret key has been sent from a browser.</Verdict>
      ) : (
        seen.map((k) => (
          <Verdict key={k.id} level="bad">
            Rotate the secret key {k.name} (<code>{k.prefix}…</code>): it was sent from a browser{' '}
            {when(k.seen_in_browser_at)}, and refused. Treat it as leaked: rotate it under Settings, Keys (or{' '}
            <code>dunwall key rotate</code>), and keep the new one on your servers. Pages use the publishable key.
          </Verdict>
        ))
      )}
    </section>
  );
}

/** Who made a change: the operator, or the key by name and prefix (kept once it is revoked). */
function ChangedBy(props: { change: SecretChange }) {
  const k = props.change.key;
  if (k === null) return <>the operator</>;
  return (
    <>
      the secret key {k.name} (<code>{k.prefix}…</code>)
    </>
  );
}

/**
 * Who set the Stripe signing secret, the latest first: whoever holds it can sign events that
 * lock a customer out or let one in, so each change is named, by the operator or by a key.
 */
function SigningSecretCard(props: { secret: HealthAnswer['stripe_webhook_secret'] }) {
  const { set, changes } = props.secret;
  const latest = changes[0];
  return (
    <section class="card" aria-labelledby="signing-secret-title">
      <h2 id="signing-secret-title">Stripe signing secret</h2>
      {!set ? (
        <Verdict level="bad">No signing secret is set: Stripe's deliveries are refused until one is.</Verdict>
      ) : latest === undefined ? (
        <Verdict level="info">
          A signing secret is set; no change of it is recorded (it was set before changes were recorded).
        </Verdict>
      ) : (
        <Verdict level={latest.by === 'key' ? 'warn' : 'info'}>
          Last changed {when(latest.at)} by <ChangedBy change={latest} />. It decides who is locked out: if you did not
          make this change, set the secret again from Stripe's dashboard and revoke the key.
        </Verdict>
      )}
      {changes.length > 0 ? (
        <TableWrap label="Signing secret changes" class="panel">
          <table class="secret-changes">
            <caption class="sr-only">Changes of the Stripe signing secret, the latest first</caption>
            <TableHead columns={['When', 'By']} />
            <tbody>
              {changes.map((c, i) => (
                <tr key={`${c.at}-${i}`}>
                  <td>{when(c.at)}</td>
                  <td>
                    <ChangedBy change={c} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableWrap>
      ) : null}
      <p class="hint">
        Setting it needs the <code>stripe:write</code> scope; <code>settings:write</code> does not reach it.
      </p>
    </section>
  );
}

export function Health() {
  const { session, base } = useConsole();
  const allowed = holds(session, 'subscribers:read');
  const loaded = useLoad(
    () => (allowed ? api.get<HealthAnswer>(`${base}/health`) : Promise.resolve(null)),
    [base, allowed],
  );
  const h = loaded.data;
  const series = useMemo(() => {
    if (h === null) return null;
    const days = h.stripe.days;
    return {
      times: days.map((d) => Date.parse(`${d.day}T00:00:00Z`)),
      values: [
        { label: 'Received', values: days.map((d) => d.received), color: '#2e90fa', bars: true },
        { label: 'Refused: signature', values: days.map((d) => d.refused_signature), color: '#b42318' },
        { label: 'Refused: mode', values: days.map((d) => d.refused_livemode), color: '#93370d' },
      ],
    };
  }, [h]);
  const model = h === null ? null : readModelVerdict(h.read_model);
  return (
    <Page title="Health">
      {!allowed ? <Missing scope="subscribers:read" /> : null}
      {allowed && loaded.loading && h === null ? <Loading what="the figures" /> : null}
      <ErrorNote error={loaded.error} retry={loaded.reload} />
      {h !== null && model !== null ? (
        <>
          <p class="muted">As of {when(h.at)}.</p>
          {/* A leaked key comes first; none, it closes the page. */}
          {h.secret_keys.seen_in_browser.length > 0 ? <SecretKeysCard keys={h.secret_keys} /> : null}
          <section class="card" aria-labelledby="stripe-title">
            <h2 id="stripe-title">Stripe events, last 7 days</h2>
            {stripeVerdicts(h.stripe).map((v, i) => (
              <Verdict key={i} level={v.level}>
                {v.text}
              </Verdict>
            ))}
            <dl class="stats compact">
              <Stat label="Received" value={count(h.stripe.received)} hint={`since ${when(h.stripe.since)}`} />
              <Stat
                label="Refused: bad signature"
                value={count(h.stripe.refused_signature)}
                hint="not from Stripe, or another secret"
              />
              <Stat
                label="Refused: wrong mode"
                value={count(h.stripe.refused_livemode)}
                hint="test events for a live tenant, or the reverse"
              />
              <Stat label="Replayed" value={count(h.stripe.replayed)} hint="sent again through the API or a sync" />
            </dl>
            {h.stripe.days.length === 0 ? (
              <p class="muted">No Stripe delivery in these 7 days.</p>
            ) : (
              <div class="grid-2">
                <figure class="panel">
                  <figcaption>Events by day</figcaption>
                  {series ? (
                    <TimeChart title="stripe-days" times={series.times} series={series.values} height={200} />
                  ) : null}
                </figure>
                <TableWrap label="Events by day" class="panel">
                  <table class="by-day">
                    <caption class="sr-only">Stripe events by day</caption>
                    <TableHead columns={['Day', 'Received', 'Refused: signature', 'Refused: mode']} />
                    <tbody>
                      {h.stripe.days.map((d) => (
                        <tr key={d.day}>
                          <th scope="row">{day(d.day)}</th>
                          <td>{count(d.received)}</td>
                          <td>{count(d.refused_signature)}</td>
                          <td>{count(d.refused_livemode)}</td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                </TableWrap>
              </div>
            )}
            <dl class="kv">
              <dt>Last event</dt>
              <dd>{h.stripe.last_received_at ? when(h.stripe.last_received_at) : 'none yet'}</dd>
              <dt>Last refused</dt>
              <dd>{h.stripe.last_refused_at ? when(h.stripe.last_refused_at) : 'none'}</dd>
              <dt>Last sync</dt>
              <dd>
                {h.stripe.last_sync_at ? when(h.stripe.last_sync_at) : 'never'}
                <span class="hint">
                  {' '}
                  · <code>dunwall stripe sync</code> backfills what the webhook missed (an outage, events from before
                  the endpoint existed).
                </span>
              </dd>
            </dl>
          </section>
          <SigningSecretCard secret={h.stripe_webhook_secret} />
          <div class="grid-2">
            <section class="card" aria-labelledby="model-title">
              <h2 id="model-title">Read model</h2>
              <Verdict level={model.level}>{model.text}</Verdict>
              <dl class="kv">
                <dt>Serving</dt>
                <dd>{h.read_model.serving ? 'yes' : 'no'}</dd>
                <dt>Lag</dt>
                <dd>{h.read_model.lag_ms === null ? 'unknown' : `${count(h.read_model.lag_ms)} ms`}</dd>
              </dl>
              <p class="hint">
                The copy of the statuses in this instance's memory, from which every lookup is answered.
              </p>
            </section>
            <section class="card" aria-labelledby="deliveries-title">
              <h2 id="deliveries-title">Webhook deliveries</h2>
              {deliveryVerdicts(h.deliveries, Date.parse(h.at)).map((v, i) => (
                <Verdict key={i} level={v.level}>
                  {v.text}
                </Verdict>
              ))}
              <dl class="kv">
                <dt>Pending</dt>
                <dd>{count(h.deliveries.pending)}</dd>
                <dt>Oldest pending</dt>
                <dd>{h.deliveries.oldest_pending_at ? when(h.deliveries.oldest_pending_at) : 'none'}</dd>
                <dt>Failed, 7 days</dt>
                <dd>{count(h.deliveries.failed_7d)}</dd>
                <dt>Endpoints</dt>
                <dd>
                  {count(h.deliveries.endpoints)}
                  {h.deliveries.disabled_endpoints > 0 ? ` (${count(h.deliveries.disabled_endpoints)} disabled)` : ''}
                </dd>
              </dl>
            </section>
          </div>
          {h.secret_keys.seen_in_browser.length === 0 ? <SecretKeysCard keys={h.secret_keys} /> : null}
        </>
      ) : null}
    </Page>
  );
}
