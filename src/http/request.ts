import type { IncomingMessage } from 'node:http';
import { randomBytes } from 'node:crypto';

/**
 * What the lookup and the admin API read of a request's headers, found in one pass over
 * the raw headers (Node builds its header object only when asked). Authorization is
 * counted: Node keeps the first of repeated ones and drops the rest, and the contract's one
 * token is not there to pick when there are several.
 */
export interface SeenHeaders {
  authorization: string | string[] | undefined;
  origin: string | undefined;
  /** The presented X-Request-Id; '' when repeated (it is then no one id). */
  requestId: string | undefined;
  host: boolean;
}

/** `name` is `lower` in any case; `lower` is lowercase. The usual spellings are matched without a copy. */
function named(name: string, lower: string, usual: string): boolean {
  return name.length === lower.length && (name === usual || name === lower || name.toLowerCase() === lower);
}

export function seenHeaders(req: { rawHeaders: readonly string[] }): SeenHeaders {
  const raw = req.rawHeaders;
  const seen: SeenHeaders = { authorization: undefined, origin: undefined, requestId: undefined, host: false };
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    const value = raw[i + 1] as string;
    if (named(name, 'authorization', 'Authorization')) {
      const a = seen.authorization;
      seen.authorization = a === undefined ? value : typeof a === 'string' ? [a, value] : [...a, value];
    } else if (named(name, 'host', 'Host')) {
      seen.host = true;
    } else if (named(name, 'origin', 'Origin')) {
      seen.origin ??= value;
    } else if (named(name, 'x-request-id', 'X-Request-Id')) {
      seen.requestId = seen.requestId === undefined ? value : '';
    }
  }
  return seen;
}

/** The request's Authorization header; every value when there are several. */
export function authorizationOf(req: { rawHeaders: readonly string[] }): string | string[] | undefined {
  return seenHeaders(req).authorization;
}

/** A presented X-Request-Id is echoed when it looks like one. */
const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Request ids: this process's random prefix and a counter (unique across processes and
 * restarts, nothing random drawn per request). A client or proxy that presents a valid
 * X-Request-Id gets it back instead, so that its logs and ours name the same request.
 */
export class RequestIds {
  private readonly prefix = `${randomBytes(4).toString('hex')}-`;
  private counter = 0;

  next(): string {
    this.counter += 1;
    return this.prefix + this.counter.toString(36);
  }

  /** The id of `req`: the one it presents, or the next of this process. */
  of(req: IncomingMessage): string {
    const presented = req.headers['x-request-id'];
    return this.fromPresented(typeof presented === 'string' ? presented : undefined);
  }

  /** The presented id when valid, else the next of this process. */
  fromPresented(presented: string | undefined): string {
    return presented !== undefined && REQUEST_ID_RE.test(presented) ? presented : this.next();
  }
}
