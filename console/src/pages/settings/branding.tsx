/** @jsxImportSource preact */
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, ApiError } from '../../api.js';
import { BRANDING_COLORS, BRANDING_TEXT_KEYS, COLOR_PATTERN } from '@dunwall/wire';
import type {
  Branding,
  BrandingColor as Color,
  BrandingTextKey as TextKey,
  Settings,
  SettingsPatch,
} from '@dunwall/wire';
import { ErrorNote, inputPattern, keepValue, useAction, useConsole, valueOf } from '../../ui.js';

const COLOR_RE = new RegExp(COLOR_PATTERN);
const LINKS = [
  ['payment_url', 'Payment link (the gate, when the lookup names no invoice)'],
  ['support_url', 'Support link'],
  ['logo_url', 'Logo'],
] as const;
const TEXT_WORDS: Record<TextKey, string> = {
  banner_title: "Banner title (for your own components: the snippet's banner has none)",
  banner_body: 'Banner text',
  banner_action: 'Banner button',
  banner_countdown: 'Banner countdown (holds {time}, may hold {date})',
  gate_title: 'Gate title',
  gate_body: 'Gate text',
  gate_action: 'Gate button',
  pay_action: 'Pay button',
  support: 'Support link text',
  member_body: "A member's banner (who cannot pay: no link is shown)",
  member_gate_body: "A member's gate sentence",
};
const LOCALE_RE = /^(default|[a-z]{2,3}(-[A-Za-z0-9]{2,8}){0,3})$/;
const PREVIEW_DELAY_MS = 400;

/** The locales the snippet would try for this browser: each language and its shorter forms, then default. */
function browserLocales(): string[] {
  const out: string[] = [];
  for (const lang of navigator.languages?.length ? navigator.languages : [navigator.language]) {
    const parts = lang.split('-');
    for (let n = parts.length; n >= 1; n--) {
      const tag = [parts[0]?.toLowerCase(), ...parts.slice(1, n)].join('-');
      if (!out.includes(tag)) out.push(tag);
    }
  }
  return [...out, 'default'];
}

/** Empty fields dropped: the branding the service keeps. */
function cleaned(b: Branding): Branding {
  const out: Branding = {};
  for (const [key] of LINKS) if (b[key]?.trim()) out[key] = b[key].trim();
  const colors = Object.fromEntries(Object.entries(b.colors ?? {}).filter(([, v]) => v?.trim())) as Branding['colors'];
  if (colors && Object.keys(colors).length) out.colors = colors;
  const texts: NonNullable<Branding['texts']> = {};
  for (const [locale, t] of Object.entries(b.texts ?? {})) {
    const kept = Object.fromEntries(Object.entries(t).filter(([, v]) => v?.trim()));
    if (Object.keys(kept).length) texts[locale] = kept;
  }
  if (Object.keys(texts).length) out.texts = texts;
  return out;
}

/** What the preview's address carries: the colors, the links, and the texts this browser's snippet would read. */
export function previewDraft(b: Branding): string {
  const wanted = browserLocales();
  const c = cleaned(b);
  const texts = Object.fromEntries(Object.entries(c.texts ?? {}).filter(([locale]) => wanted.includes(locale)));
  const json = JSON.stringify({ ...c, texts });
  let binary = '';
  for (const byte of new TextEncoder().encode(json)) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/**
 * The gate takes the focus when it is drawn, as it should on a customer's page; here it is
 * drawn again each time the draft changes, and Chromium lets a frame's script take the focus
 * even from an inert frame: the field being typed in would lose it, and the keys typed next
 * with it. Whatever had the focus gets it back at once, before the next key arrives.
 */
function useFocusKept(frames: { current: HTMLElement | null }): void {
  useEffect(() => {
    const taken = () => {
      const now = document.activeElement;
      return now instanceof HTMLIFrameElement && frames.current?.contains(now) ? now : null;
    };
    const onOut = (e: FocusEvent) => {
      const left = e.target;
      queueMicrotask(() => {
        const frame = taken();
        if (frame === null) return;
        if (left instanceof HTMLElement && left.isConnected) left.focus({ preventScroll: true });
        else frame.blur();
      });
    };
    // Nothing focused in the page (no focusout): the frame gives the focus back to the page.
    const onBlur = () => queueMicrotask(() => taken()?.blur());
    document.addEventListener('focusout', onOut, true);
    window.addEventListener('blur', onBlur);
    return () => {
      document.removeEventListener('focusout', onOut, true);
      window.removeEventListener('blur', onBlur);
    };
  }, [frames]);
}

export function BrandingSection(props: { saved: Branding; canWrite: boolean; onSaved: (b: Branding) => void }) {
  const { base } = useConsole();
  const [draft, setDraft] = useState<Branding>(props.saved);
  const [locale, setLocale] = useState('default');
  const [newLocale, setNewLocale] = useState('');
  const { error, busy, run, setError } = useAction();
  const [preview, setPreview] = useState(() => previewDraft(props.saved));
  const [asMember, setAsMember] = useState(false);
  useEffect(() => setDraft(props.saved), [props.saved]);
  useEffect(() => {
    const timer = setTimeout(() => setPreview(previewDraft(draft)), PREVIEW_DELAY_MS);
    return () => clearTimeout(timer);
  }, [draft]);
  const frames = useRef<HTMLDivElement>(null);
  useFocusKept(frames);
  const locales = useMemo(() => [...new Set(['default', ...Object.keys(draft.texts ?? {}), locale])], [draft, locale]);

  const setText = (key: TextKey, value: string) =>
    setDraft((d) => ({ ...d, texts: { ...d.texts, [locale]: { ...d.texts?.[locale], [key]: value } } }));
  const setColor = (key: Color, value: string) => setDraft((d) => ({ ...d, colors: { ...d.colors, [key]: value } }));
  const setLink = (key: (typeof LINKS)[number][0], value: string) => setDraft((d) => ({ ...d, [key]: value }));

  const save = async (e: Event) => {
    e.preventDefault();
    await run(async () => {
      const settings = await api.patch<Settings>(`${base}/settings`, {
        branding: cleaned(draft),
      } satisfies SettingsPatch);
      props.onSaved(settings.branding);
      return 'Branding saved.';
    });
  };
  const addLocale = () => {
    const tag = newLocale.trim();
    if (!LOCALE_RE.test(tag)) {
      setError(new ApiError(400, 'invalid_request', `${tag || 'The locale'}: is not a locale tag such as fr or fr-CA`));
      return;
    }
    setDraft((d) => ({ ...d, texts: { ...d.texts, [tag]: d.texts?.[tag] ?? {} } }));
    setLocale(tag);
    setNewLocale('');
  };

  return (
    <section class="card settings-section" aria-labelledby="branding-title">
      <h2 id="branding-title">Branding</h2>
      <div class="grid-2">
        <form class="form" onSubmit={save} aria-describedby="branding-help">
          <p id="branding-help" class="hint">
            What the banner and the gate show, for every page with the snippet or the React components. Empty fields
            keep the snippet's own.
          </p>
          <fieldset disabled={!props.canWrite}>
            <legend>Colors</legend>
            <div class="row">
              {BRANDING_COLORS.map((c) => (
                <label key={c}>
                  <span>
                    {c[0]?.toUpperCase()}
                    {c.slice(1)}
                    {draft.colors?.[c] && COLOR_RE.test(draft.colors[c] ?? '') ? (
                      <span class="swatch" style={{ background: draft.colors[c] }} aria-hidden="true" />
                    ) : null}
                  </span>
                  <input
                    name={`color-${c}`}
                    placeholder="#1a2b3c"
                    pattern={inputPattern(COLOR_PATTERN)}
                    value={draft.colors?.[c] ?? ''}
                    onInput={(e) => setColor(c, valueOf(e))}
                  />
                </label>
              ))}
            </div>
          </fieldset>
          <fieldset disabled={!props.canWrite}>
            <legend>Links (https)</legend>
            {LINKS.map(([key, label]) => (
              <div class="row" key={key}>
                <label>
                  <span>{label}</span>
                  <input
                    type="url"
                    name={key}
                    placeholder="https://"
                    value={draft[key] ?? ''}
                    onInput={(e) => setLink(key, valueOf(e))}
                  />
                </label>
              </div>
            ))}
          </fieldset>
          <fieldset disabled={!props.canWrite}>
            <legend>Texts</legend>
            <div class="row">
              <label>
                <span>Locale</span>
                <select value={locale} onChange={(e) => setLocale(valueOf(e))}>
                  {locales.map((l) => (
                    <option key={l} value={l}>
                      {l === 'default' ? 'default (any other language)' : l}
                    </option>
                  ))}
                </select>
              </label>
              <label>
                <span>Add a locale</span>
                <input placeholder="fr or fr-CA" value={newLocale} onInput={keepValue(setNewLocale)} />
              </label>
              <div class="actions-row align-end">
                <button type="button" class="button secondary" onClick={addLocale}>
                  Add locale
                </button>
              </div>
            </div>
            {BRANDING_TEXT_KEYS.map((key) => (
              <div class="row" key={`${locale}-${key}`}>
                <label>
                  <span>{TEXT_WORDS[key]}</span>
                  <input
                    name={`text-${key}`}
                    maxLength={300}
                    value={draft.texts?.[locale]?.[key] ?? ''}
                    onInput={(e) => setText(key, valueOf(e))}
                  />
                </label>
              </div>
            ))}
          </fieldset>
          <ErrorNote error={error} />
          {props.canWrite ? (
            <button type="submit" class="button" disabled={busy}>
              {busy ? 'Saving…' : 'Save branding'}
            </button>
          ) : null}
        </form>
        <div>
          <h3 class="preview-title">Preview</h3>
          <p class="hint">
            The snippet itself, with this draft, in this browser's language: a picture, its links not followed. Not
            saved until you save.
          </p>
          {/* Inert: the keyboard never enters the frames, where the gate would hold it (its focus
              trap, as on a customer's page), and their links are not followed from here. */}
          <label class="check">
            <input
              type="checkbox"
              name="preview-member"
              checked={asMember}
              onChange={(e) => setAsMember((e.target as HTMLInputElement).checked)}
            />
            <span>As a member reads it (who cannot pay: the member texts, no link)</span>
          </label>
          <div class="preview-frames" ref={frames}>
            <iframe
              title="Preview of the banner (warning)"
              src={`/console/preview?state=warning&draft=${preview}${asMember ? '&role=member' : ''}`}
              inert
            />
            <iframe
              title="Preview of the gate (lockout)"
              src={`/console/preview?state=lockout&draft=${preview}${asMember ? '&role=member' : ''}`}
              inert
            />
          </div>
        </div>
      </div>
    </section>
  );
}
