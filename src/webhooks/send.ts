import { lookup as dnsLookup } from 'node:dns';
import type { LookupAddress } from 'node:dns';
import { request as httpRequest } from 'node:http';
import type { IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import type { LookupFunction } from 'node:net';
import { addressProblem } from '../domain/webhooks.js';
import type { AllowedNetworks } from '../domain/webhooks.js';

/** What one POST came to. */
export interface SendResult {
  /** The response's status; null when none came (refused, unreachable, timed out). */
  statusCode: number | null;
  latencyMs: number;
  /** Why it failed, for the endpoint's admin; null on a 2xx. */
  error: string | null;
  /** The address was not allowed: nothing was sent. */
  refused: boolean;
}

export interface SendOptions {
  /** The whole attempt, from the DNS lookup to the response's status line. */
  timeoutMs: number;
  allowed: AllowedNetworks;
  /** Resolves a host name (tests point names at loopback). */
  resolve?: (host: string) => Promise<LookupAddress[]>;
  monotonicNow?: () => number;
}

/** A body snippet kept with a failed attempt, for the admin to read. */
const BODY_SNIPPET_BYTES = 200;

class Refused extends Error {}

function resolveAll(host: string): Promise<LookupAddress[]> {
  return new Promise((resolve, reject) => {
    dnsLookup(host, { all: true, verbatim: true }, (err, addresses) => (err ? reject(err) : resolve(addresses)));
  });
}

/**
 * A DNS lookup that refuses a host any of whose addresses is not allowed, and connects to
 * an address it checked: a name that resolves to a public address when Dunwall checks it and
 * to a private one when the socket connects (DNS rebinding) cannot get through.
 */
function guardedLookup(allowed: AllowedNetworks, resolve: (host: string) => Promise<LookupAddress[]>): LookupFunction {
  return (hostname, options, callback) => {
    resolve(hostname).then(
      (addresses) => {
        const first = addresses[0];
        if (first === undefined) return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '', 0);
        for (const a of addresses) {
          const why = addressProblem(a.address, allowed);
          if (why !== null) return callback(new Refused(`refused: ${hostname} resolves to ${why}`), '', 0);
        }
        if ((options as { all?: boolean }).all === true) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
        callback(null, first.address, first.family);
      },
      (err: Error) => callback(err as NodeJS.ErrnoException, '', 0),
    );
  };
}

function printable(body: Buffer): string {
  return body.toString('utf8').replace(/[^\x20-\x7e]+/g, ' ').trim();
}

/**
 * POSTs `body` to `url` once: no redirect followed, no connection kept, the response's body
 * read up to a few hundred bytes and dropped. Never throws.
 */
export function sendWebhook(url: string, headers: Record<string, string>, body: string, opts: SendOptions): Promise<SendResult> {
  const clock = opts.monotonicNow ?? (() => performance.now());
  const started = clock();
  const elapsed = () => Math.max(0, clock() - started);
  return new Promise<SendResult>((resolve) => {
    let settled = false;
    const finish = (result: Omit<SendResult, 'latencyMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...result, latencyMs: elapsed() });
    };
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      return finish({ statusCode: null, error: 'the URL does not parse', refused: true });
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
      lookup: guardedLookup(opts.allowed, opts.resolve ?? resolveAll),
      headers: { ...headers, 'content-length': String(payload.length), connection: 'close' },
    });
    const timer = setTimeout(() => {
      finish({ statusCode: null, error: `timed out after ${opts.timeoutMs} ms`, refused: false });
      req.destroy();
    }, opts.timeoutMs);
    req.on('error', (err: Error) => {
      if (err instanceof Refused) return finish({ statusCode: null, error: err.message, refused: true });
      finish({ statusCode: null, error: err.message || (err as NodeJS.ErrnoException).code || 'connection failed', refused: false });
    });
    req.on('response', (res: IncomingMessage) => {
      const status = res.statusCode ?? 0;
      const chunks: Buffer[] = [];
      let size = 0;
      const done = () => {
        const snippet = printable(Buffer.concat(chunks).subarray(0, BODY_SNIPPET_BYTES));
        const ok = status >= 200 && status < 300;
        const error = ok
          ? null
          : status >= 300 && status < 400
            ? `HTTP ${status}: redirects are not followed${res.headers.location ? ` (to ${String(res.headers.location).slice(0, BODY_SNIPPET_BYTES)})` : ''}`
            : `HTTP ${status}${snippet ? `: ${snippet}` : ''}`;
        finish({ statusCode: status, error, refused: false });
        req.destroy();
      };
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size <= BODY_SNIPPET_BYTES) chunks.push(chunk);
        else {
          chunks.push(chunk);
          done();
        }
      });
      res.on('end', done);
      res.on('error', done);
    });
    req.end(payload);
  });
}
