/**
 * The bidirectional-control characters (U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069),
 * as a regular expression's class body: they reorder what a screen shows (a key's name ending
 * in U+202E reads backwards), so no string a person reads in the console may hold one.
 */
const BIDI_CONTROLS = '\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069';

/**
 * What every free string of the API (a URL, a description, a text of the branding) must
 * match: no U+0000 and no bidirectional control. PostgreSQL's text and jsonb cannot hold
 * U+0000, so a string holding one would fail its write (a 500); both are refused where they
 * come in, naming the field. A JSON Schema pattern, so that the OpenAPI document says it too.
 */
export const TEXT_PATTERN = `^[^\\u0000${BIDI_CONTROLS}]*$`;

/**
 * What a name or a label a console shows must match (a key's name, an endpoint's
 * description): no C0 or C1 control character (a line break, an escape sequence) and no
 * bidirectional control.
 */
export const NAME_PATTERN = `^[^\\u0000-\\u001f\\u007f-\\u009f${BIDI_CONTROLS}]*$`;

/** The longest URL accepted anywhere (card update links, origins' lists are bounded apart). */
export const MAX_URL_LENGTH = 2048;

/** `value` as a URL when it is an absolute one of at most MAX_URL_LENGTH characters; else why not. */
export function absoluteUrl(value: string): URL | string {
  if (value.length > MAX_URL_LENGTH) return `must be at most ${MAX_URL_LENGTH} characters`;
  try {
    return new URL(value);
  } catch {
    return 'must be an absolute https URL';
  }
}

/** Null when `value` is an https URL the snippet can link to; else why not. */
export function cardUpdateUrlProblem(value: string): string | null {
  const url = absoluteUrl(value);
  if (typeof url === 'string') return url;
  if (url.protocol !== 'https:') return 'must be an https URL';
  if (url.username || url.password) return 'must not carry credentials';
  return null;
}

/**
 * Null when `value` is a browser origin, exactly as a browser sends it in `Origin`:
 * scheme://host[:port], no path, no trailing slash. http is allowed for local development.
 */
export function originProblem(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'must be an origin such as https://app.example.com';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must be an http or https origin';
  if (url.origin !== value) return `must be an origin exactly as a browser sends it (${url.origin})`;
  return null;
}

// The characters matched are the point: they are written out, never passed on.
// eslint-disable-next-line no-control-regex
const UNSAFE_FOR_DISPLAY = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;

/**
 * `text` with every character a terminal or a page would act on written as `\uXXXX`: the C0
 * and C1 controls, DEL, the line and paragraph separators and the bidirectional marks,
 * embeddings, overrides and isolates. For what a remote party wrote and the API answers (a
 * receiver's redirect, an error it caused): data, never a control, whoever displays it.
 */
export function escapeControls(text: string): string {
  return text.replace(UNSAFE_FOR_DISPLAY, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
