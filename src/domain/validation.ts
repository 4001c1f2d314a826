/**
 * What every free string of the API (a URL, a description, a text of the branding) must
 * match: no U+0000. PostgreSQL's text and jsonb cannot hold that character, so a string
 * holding one would fail its write (a 500); it is refused where it comes in, naming the
 * field. A JSON Schema pattern, so that the OpenAPI document says it too.
 */
export const TEXT_PATTERN = '^[^\\u0000]*$';

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
