import { cardUpdateUrlProblem, MAX_URL_LENGTH } from './validation.js';

/**
 * A tenant's branding: what the snippet shows with a banner or a gate, configured once
 * through the admin API instead of in every page. Texts per locale, colors, a logo, the
 * gate's payment link and a support link. Public: it is served to any page that asks. Which
 * locale's text a reader gets is the browser's to choose (packages/core/src/texts.ts).
 */

export const BRANDING_TEXT_KEYS = [
  'banner_title',
  'banner_body',
  'banner_action',
  'banner_countdown',
  'gate_title',
  'gate_body',
  'gate_action',
  'pay_action',
  'support',
  // What a member (a reader who cannot pay: the snippet's `data-role="member"`) reads in the
  // banner and the gate, which then carry no pay or card link.
  'member_body',
  'member_gate_body',
] as const;
export type BrandingTextKey = (typeof BRANDING_TEXT_KEYS)[number];
export type BrandingTexts = Partial<Record<BrandingTextKey, string>>;

export const BRANDING_COLOR_KEYS = ['accent', 'background', 'text'] as const;
export type BrandingColors = Partial<Record<(typeof BRANDING_COLOR_KEYS)[number], string>>;

export interface Branding {
  /** The gate's link to pay (the lookup names a card update URL for `warning` only). */
  payment_url?: string;
  support_url?: string;
  logo_url?: string;
  colors?: BrandingColors;
  /** By locale tag (`fr`, `fr-CA`) or `default`. */
  texts?: Record<string, BrandingTexts>;
}

export const MAX_BRANDING_LOCALES = 30;
export const MAX_BRANDING_TEXT = 300;
export const MAX_BRANDING_URL = MAX_URL_LENGTH;
/** BCP 47 as browsers report it, simplified: a language, then subtags; or `default`. */
export const LOCALE_RE = /^(default|[a-z]{2,3}(-[A-Za-z0-9]{2,8}){0,3})$/;
const COLOR_RE = /^#[0-9a-fA-F]{6}$/;

/**
 * `banner_countdown` is a sentence around the time left before a lockout: `{time}` ("in 3
 * days", in the reader's language) once, `{date}` (the date and time) at most once, no other
 * `{...}`. The snippet puts the values in as text, never as HTML.
 */
export const COUNTDOWN_PLACEHOLDERS = ['{time}', '{date}'] as const;

function countdownProblem(text: string): string | null {
  const found = text.match(/\{[^{}]*\}/g) ?? [];
  const other = found.find((p) => !(COUNTDOWN_PLACEHOLDERS as readonly string[]).includes(p));
  if (other !== undefined) return `has an unknown placeholder ${other} (only {time} and {date})`;
  if (found.filter((p) => p === '{time}').length !== 1) return 'must hold {time} exactly once';
  if (found.filter((p) => p === '{date}').length > 1) return 'may hold {date} at most once';
  return null;
}

/** Links are https, as the card update URL is (the same check). */
function urlProblem(value: unknown): string | null {
  return typeof value === 'string' ? cardUpdateUrlProblem(value) : 'must be a string';
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Null when `value` is a valid branding; else the field at fault and why (`texts.fr.gate_title: ...`). */
export function brandingProblem(value: unknown): string | null {
  if (!isObject(value)) return 'branding: must be an object';
  for (const [key, v] of Object.entries(value)) {
    if (key === 'payment_url' || key === 'support_url' || key === 'logo_url') {
      const why = urlProblem(v);
      if (why) return `branding.${key}: ${why}`;
    } else if (key === 'colors') {
      if (!isObject(v)) return 'branding.colors: must be an object';
      for (const [name, color] of Object.entries(v)) {
        if (!(BRANDING_COLOR_KEYS as readonly string[]).includes(name))
          return `branding.colors.${name}: is not a known color (${BRANDING_COLOR_KEYS.join(', ')})`;
        if (typeof color !== 'string' || !COLOR_RE.test(color))
          return `branding.colors.${name}: must be a color such as #1a2b3c`;
      }
    } else if (key === 'texts') {
      if (!isObject(v)) return 'branding.texts: must be an object of locales';
      const locales = Object.entries(v);
      if (locales.length > MAX_BRANDING_LOCALES) return `branding.texts: at most ${MAX_BRANDING_LOCALES} locales`;
      for (const [locale, texts] of locales) {
        if (!LOCALE_RE.test(locale))
          return `branding.texts.${locale}: is not a locale tag such as fr or fr-CA (or default)`;
        if (!isObject(texts)) return `branding.texts.${locale}: must be an object of texts`;
        for (const [name, text] of Object.entries(texts)) {
          if (!(BRANDING_TEXT_KEYS as readonly string[]).includes(name))
            return `branding.texts.${locale}.${name}: is not a known text (${BRANDING_TEXT_KEYS.join(', ')})`;
          if (typeof text !== 'string' || text.trim() === '' || text.length > MAX_BRANDING_TEXT)
            return `branding.texts.${locale}.${name}: must be 1 to ${MAX_BRANDING_TEXT} characters`;
          const why = name === 'banner_countdown' ? countdownProblem(text) : null;
          if (why) return `branding.texts.${locale}.${name}: ${why}`;
        }
      }
    } else {
      return `branding.${key}: is not a known field`;
    }
  }
  return null;
}
