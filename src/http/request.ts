import type { IncomingMessage } from 'node:http';
import { randomBytes } from 'node:crypto';

/**
 * The request's Authorization header; every value when there are several. Node keeps the
 * first of repeated Authorization headers and drops the rest, so they are counted here.
 */
export function authorizationOf(req: { rawHeaders: readonly string[]; headers: { authorization?: string | undefined } }): string | string[] | undefined {
  let values: string[] | undefined;
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i];
    if (name !== undefined && name.length === 13 && name.toLowerCase() === 'authorization') (values ??= []).push(req.rawHeaders[i + 1] ?? '');
  }
  return values !== undefined && values.length > 1 ? values : req.headers.authorization;
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
