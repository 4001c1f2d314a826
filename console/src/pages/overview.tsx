/** @jsxImportSource preact */
import { useMemo, useState } from 'preact/hooks';
import { api, holds, qs } from '../api.js';
import { TimeChart } from '../chart.js';
import type { AnalyticsGranularity, RecoveryAmount as Amount, RecoveryAnalytics as Recovery } from '@dunwall/wire';
import {
  count,
  day,
  duration,
  ErrorNote,
  Loading,
  Missing,
  money,
  Page,
  percent,
  Stat,
  TableHead,
  TableWrap,
  useConsole,
  useLoad,
  valueOf,
} from '../ui.js';

/** The periods a reader can choose, in days back from today. */
const PERIODS = [
  { days: 30, label: 'Last 30 days', granularity: 'week' },
  { days: 90, label: 'Last 90 days', granularity: 'week' },
  { days: 182, label: 'Last 6 months', granularity: 'month' },
  { days: 365, label: 'Last 12 months', granularity: 'month' },
] as const satisfies readonly { days: number; label: string; granularity: AnalyticsGranularity }[];

const DAY_MS = 86_400_000;

function amounts(list: Amount[]): string {
  return list.length === 0 ? '–' : list.map((a) => money(a.amount, a.currency)).join(' · ');
}

/** A labelled horizontal bar per entry: the figures stay text, the bars only show the shares. */
function Bars(props: { title: string; entries: [string, number][] }) {
  const total = props.entries.reduce((s, [, n]) => s + n, 0);
  return (
    <figure class="card bars">
      <figcaption>{props.title}</figcaption>
      <dl>
        {props.entries.map(([label, n]) => (
          <div key={label} class="bar-row">
            <dt>{label.replace(/_/g, ' ')}</dt>
            <dd>
              <span class="bar" style={{ width: `${total === 0 ? 0 : (n / total) * 100}%` }} aria-hidden="true" />
              <span class="bar-figure">
                {count(n)}
                {total > 0 ? <span class="muted"> ({Math.round((n / total) * 100)} %)</span> : null}
              </span>
            </dd>
          </div>
        ))}
      </dl>
    </figure>
  );
}

export function Overview() {
  const { session, base } = useConsole();
  const [days, setDays] = useState<number>(365);
  const period = PERIODS.find((p) => p.days === days) ?? PERIODS[3];
  const allowed = holds(session, 'subscribers:read');
  const loaded = useLoad(async () => {
    if (!allowed) return null;
    const to = new Date();
    const from = new Date(to.getTime() - period.days * DAY_MS);
    return api.get<Recovery>(
      `${base}/analytics/recovery${qs({ from: from.toISOString(), to: to.toISOString(), granularity: period.granularity })}`,
    );
  }, [base, days, allowed]);
  const data = loaded.data;
  const series = useMemo(() => {
    if (data === null) return null;
    const periods = data.recovered.periods;
    return {
      times: periods.map((p) => Date.parse(p.period_start)),
      counts: [
        { label: 'Recovered', values: periods.map((p) => p.recovered), color: '#12b76a', bars: true },
        { label: 'Ended', values: periods.map((p) => p.ended), color: '#667085' },
      ],
      rates: [{ label: 'Recovery rate', values: periods.map((p) => p.rate), color: '#2e90fa', rate: true }],
    };
  }, [data]);
  const chooser = (
    <label class="inline">
      <span>Period</span>
      <select value={String(days)} onChange={(e) => setDays(Number(valueOf(e)))}>
        {PERIODS.map((p) => (
          <option key={p.days} value={String(p.days)}>
            {p.label}
          </option>
        ))}
      </select>
    </label>
  );
  return (
    <Page title="Overview" actions={allowed ? chooser : null}>
      {!allowed ? <Missing scope="subscribers:read" /> : null}
      {allowed && loaded.loading && data === null ? <Loading what="the figures" /> : null}
      <ErrorNote error={loaded.error} retry={loaded.reload} />
      {data !== null ? (
        <>
          <dl class="stats">
            <Stat
              label="At risk now"
              value={amounts(data.at_risk.amounts)}
              hint={`${count(data.at_risk.count)} customers in dunning`}
            />
            <Stat
              label="Recovered"
              value={amounts(data.recovered.amounts)}
              hint={`${count(data.recovered.recovered)} of ${count(data.recovered.ended)} ended runs`}
            />
            <Stat label="Recovery rate" value={percent(data.recovered.rate)} hint="paid, of all runs that ended" />
            <Stat
              label="Time to recover"
              value={duration(data.time_to_recover.median_seconds)}
              hint={`median; 90th percentile ${duration(data.time_to_recover.p90_seconds)}`}
            />
          </dl>
          <div class="grid-2">
            <figure class="card">
              <figcaption>Runs recovered and ended, by {data.granularity}</figcaption>
              {series && series.times.length > 0 ? (
                <TimeChart title="recovered" times={series.times} series={series.counts} />
              ) : (
                <p class="muted">No run ended in this period.</p>
              )}
            </figure>
            <figure class="card">
              <figcaption>Recovery rate, by {data.granularity}</figcaption>
              {series && series.times.length > 0 ? (
                <TimeChart title="rate" times={series.times} series={series.rates} />
              ) : (
                <p class="muted">No run ended in this period.</p>
              )}
            </figure>
          </div>
          <div class="grid-2">
            <Bars title="How runs ended" entries={Object.entries(data.outcomes) as [string, number][]} />
            <Bars title="Decline mix" entries={Object.entries(data.decline_mix) as [string, number][]} />
          </div>
          <section class="card" aria-labelledby="periods-title">
            <h2 id="periods-title">By {data.granularity}</h2>
            <TableWrap label={`By ${data.granularity}`}>
              <table>
                <TableHead
                  columns={[
                    data.granularity === 'week' ? 'Week of' : 'Month',
                    'Ended',
                    'Recovered',
                    'Rate',
                    'Amount recovered',
                  ]}
                />
                <tbody>
                  {data.recovered.periods.map((p) => (
                    <tr key={p.period_start}>
                      <th scope="row">{day(p.period_start)}</th>
                      <td>{count(p.ended)}</td>
                      <td>{count(p.recovered)}</td>
                      <td>{percent(p.rate)}</td>
                      <td>{p.amounts.length ? amounts(p.amounts) : '–'}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableWrap>
          </section>
          <section class="card" aria-labelledby="links-title">
            <h2 id="links-title">Pay and card links opened</h2>
            <p class="muted">
              {`${count(data.links.opened)} runs whose customer opened a link, ${count(data.links.recovered_after_open)} recovered after it; median time from the first open to the payment: ${duration(data.links.median_seconds_to_payment)}`}
            </p>
            <TableWrap label="Links opened">
              <table>
                <TableHead
                  columns={[
                    data.granularity === 'week' ? 'Week of' : 'Month',
                    'Runs with a link opened',
                    'Recovered after',
                    'Median time to payment',
                  ]}
                />
                <tbody>
                  {data.links.periods.map((p) => (
                    <tr key={p.period_start}>
                      <th scope="row">{day(p.period_start)}</th>
                      <td>{count(p.opened)}</td>
                      <td>{count(p.recovered_after_open)}</td>
                      <td>{duration(p.median_seconds_to_payment)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableWrap>
          </section>
          <section class="card" aria-labelledby="cohorts-title">
            <h2 id="cohorts-title">Cohorts by month of dunning start</h2>
            <TableWrap label="Cohorts">
              <table>
                <TableHead columns={['Month', 'Runs started', 'Recovered', 'Rate']} />
                <tbody>
                  {data.cohorts.map((c) => (
                    <tr key={c.month}>
                      <th scope="row">
                        {new Date(c.month).toLocaleDateString(undefined, {
                          year: 'numeric',
                          month: 'long',
                          timeZone: 'UTC',
                        })}
                      </th>
                      <td>{count(c.started)}</td>
                      <td>{count(c.recovered)}</td>
                      <td>{percent(c.rate)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </TableWrap>
          </section>
        </>
      ) : null}
    </Page>
  );
}
