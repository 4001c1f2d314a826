import pino from 'pino';
import type { Logger } from 'pino';
import type { LogLevel } from './config.js';

/** A query parameter's name as it is logged: a plain word, else a value sent where a name goes. */
const LOGGABLE_NAME_RE = /^[A-Za-z_]{1,32}$/;

/**
 * A URL as it is logged: nothing after `?` keeps its value, whatever the separators (`;`,
 * a second `?`) a client put there, since the hmac and customer ids travel in the query.
 * Each `&`-separated pair is logged by its name alone (`name=[redacted]`), and a name that
 * is not a plain word (it may be a value sent without `=`) is redacted as well.
 */
export function redactUrl(url: string): string {
  // A pay or card link's token is a way to a customer's payment page: its first characters
  // tell links apart in a log, the rest is never written.
  const link = /^\/(pay|card)\/([^/?#]{0,6})[^?#]*/.exec(url);
  if (link !== null) return `/${link[1]}/${link[2]}…`;
  const q = url.indexOf('?');
  if (q < 0) return url;
  const pairs = url
    .slice(q + 1)
    .split('&')
    .filter((pair) => pair !== '')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = eq < 0 ? pair : pair.slice(0, eq);
      const shown = LOGGABLE_NAME_RE.test(name) ? name : '[redacted]';
      return eq < 0 ? shown : `${shown}=[redacted]`;
    });
  return `${url.slice(0, q)}?${pairs.join('&')}`;
}

interface LoggedRequest {
  id?: string;
  method?: string;
  url?: string;
  ip?: string;
}

/**
 * Structured JSON logs. Requests are logged by method, redacted URL, id and address only:
 * never headers (Authorization holds keys), never bodies (they hold secrets).
 */
export function createLogger(level: LogLevel, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      redact: {
        paths: ['req.headers.authorization', 'headers.authorization', '*.authorization'],
        censor: '[redacted]',
      },
      serializers: {
        req: (req: LoggedRequest) => ({ id: req.id, method: req.method, url: redactUrl(req.url ?? ''), ip: req.ip }),
        res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
      },
    },
    destination,
  );
}
