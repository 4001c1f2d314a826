/**
 * What React Native needs beside the shared view (`../../react/src/core/view.ts`): links
 * checked without `URL`, and a countdown without `Intl.RelativeTimeFormat`.
 *
 * - React Native's own `URL` throws on `protocol` unless the app installs a polyfill, and adds
 *   a slash to what it is given, so the shared `safeUrl` would drop every link: here a link is
 *   an `https://` URL with a host, taken as given (Linking opens it as is), for the shared
 *   `payLinks`.
 * - Hermes has no `Intl.RelativeTimeFormat`: the countdown then says the date where it would
 *   say the time left.
 */
import { countdown } from '../../react/src/core/view.js';

const HTTPS = /^https:\/\/[^\s/?#\\]+(?:[/?#][^\s]*)?$/i;

/** An https link, or null. */
export function httpsUrl(value: string | null | undefined): string | null {
  return value && value.length <= 2048 && HTTPS.test(value) ? value : null;
}

/** The countdown sentence; where `Intl.RelativeTimeFormat` is missing (Hermes), `{time}` is the date. */
export function countdownText(at: number, locales: readonly string[], text: string, now: number): string {
  if (typeof Intl.RelativeTimeFormat === 'function') return countdown(at, locales, text, now)[0];
  let date: string;
  try {
    date = new Intl.DateTimeFormat(locales as string[], { dateStyle: 'medium', timeStyle: 'short' }).format(at);
  } catch {
    date = new Date(at).toLocaleString();
  }
  return text.split('{time}').join(date).split('{date}').join(date);
}

/** The device's language (`Intl`, as Hermes and JavaScriptCore report it), else English. */
export function deviceLanguages(): string[] {
  try {
    return [Intl.DateTimeFormat().resolvedOptions().locale || 'en'];
  } catch {
    return ['en'];
  }
}
