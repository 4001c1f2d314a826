/**
 * The middleware row's server: a bare Express app with one JSON route, with or without
 * `dunwallExpress` in front of it (`BENCH_MIDDLEWARE=on`), answering from an in-memory copy:
 * no network, no Dunwall service. What the row measures is what the middleware adds to a
 * request it lets through: reading the customer, one lookup in the copy, the decision.
 *
 * The copy holds what `createDunwall` holds, the non-active customers only: of the bench's
 * customers `cus_m1`...`cus_m<BENCH_CUSTOMERS>`, every tenth is `warning` (let through by the
 * default allow list); the others are not held and answered `active`. The customer is read
 * from the `Authorization` header (a session token's stand-in), as the load generator's
 * request lines carry one.
 *
 * Env: PORT, HOST (127.0.0.1), BENCH_MIDDLEWARE (on|off), BENCH_CUSTOMERS (10000).
 */
import express from 'express';
import { dunwallExpress } from '../packages/node/src/middleware/index.js';
import type { Dunwall, StatusAnswer } from '../packages/node/src/types.js';

export const MIDDLEWARE_BODY = '{"projects":[]}';
export const benchCustomer = (n: number): string => `cus_m${n}`;
export const isBenchWarning = (n: number): boolean => n % 10 === 0;

/** An in-memory stand-in of the copy: a map of the non-active customers, as the copy keeps them. */
class MemoryCopy implements Dunwall {
  private readonly held = new Map<string, StatusAnswer>();
  private readonly active: StatusAnswer = Object.freeze({
    status: 'active',
    lockout_at: null,
    pay_url: null,
    entitlements: {},
    source: 'feed',
  });

  constructor(customers: number) {
    for (let n = 1; n <= customers; n += 1) {
      if (!isBenchWarning(n)) continue;
      this.held.set(benchCustomer(n), {
        status: 'warning',
        lockout_at: '2030-01-01T00:00:00Z',
        pay_url: `https://invoice.stripe.com/i/acct_bench/test_${n}`,
        entitlements: {},
        source: 'feed',
      });
    }
  }

  status(customerId: string): StatusAnswer {
    return this.held.get(customerId) ?? this.active;
  }

  async ready(): Promise<void> {}

  async close(): Promise<void> {}
}

const OPTIONS = {
  customer: (req: { headers: { authorization?: string | undefined } }) =>
    req.headers.authorization?.slice('Bearer '.length),
  exempt: ['/billing', '/billing/*', '/logout'],
  redirectTo: '/billing',
};

/**
 * The middleware's own cost, in this process: nanoseconds a call for a request it lets
 * through (the best of 5 rounds of `calls`), with Node's request and response reduced to what
 * it reads and writes. Steadier than two servers' rates on a shared machine.
 */
export function middlewareCostNs(customers: number, calls = 1_000_000): number {
  const middleware = dunwallExpress(new MemoryCopy(customers), OPTIONS);
  const requests = Array.from({ length: customers }, (_, i) => ({
    method: 'GET',
    url: '/api/projects',
    originalUrl: '/api/projects',
    headers: { authorization: `Bearer ${benchCustomer(i + 1)}`, accept: '*/*' },
  }));
  const res = { statusCode: 200, setHeader: () => undefined, end: () => undefined };
  let passed = 0;
  const next = () => {
    passed += 1;
  };
  let best = Infinity;
  for (let round = 0; round < 5; round += 1) {
    const started = process.hrtime.bigint();
    for (let i = 0; i < calls; i += 1) middleware(requests[i % customers] ?? { headers: {} }, res, next);
    best = Math.min(best, Number(process.hrtime.bigint() - started) / calls);
  }
  if (passed !== 5 * calls) throw new Error(`the middleware let ${passed} of ${5 * calls} requests through`);
  return best;
}

function main(): void {
  const withMiddleware = process.env.BENCH_MIDDLEWARE === 'on';
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.get('/readyz', (_req, res) => {
    res.type('json').send('{"status":"ok"}');
  });
  if (withMiddleware) {
    const copy = new MemoryCopy(Number(process.env.BENCH_CUSTOMERS ?? 10_000));
    app.use(dunwallExpress(copy, OPTIONS));
  }
  app.get('/api/projects', (_req, res) => {
    res.type('json').send(MIDDLEWARE_BODY);
  });
  const server = app.listen(Number(process.env.PORT ?? 0), process.env.HOST ?? '127.0.0.1');
  server.keepAliveTimeout = 72_000;
  const stop = () => server.close(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

// Started by the bench with BENCH_MIDDLEWARE set; imported by it for the names above.
if (process.env.BENCH_MIDDLEWARE === 'on' || process.env.BENCH_MIDDLEWARE === 'off') main();
