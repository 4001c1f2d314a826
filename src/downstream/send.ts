import { Resolver } from 'node:dns/promises';
import type { LookupAddress } from 'node:dns';
import { request as httpRequest } from 'node:http';
import type { IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import type { LookupFunction } from 'node:net';
import { addressProblem } from '../domain/downstream-endpoints.js';
import type { AllowedNetworks } from '../domain/downstream-endpoints.js';

/** What one POST came to. */
export interface SendResult {
  /** The response's status; null when none came (refused, unreachable, timed out). */
  statusCode: number | null;
  latencyMs: number;
  /** Why it failed, for the endpoint's admin; null on a 2xx. */
  error: string | null;
  /** The address was not allowed: nothing was sent. */
  refused: boolean;
  /** Ended by the caller's signal: nothing is known of it. */
  aborted: boolean;
}

export interface SendOptions {
  /** The whole attempt, from the DNS lookup to the response's status line. */
  timeoutMs: number;
  allowed: AllowedNetworks;
  /** http:// URLs are sent (local development); else only https:// ones. */
  allowHttp: boolean;
  /** Resolves a host name (tests point names at loopback). */
  resolve?: (host: string, timeoutMs: number) => Promise<LookupAddress[]>;
  /** Ends the attempt at once (the service is stopping, or its slot goes to another tenant): the result says `aborted`. */
  signal?: AbortSignal;
  monotonicNow?: () => number;
}

/** A body snippet kept with a failed attempt, for the admin to read. */
const BODY_SNIPPET_BYTES = 200;

class Refused extends Error {}

/**
 * A host name's IPv4 and IPv6 addresses, from DNS (c-ares, not the system's resolver: its
 * queries are bounded in time and cancelled on timeout, and never hold one of libuv's few
 * threads the way a slow getaddrinfo would). `localhost` is the loopback addresses.
 */
async function resolveAll(host: string, timeoutMs: number): Promise<LookupAddress[]> {
  if (host === 'localhost' || host.endsWith('.localhost') || host === 'localhost.') {
    return [
      { address: '127.0.0.1', family: 4 },
      { address: '::1', family: 6 },
    ];
  }
  const resolver = new Resolver({ timeout: timeoutMs, tries: 1 });
  const timer = setTimeout(() => resolver.cancel(), timeoutMs);
  try {
    const [v4, v6] = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)]);
    const addresses = [
      ...(v4.status === 'fulfilled' ? v4.value.map((address) => ({ address, family: 4 })) : []),
      ...(v6.status === 'fulfilled' ? v6.value.map((address) => ({ address, family: 6 })) : []),
    ];
    if (addresses.length === 0) {
      const reason = v4.status === 'rejected' ? (v4.reason as NodeJS.ErrnoException) : null;
      throw Object.assign(new Error(`${host} does not resolve${reason?.code ? ` (${reason.code})` : ''}`), {
        code: reason?.code ?? 'ENOTFOUND',
      });
    }
    return addresses;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A DNS lookup that refuses a host any of whose addresses is not allowed, and connects to
 * an address it checked: a name that resolves to a public address when Dunwall checks it and
 * to a private one when the socket connects (DNS rebinding) cannot get through.
 */
function guardedLookup(
  allowed: AllowedNetworks,
  resolve: NonNullable<SendOptions['resolve']>,
  timeoutMs: number,
): LookupFunction {
  return (hostname, options, callback) => {
    const answer = async (): Promise<void> => {
      let addresses: LookupAddress[];
      try {
        addresses = await resolve(hostname, timeoutMs);
      } catch (err) {
        return callback(err as NodeJS.ErrnoException, '', 0);
      }
      const first = addresses[0];
      if (first === undefined)
        return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '', 0);
      for (const a of addresses) {
        const why = addressProblem(a.address, allowed);
        if (why !== null) return callback(new Refused(`refused: ${hostname} resolves to ${why}`), '', 0);
      }
      if ((options as { all?: boolean }).all === true)
        return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      callback(null, first.address, first.family);
    };
    void answer();
  };
}

function printable(body: Buffer): string {
  return body
    .toString('utf8')
    .replace(/[^\x20-\x7e]+/g, ' ')
    .trim();
}

/**
 * POSTs `body` to `url` once: no redirect followed, no connection kept; a 2xx ends it at
 * its status line, another status's body is read up to a few hundred bytes for the admin,
 * all within the timeout. Never throws.
 */
export function sendDownstream(
  url: string,
  headers: Record<string, string>,
  body: string,
  opts: SendOptions,
): Promise<SendResult> {
  const clock = opts.monotonicNow ?? (() => performance.now());
  const started = clock();
  const elapsed = () => Math.max(0, clock() - started);
  return new Promise<SendResult>((resolve) => {
    let settled = false;
    // Set once the request exists; `finish` may run before (a URL refused outright).
    const armed: { timer?: NodeJS.Timeout; onAbort?: () => void } = {};
    const finish = (result: Omit<SendResult, 'latencyMs' | 'aborted'> & { aborted?: boolean }) => {
      if (settled) return;
      settled = true;
      clearTimeout(armed.timer);
      if (armed.onAbort) opts.signal?.removeEventListener('abort', armed.onAbort);
      resolve({ aborted: false, ...result, latencyMs: elapsed() });
    };
    if (opts.signal?.aborted)
      return finish({ statusCode: null, error: 'the attempt was ended', refused: false, aborted: true });
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      return finish({ statusCode: null, error: 'the URL does not parse', refused: true });
    }
    if (target.protocol !== 'https:' && !(target.protocol === 'http:' && opts.allowHttp)) {
      return finish({
        statusCode: null,
        error: `refused: ${target.protocol} URLs are not sent (http needs DUNWALL_WEBHOOK_ALLOW_HTTP_LOOPBACK=true)`,
        refused: true,
      });
    }
    const host = target.hostname.replace(/^\[|\]$/g, '');
    // A literal address is never looked up: it is checked here.
    if (isIP(host) !== 0) {
      const why = addressProblem(host, opts.allowed);
      if (why !== null) return finish({ statusCode: null, error: `refused: ${why}`, refused: true });
    }
    const payload = Buffer.from(body, 'utf8');
    const send = target.protocol === 'http:' ? httpRequest : httpsRequest;
    const req = send(target, {
      method: 'POST',
      agent: false,
      lookup: guardedLookup(opts.allowed, opts.resolve ?? resolveAll, opts.timeoutMs),
      headers: { ...headers, 'content-length': String(payload.length), connection: 'close' },
    });
    armed.timer = setTimeout(() => {
      finish({ statusCode: null, error: `timed out after ${opts.timeoutMs} ms`, refused: false });
      req.destroy();
    }, opts.timeoutMs);
    armed.onAbort = () => {
      finish({ statusCode: null, error: 'the attempt was ended', refused: false, aborted: true });
      req.destroy();
    };
    opts.signal?.addEventListener('abort', armed.onAbort, { once: true });
    req.on('error', (err: Error) => {
      if (err instanceof Refused) return finish({ statusCode: null, error: err.message, refused: true });
      finish({
        statusCode: null,
        error: err.message || (err as NodeJS.ErrnoException).code || 'connection failed',
        refused: false,
      });
    });
    req.on('response', (res: IncomingMessage) => {
      const status = res.statusCode ?? 0;
      // A 2xx is all that counts: its body is not waited for.
      if (status >= 200 && status < 300) {
        finish({ statusCode: status, error: null, refused: false });
        req.destroy();
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      const done = () => {
        const snippet = printable(Buffer.concat(chunks).subarray(0, BODY_SNIPPET_BYTES));
        const error =
          status >= 300 && status < 400
            ? `HTTP ${status}: redirects are not followed${res.headers.location ? ` (to ${String(res.headers.location).slice(0, BODY_SNIPPET_BYTES)})` : ''}`
            : `HTTP ${status}${snippet ? `: ${snippet}` : ''}`;
        finish({ statusCode: status, error, refused: false });
        req.destroy();
      };
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        chunks.push(chunk);
        if (size > BODY_SNIPPET_BYTES) done();
      });
      res.on('end', done);
      res.on('error', done);
    });
    req.end(payload);
  });
}
