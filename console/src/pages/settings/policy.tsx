/** @jsxImportSource preact */
import { useEffect, useState } from 'preact/hooks';
import { api, qs } from '../../api.js';
import type { ApiError } from '../../api.js';
import { ENFORCEMENTS, NOTICE_KINDS } from '@dunwall/wire';
import type { Enforcement, NoticeKind, Policy, PolicyImpact as Impact, Settings, SettingsPatch } from '@dunwall/wire';
import { asApiError, count, ErrorNote, useAction, useConsole, valueOf } from '../../ui.js';

const ENFORCEMENT_WORDS: Record<Enforcement, string> = {
  gate: 'Gate: a lockout shows the full-screen gate',
  banner_only: 'Banner only: a lockout shows the banner',
  monitor: 'Monitor: every lookup answers active (watch before enforcing)',
};
const NOTICE_WORDS: Record<NoticeKind, string> = {
  card_expiring:
    'Card expiring: tell an active customer whose card expires before the next renewal (a soft banner, never a gate)',
};
const IMPACT_DELAY_MS = 300;

const people = (n: number) => `${count(n)} customer${n === 1 ? '' : 's'}`;

/** What the proposed policy would do now, in words. */
function impactWords(i: Impact): string {
  if (i.newly_gated === 0 && i.released === 0) return 'This would gate no one new and let no one in.';
  const parts: string[] = [];
  if (i.newly_gated > 0) parts.push(`${people(i.newly_gated)} would be gated now`);
  if (i.released > 0) parts.push(`${people(i.released)} would be let in`);
  return `${parts.join('; ')}.`;
}

export function PolicySection(props: {
  saved: Policy;
  canRead: boolean;
  canWrite: boolean;
  onSaved: (p: Policy) => void;
}) {
  const { base } = useConsole();
  const [draft, setDraft] = useState<Policy>(props.saved);
  const [impact, setImpact] = useState<Impact | null>(null);
  const [impactError, setImpactError] = useState<ApiError | null>(null);
  const { error, busy, run } = useAction();
  useEffect(() => setDraft(props.saved), [props.saved]);
  useEffect(() => {
    if (!props.canRead) return;
    let live = true;
    const timer = setTimeout(() => {
      const query = qs({
        enforcement: draft.enforcement,
        grace_days: draft.grace_days,
        escalate_after_days: draft.escalate_after_days ?? 'none',
      });
      api.get<Impact>(`${base}/analytics/policy-impact${query}`).then(
        (i) => live && (setImpact(i), setImpactError(null)),
        (err: unknown) => live && (setImpact(null), setImpactError(asApiError(err))),
      );
    }, IMPACT_DELAY_MS);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [base, draft, props.canRead]);

  const save = async (e: Event) => {
    e.preventDefault();
    await run(async () => {
      const settings = await api.patch<Settings>(`${base}/settings`, { policy: draft } satisfies SettingsPatch);
      props.onSaved(settings.policy);
      return 'Policy saved.';
    });
  };
  const number = (value: string, min: number, max: number) =>
    Math.min(max, Math.max(min, Math.round(Number(value) || 0)));

  return (
    <section class="card settings-section" aria-labelledby="policy-title">
      <h2 id="policy-title">Dunning policy</h2>
      <form class="form" onSubmit={save}>
        <fieldset disabled={!props.canWrite}>
          <legend>Enforcement</legend>
          {ENFORCEMENTS.map((value) => (
            <label class="check" key={value}>
              <input
                type="radio"
                name="enforcement"
                value={value}
                checked={draft.enforcement === value}
                onChange={() => setDraft((d) => ({ ...d, enforcement: value }))}
              />
              {ENFORCEMENT_WORDS[value]}
            </label>
          ))}
        </fieldset>
        <div class="row">
          <label>
            <span>Grace days before a lockout gates (0 to 60)</span>
            <input
              type="number"
              min={0}
              max={60}
              disabled={!props.canWrite}
              value={draft.grace_days}
              onInput={(e) => setDraft((d) => ({ ...d, grace_days: number(valueOf(e), 0, 60) }))}
            />
          </label>
          <label>
            <span>Escalate a warning to lockout after days (empty: never)</span>
            <input
              type="number"
              min={1}
              max={120}
              disabled={!props.canWrite}
              value={draft.escalate_after_days ?? ''}
              onInput={(e) => {
                const v = valueOf(e);
                setDraft((d) => ({ ...d, escalate_after_days: v === '' ? null : number(v, 1, 120) }));
              }}
            />
          </label>
        </div>
        <fieldset disabled={!props.canWrite}>
          <legend>Notices</legend>
          {NOTICE_KINDS.map((kind) => (
            <label class="check" key={kind}>
              <input
                type="checkbox"
                name="notices"
                value={kind}
                checked={draft.notices.includes(kind)}
                onChange={(e) => {
                  const on = (e.currentTarget as HTMLInputElement).checked;
                  setDraft((d) => ({
                    ...d,
                    notices: NOTICE_KINDS.filter((k) => (k === kind ? on : d.notices.includes(k))),
                  }));
                }}
              />
              {NOTICE_WORDS[kind]}
            </label>
          ))}
        </fieldset>
        <div class="impact" role="status" aria-live="polite">
          {!props.canRead ? (
            <span>What a change would do needs the subscribers:read scope.</span>
          ) : impact ? (
            <>
              <strong>{impactWords(impact)}</strong>
              <br />
              <span class="muted">
                Now: {people(impact.current.lockout)} gated, {people(impact.current.warning)} warned. With this policy:{' '}
                {people(impact.proposed.lockout)} gated, {people(impact.proposed.warning)} warned.
              </span>
            </>
          ) : impactError === null ? (
            <span class="muted">Working out what this would change…</span>
          ) : null}
        </div>
        <ErrorNote error={impactError ?? error} />
        {props.canWrite ? (
          <button type="submit" class="button" disabled={busy}>
            {busy ? 'Saving…' : 'Save policy'}
          </button>
        ) : null}
      </form>
    </section>
  );
}
