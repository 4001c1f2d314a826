/**
 * What React Native needs beside the shared view (`@dunwall/core`): links checked without
 * `URL`, and the device's language. React Native's own `URL` throws on `protocol` unless the
 * app installs a polyfill, and adds a slash to what it is given, so the shared `safeUrl` would
 * drop every link: here a link is an `https://` URL with a host, taken as given (Linking opens
 * it as is), for the shared view's links.
 */

const HTTPS = /^https:\/\/[^\s/?#\\]+(?:[/?#][^\s]*)?$/i;
/** http to this machine only (127.0.0.0/8, ::1, localhost), as the shared `safeUrl` takes it. */
const LOOPBACK_HTTP = /^http:\/\/(?:localhost|127(?:\.\d{1,3}){3}|\[::1\])(?::\d{1,5})?(?:[/?#][^\s]*)?$/i;

/** An https link (or an http one to this machine), or null. */
export function httpsUrl(value: string | null | undefined): string | null {
  return value && value.length <= 2048 && (HTTPS.test(value) || LOOPBACK_HTTP.test(value)) ? value : null;
}

/** The device's language (`Intl`, as Hermes and JavaScriptCore report it), else English. */
export function deviceLanguages(): string[] {
  try {
    return [Intl.DateTimeFormat().resolvedOptions().locale || 'en'];
  } catch {
    return ['en'];
  }
}
