import pino from 'pino';
import type { Logger } from 'pino';
import type { LogLevel } from './config.js';

/** The hmac query value is a per-customer credential: it never reaches a log line. */
export function redactUrl(url: string): string {
  return url.replace(/([?&]hmac=)[^&#]*/gi, '$1[redacted]');
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
