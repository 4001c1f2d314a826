import pino from 'pino';
import type { Logger } from 'pino';
import type { LogLevel } from './config.js';

/**
 * The hmac query value is a per-customer credential: it never reaches a log line. A
 * parameter is redacted when its name, decoded as the query parser decodes it, mentions
 * hmac in any case, so that `%68mac=` is caught; a name that does not decode is redacted too.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const pairs = url
    .slice(q + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      if (eq < 0) return pair;
      let name: string;
      try {
        name = decodeURIComponent(pair.slice(0, eq).replace(/\+/g, ' '));
      } catch {
        return `${pair.slice(0, eq)}=[redacted]`;
      }
      return /hmac/i.test(name) ? `${pair.slice(0, eq)}=[redacted]` : pair;
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
      redact: { paths: ['req.headers.authorization', 'headers.authorization', '*.authorization'], censor: '[redacted]' },
      serializers: {
        req: (req: LoggedRequest) => ({ id: req.id, method: req.method, url: redactUrl(req.url ?? ''), ip: req.ip }),
        res: (res: { statusCode?: number }) => ({ statusCode: res.statusCode }),
      },
    },
    destination,
  );
}
