import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

/**
 * What the receiver does with the n-th request (from 0): answer a status, hang (never
 * answer, until the receiver closes), or answer 200 and never end the body.
 */
export type Behaviour = (n: number, received: Received) => number | 'hang' | 'endless-200';

/** A tenant's backend on a loopback port: it records every request and answers as told. */
export class Receiver {
  readonly received: Received[] = [];
  behaviour: Behaviour = () => 200;
  /** Requests being answered right now, and the most at once. */
  open = 0;
  maxOpen = 0;
  /** Holds each answer until this resolves (a slow receiver), when set. */
  hold: Promise<void> | null = null;
  /** Answers each request this long after it arrived (a receiver doing some work). */
  delayMs = 0;
  private readonly hung: ServerResponse[] = [];
  private server!: Server;
  port = 0;

  static async start(behaviour?: Behaviour, host = '127.0.0.1'): Promise<Receiver> {
    const r = new Receiver();
    if (behaviour) r.behaviour = behaviour;
    r.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const received = { headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() };
        const n = r.received.length;
        r.received.push(received);
        r.open += 1;
        r.maxOpen = Math.max(r.maxOpen, r.open);
        res.on('close', () => {
          r.open -= 1;
        });
        const answer = r.behaviour(n, received);
        if (answer === 'hang' || answer === 'endless-200') {
          if (answer === 'endless-200')
            res.writeHead(200, { 'content-type': 'text/plain' }).write('ok, and more to come');
          r.hung.push(res);
          return;
        }
        const send = () =>
          res.writeHead(answer, { 'content-type': 'text/plain' }).end(answer >= 300 ? `nope ${answer}` : 'ok');
        if (r.hold) void r.hold.then(send);
        else if (r.delayMs > 0) setTimeout(send, r.delayMs);
        else send();
      });
    });
    await new Promise<void>((resolve) => r.server.listen(0, host, resolve));
    r.port = (r.server.address() as AddressInfo).port;
    return r;
  }

  url(path = '/hooks/dunwall', host = '127.0.0.1'): string {
    return `http://${host}:${this.port}${path}`;
  }

  bodies<T = Record<string, unknown>>(): T[] {
    return this.received.map((r) => JSON.parse(r.body) as T);
  }

  async close(): Promise<void> {
    for (const res of this.hung.splice(0)) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
